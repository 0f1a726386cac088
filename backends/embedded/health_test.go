package embedded

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// healthEntry is a VolumeHealthEntry without its message, for comparisons.
type healthEntry struct {
	status csi.VolumeHealthErrorType
	reason string
}

func entriesOf(h *csi.VolumeHealth) []healthEntry {
	var out []healthEntry
	for _, e := range h.GetHealthStatuses() {
		out = append(out, healthEntry{e.GetStatus(), e.GetReason()})
	}
	return out
}

var (
	imageMissing = []healthEntry{
		{csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageMissing},
		{csi.VolumeHealthErrorType_DATA_LOSS, reasonImageMissing},
	}
	imageUnreadable = []healthEntry{{csi.VolumeHealthErrorType_INACCESSIBLE, reasonImageUnreadable}}
	imageTruncated  = []healthEntry{{csi.VolumeHealthErrorType_DATA_LOSS, reasonImageTruncated}}
)

// The image damage a test can do to a volume: what an operator's mistake or a failing disk
// would do behind the appliance's back.
func removeImage(t *testing.T, a *Appliance, id string) {
	t.Helper()
	if err := os.Remove(a.images.volumePath(id)); err != nil {
		t.Fatal(err)
	}
}

func truncateImage(t *testing.T, a *Appliance, id string, size int64) {
	t.Helper()
	if err := os.Truncate(a.images.volumePath(id), size); err != nil {
		t.Fatal(err)
	}
}

// replaceImageWithDir makes the image unreadable even for root, who ignores permissions.
func replaceImageWithDir(t *testing.T, a *Appliance, id string) {
	t.Helper()
	removeImage(t, a, id)
	if err := os.Mkdir(a.images.volumePath(id), 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestControllerHealthCapabilities(t *testing.T) {
	resp, err := (&controllerServer{a: openTest(t, Config{})}).ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.ControllerServiceCapability_RPC_Type
	for _, c := range resp.GetCapabilities() {
		got = append(got, c.GetRpc().GetType())
	}
	for _, want := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("capabilities %v lack %v", got, want)
		}
	}
}

func TestControllerGetVolumeHealth(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	healthy := grpVolume(t, a, "healthy")
	grown := grpVolume(t, a, "grown") // a crash between growing the image and recording it
	truncateImage(t, a, grown, 2<<20)
	missing := grpVolume(t, a, "missing")
	removeImage(t, a, missing)
	truncated := grpVolume(t, a, "truncated")
	truncateImage(t, a, truncated, 4096)
	empty := grpVolume(t, a, "empty")
	truncateImage(t, a, empty, 0)
	unreadable := grpVolume(t, a, "unreadable")
	replaceImageWithDir(t, a, unreadable)

	tests := []struct {
		name      string
		req       *csi.ControllerGetVolumeHealthRequest
		code      codes.Code
		fragments []string
		want      []healthEntry
	}{
		{"no volume_id", &csi.ControllerGetVolumeHealthRequest{}, codes.InvalidArgument, []string{"volume_id is required"}, nil},
		{"volume_id over 128 bytes", &csi.ControllerGetVolumeHealthRequest{VolumeId: strings.Repeat("v", 129)}, codes.InvalidArgument, []string{"129 bytes"}, nil},
		{"secrets over 4 KiB", &csi.ControllerGetVolumeHealthRequest{VolumeId: healthy, Secrets: map[string]string{"k": strings.Repeat("s", 5000)}}, codes.InvalidArgument, []string{"secrets"}, nil},
		{"unknown volume", &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-nope"}, codes.NotFound, []string{"vol-nope", "does not exist"}, nil},
		{"healthy", &csi.ControllerGetVolumeHealthRequest{VolumeId: healthy}, codes.OK, nil, nil},
		{"image larger than recorded", &csi.ControllerGetVolumeHealthRequest{VolumeId: grown}, codes.OK, nil, nil},
		{"image missing", &csi.ControllerGetVolumeHealthRequest{VolumeId: missing}, codes.OK, nil, imageMissing},
		{"image truncated", &csi.ControllerGetVolumeHealthRequest{VolumeId: truncated}, codes.OK, nil, imageTruncated},
		{"image empty", &csi.ControllerGetVolumeHealthRequest{VolumeId: empty}, codes.OK, nil, imageTruncated},
		{"image not a file", &csi.ControllerGetVolumeHealthRequest{VolumeId: unreadable}, codes.OK, nil, imageUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.ControllerGetVolumeHealth(context.Background(), tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
			if err != nil {
				return
			}
			h := resp.GetVolumeHealth()
			if h.GetVolumeId() != tt.req.GetVolumeId() {
				t.Errorf("volume_id %q, want %q", h.GetVolumeId(), tt.req.GetVolumeId())
			}
			if got := entriesOf(h); !slices.Equal(got, tt.want) {
				t.Errorf("health %v, want %v", got, tt.want)
			}
			for _, e := range h.GetHealthStatuses() {
				if !strings.Contains(e.GetMessage(), tt.req.GetVolumeId()) {
					t.Errorf("message %q does not name the volume", e.GetMessage())
				}
			}
		})
	}
	if h, _ := c.ControllerGetVolumeHealth(context.Background(), &csi.ControllerGetVolumeHealthRequest{VolumeId: truncated}); !strings.Contains(h.GetVolumeHealth().GetHealthStatuses()[0].GetMessage(), "holds 4096 bytes, less than the volume's 1048576") {
		t.Errorf("truncation message %q does not give the sizes", h.GetVolumeHealth().GetHealthStatuses()[0].GetMessage())
	}
}

func TestControllerListVolumeHealth(t *testing.T) {
	a := openTest(t, Config{})
	c := &controllerServer{a: a}
	list := func(token string, max int32) (*csi.ControllerListVolumeHealthResponse, error) {
		return c.ControllerListVolumeHealth(context.Background(), &csi.ControllerListVolumeHealthRequest{StartingToken: token, MaxEntries: max})
	}
	ids := func(resp *csi.ControllerListVolumeHealthResponse) []string {
		var out []string
		for _, e := range resp.GetEntries() {
			out = append(out, e.GetVolumeId())
		}
		return out
	}

	resp, err := list("", 0)
	if err != nil || len(resp.GetEntries()) != 0 || resp.GetNextToken() != "" {
		t.Fatalf("no volumes: %v, %v", resp, err)
	}
	var vols []string
	for _, name := range []string{"v0", "v1", "v2", "v3", "v4"} {
		vols = append(vols, grpVolume(t, a, name))
	}
	resp, err = list("", 0)
	if err != nil || len(resp.GetEntries()) != 0 {
		t.Fatalf("only healthy volumes: %v, %v; want no entries (the spec advises leaving them out)", ids(resp), err)
	}

	removeImage(t, a, vols[1])
	truncateImage(t, a, vols[3], 0)
	replaceImageWithDir(t, a, vols[4])
	wantAll := []string{vols[1], vols[3], vols[4]}
	resp, err = list("", 0)
	if err != nil || !slices.Equal(ids(resp), wantAll) || resp.GetNextToken() != "" {
		t.Fatalf("all: %v %q %v; want %v and no next_token", ids(resp), resp.GetNextToken(), err, wantAll)
	}
	if got := entriesOf(resp.GetEntries()[0]); !slices.Equal(got, imageMissing) {
		t.Errorf("%s: health %v, want %v", vols[1], got, imageMissing)
	}

	first, err := list("", 2)
	if err != nil || !slices.Equal(ids(first), wantAll[:2]) || first.GetNextToken() == "" {
		t.Fatalf("first page: %v %q %v; want %v and a next_token", ids(first), first.GetNextToken(), err, wantAll[:2])
	}
	second, err := list(first.GetNextToken(), 2)
	if err != nil || !slices.Equal(ids(second), wantAll[2:]) || second.GetNextToken() != "" {
		t.Fatalf("second page: %v %q %v; want %v and no next_token", ids(second), second.GetNextToken(), err, wantAll[2:])
	}
	exact, err := list("", 3)
	if err != nil || len(exact.GetEntries()) != 3 || exact.GetNextToken() != "" {
		t.Fatalf("max_entries equal to the number of entries: %v %q %v; want all and no next_token", ids(exact), exact.GetNextToken(), err)
	}

	volumesToken, err := c.ListVolumes(context.Background(), &csi.ListVolumesRequest{MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	errs := []struct {
		name      string
		req       *csi.ControllerListVolumeHealthRequest
		code      codes.Code
		fragments []string
	}{
		{"garbage token", &csi.ControllerListVolumeHealthRequest{StartingToken: "garbage"}, codes.Aborted, []string{"empty starting_token"}},
		{"ListVolumes token", &csi.ControllerListVolumeHealthRequest{StartingToken: volumesToken.GetNextToken()}, codes.Aborted, []string{"volume-health"}},
		{"negative max_entries", &csi.ControllerListVolumeHealthRequest{MaxEntries: -1}, codes.InvalidArgument, []string{"max_entries"}},
		{"secrets over 4 KiB", &csi.ControllerListVolumeHealthRequest{Secrets: map[string]string{"k": strings.Repeat("s", 5000)}}, codes.InvalidArgument, []string{"secrets"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ControllerListVolumeHealth(context.Background(), tt.req)
			wantCode(t, err, tt.code, tt.fragments...)
		})
	}
}

func TestHealthReportMergesSameStatusAndReason(t *testing.T) {
	h := newHealthReport("vol-1")
	if !h.healthy() || len(h.proto().GetHealthStatuses()) != 0 || h.proto().GetVolumeId() != "vol-1" {
		t.Fatalf("new report %v; want healthy vol-1 with no statuses", h.proto())
	}
	h.add(csi.VolumeHealthErrorType_INACCESSIBLE, "NotPublished", "not at %s", "/a")
	h.add(csi.VolumeHealthErrorType_INACCESSIBLE, "NotPublished", "not at %s", "/b")
	h.add(csi.VolumeHealthErrorType_INACCESSIBLE, "NotStaged", "not at %s", "/s")
	h.add(csi.VolumeHealthErrorType_DEGRADED, "NotPublished", "odd")
	got := h.proto().GetHealthStatuses()
	want := []healthEntry{
		{csi.VolumeHealthErrorType_INACCESSIBLE, "NotPublished"},
		{csi.VolumeHealthErrorType_INACCESSIBLE, "NotStaged"},
		{csi.VolumeHealthErrorType_DEGRADED, "NotPublished"},
	}
	if !slices.Equal(entriesOf(h.proto()), want) {
		t.Fatalf("entries %v, want %v: one per (status, reason)", entriesOf(h.proto()), want)
	}
	if got[0].GetMessage() != "not at /a; not at /b" {
		t.Errorf("merged message %q, want both", got[0].GetMessage())
	}
}
