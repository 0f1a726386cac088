package embedded

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestCheckNodePath(t *testing.T) {
	tests := []struct {
		path string
		code codes.Code
		want string
	}{
		{"/var/lib/kubelet/pods/x/volumes/y/mount", codes.OK, ""},
		{"/" + strings.Repeat("a", 300), codes.OK, ""}, // paths may pass CSI's 128-byte limit
		{"", codes.InvalidArgument, "is required"},
		{"relative/path", codes.InvalidArgument, "not an absolute path"},
		{"/with\x00nul", codes.InvalidArgument, "NUL"},
		{"/" + strings.Repeat("a", maxPathBytes), codes.InvalidArgument, "at most 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) { wantCode(t, checkNodePath("target_path", tc.path), tc.code, tc.want) })
	}
}

func TestCheckNodeCapability(t *testing.T) {
	withMount := func(m *csi.VolumeCapability_MountVolume) *csi.VolumeCapability {
		return &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: m},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw},
		}
	}
	tests := []struct {
		name string
		c    *csi.VolumeCapability
		code codes.Code
		want string
	}{
		{"mount", mountCap(snw), codes.OK, ""},
		{"block", blockCap(snmw), codes.OK, ""},
		{"ext4 named", withMount(&csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}), codes.OK, ""},
		{"missing", nil, codes.InvalidArgument, "volume_capability is required"},
		{"no access mode", &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}, codes.InvalidArgument, "access_mode.mode is required"},
		{"no access type", &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}}, codes.InvalidArgument, "access_type is required"},
		{"mount group", withMount(&csi.VolumeCapability_MountVolume{VolumeMountGroup: "1000"}), codes.InvalidArgument, "VOLUME_MOUNT_GROUP"},
		{"huge mount flags", withMount(&csi.VolumeCapability_MountVolume{MountFlags: []string{strings.Repeat("x", 5000)}}), codes.InvalidArgument, "mount_flags"},
		{"multi-node writer", mountCap(mnmw), codes.FailedPrecondition, "not supported"},
		{"xfs", withMount(&csi.VolumeCapability_MountVolume{FsType: "xfs"}), codes.FailedPrecondition, "xfs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, checkNodeCapability("volume_capability", tc.c), tc.code, tc.want) })
	}
}

func TestReadonlyFromContext(t *testing.T) {
	tests := []struct {
		pc   map[string]string
		want bool
		code codes.Code
	}{
		{nil, false, codes.OK},
		{map[string]string{"other": "x"}, false, codes.OK},
		{map[string]string{"readonly": "true"}, true, codes.OK},
		{map[string]string{"readonly": "false"}, false, codes.OK},
		{map[string]string{"readonly": "yes please"}, false, codes.InvalidArgument},
	}
	for _, tc := range tests {
		got, err := readonlyFromContext(tc.pc)
		wantCode(t, err, tc.code)
		if got != tc.want {
			t.Errorf("%v: readonly %t, want %t", tc.pc, got, tc.want)
		}
	}
}

// TestMountRequest: read-only is asked for by the publish_context or by "ro" among the mount
// flags, and a bad entry in either is INVALID_ARGUMENT naming its field.
func TestMountRequest(t *testing.T) {
	withFlags := func(flags ...string) *csi.VolumeCapability {
		return &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: flags}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw},
		}
	}
	tests := []struct {
		name     string
		c        *csi.VolumeCapability
		pc       map[string]string
		readonly bool
		code     codes.Code
		want     string
	}{
		{"plain", mountCap(snw), nil, false, codes.OK, ""},
		{"block", blockCap(snw), map[string]string{"readonly": "false"}, false, codes.OK, ""},
		{"context", mountCap(snw), map[string]string{"readonly": "true"}, true, codes.OK, ""},
		{"flag", withFlags("noatime,ro"), nil, true, codes.OK, ""},
		{"bad context", withFlags("bind"), map[string]string{"readonly": "maybe"}, false, codes.InvalidArgument, "publish_context"},
		{"bad flag", withFlags("bind"), nil, false, codes.InvalidArgument, "volume_capability.mount.mount_flags: mount flag \"bind\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, readonly, err := mountRequest(tc.c, tc.pc)
			wantCode(t, err, tc.code, tc.want)
			if readonly != tc.readonly {
				t.Errorf("readonly %t, want %t", readonly, tc.readonly)
			}
		})
	}
}

func TestAllowsManyTargets(t *testing.T) {
	for mode, want := range map[csi.VolumeCapability_AccessMode_Mode]bool{
		snw: false, snsw: false, snro: false, snmw: true, mnro: true, mnmw: true,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER: true,
	} {
		if got := allowsManyTargets(mode); got != want {
			t.Errorf("allowsManyTargets(%s) = %t, want %t", mode, got, want)
		}
	}
}

func TestBlockFileName(t *testing.T) {
	for id, want := range map[string]string{
		"vol-0123456789abcdef": "vol-0123456789abcdef",
		"":                     "",
		".":                    "",
		"..":                   "",
		"../../etc/passwd":     "",
		"a/b":                  "",
		"nul\x00":              "",
	} {
		if got := blockFileName(id); got != want {
			t.Errorf("blockFileName(%q) = %q, want %q", id, got, want)
		}
	}
}
