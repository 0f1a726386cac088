package redact

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("JSON wrote invalid JSON %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON\n got  %s\n want %s (protojson of Redact)", got, want)
	}
}

// Redactor.JSON writes what protojson writes for Redact's copy: the same value, with the
// same secrets replaced, for every kind of field the CSI messages have.
func TestRedactJSONMatchesProtojson(t *testing.T) {
	r := NewRedactor(WithSafeContextKeys("lun"))
	ts := timestamppb.New(time.Date(2026, 11, 22, 3, 4, 5, 120_000_000, time.UTC))
	for _, m := range []proto.Message{
		&csi.ProbeRequest{},
		&csi.ProbeResponse{Ready: wrapperspb.Bool(false)},
		messages.CreateVolumeRequest("pvc-1"),
		messages.ListVolumesResponse(),
		messages.NodePublishVolumeRequest("vol-1"),
		messages.GetMetadataAllocatedRequest("snap-1"),
		&csi.GetCapacityResponse{AvailableCapacity: 1 << 40, MaximumVolumeSize: wrapperspb.Int64(1 << 41), MinimumVolumeSize: wrapperspb.Int64(0)},
		&csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: &csi.Snapshot{
			SnapshotId: "snap-\u2028\"quoted\"\\\t\x01", SourceVolumeId: "vol-é", CreationTime: ts, ReadyToUse: true, SizeBytes: -1}}}},
		&csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"lun": "3", "chap": "s3cr3t-value", "<&>": "x"}},
		&csi.GetMetadataAllocatedResponse{BlockMetadataType: csi.BlockMetadataType_FIXED_LENGTH, VolumeCapacityBytes: 1 << 30,
			BlockMetadata: []*csi.BlockMetadata{{ByteOffset: 0, SizeBytes: 4096}, {ByteOffset: 8192, SizeBytes: 4096}}},
	} {
		t.Run(string(m.ProtoReflect().Descriptor().Name()), func(t *testing.T) {
			want, err := protojson.Marshal(r.Redact(m))
			if err != nil {
				t.Fatal(err)
			}
			got := r.JSON(m)
			sameJSON(t, got, string(want))
			if strings.Contains(got, "\n") {
				t.Errorf("JSON is not one line: %q", got)
			}
		})
	}
	if got := NewRedactor().JSON(durationpb.New(-1500 * time.Millisecond)); got != `"-1.500s"` {
		t.Errorf("a Duration: %s", got)
	}
}

// appendJSONString escapes as encoding/json does without HTML escaping, whichever position
// (within or across the 8-byte words it tests at once) a character to escape is at.
func TestAppendJSONString(t *testing.T) {
	var specials = []string{"\x00", "\x1f", " ", "\"", "\\", "!", "[", "]", "\x7f", "\x80", "\xff", "é", "\u2028", "\u2029", "<&>", "\xe2\x80"}
	for n := range 20 {
		for at := 0; at <= n; at++ {
			for _, sp := range specials {
				s := strings.Repeat("a", at) + sp + strings.Repeat("z", n-at)
				var want strings.Builder
				enc := json.NewEncoder(&want)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(s); err != nil {
					t.Fatal(err)
				}
				if got := string(appendJSONString(nil, s)); got != strings.TrimSuffix(want.String(), "\n") {
					t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want.String())
				}
			}
		}
	}
}
