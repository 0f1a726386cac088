package proxy

import (
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestRequestIDs: the identifying fields a request sets, read off the wire; none from bytes
// that are not a message.
func TestRequestIDs(t *testing.T) {
	publish, _ := proto.Marshal(&csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1",
		Secrets: map[string]string{"password": "not-an-id"}, VolumeContext: map[string]string{"name": "not-an-id"}})
	create, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"volume_id": "x"}})
	publishType := (&csi.ControllerPublishVolumeRequest{}).ProtoReflect().Descriptor()
	createType := (&csi.CreateVolumeRequest{}).ProtoReflect().Descriptor()
	tests := []struct {
		name string
		md   protoreflect.MessageDescriptor
		raw  []byte
		want map[string]string
	}{
		{"publish", publishType, publish, map[string]string{"volume_id": "vol-1", "node_id": "node-1"}},
		{"create", createType, create, map[string]string{"name": "pvc-1"}},
		{"empty", publishType, nil, nil},
		{"not a message", publishType, []byte{0xff, 0xff}, nil},
	}
	for _, tt := range tests {
		if got := requestIDs(idFieldsOf(tt.md), tt.raw); !maps.Equal(got, tt.want) {
			t.Errorf("%s: requestIDs = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// countingObserver counts the records it is given; observing is what its Observing says.
type countingObserver struct {
	observing bool
	got       int
}

func (o *countingObserver) Observe(CallRecord) { o.got++ }
func (o *countingObserver) Observing() bool    { return o.observing }

type plainObserver struct{ got int }

func (o *plainObserver) Observe(CallRecord) { o.got++ }

// TestObserveCallsSkipsIdleObservers: an observer that says it is not observing gets no
// record; one that is, and one that cannot say, get one each.
func TestObserveCallsSkipsIdleObservers(t *testing.T) {
	idle, busy, plain := &countingObserver{}, &countingObserver{observing: true}, &plainObserver{}
	h := observeCalls([]CallObserver{idle, busy, plain})(func(context.Context, *Call) error { return nil })
	if err := h(context.Background(), &Call{Method: "/csi.v1.Identity/Probe"}); err != nil {
		t.Fatal(err)
	}
	if idle.got != 0 || busy.got != 1 || plain.got != 1 {
		t.Fatalf("records given: idle %d, observing %d, plain %d; want 0, 1, 1", idle.got, busy.got, plain.got)
	}
}
