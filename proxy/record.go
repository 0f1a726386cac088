package proxy

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// CallRecord is what the gateway tells its observers (the live tap) about one finished call. It holds no payload and no secret: IDs and names are not secret, and Message
// is the status message the caller got, already scrubbed of the request's secret values.
type CallRecord struct {
	Time       time.Time     `json:"time"`
	Method     string        `json:"method"`      // short name for known methods ("CreateVolume")
	FullMethod string        `json:"full_method"` // "/csi.v1.Controller/CreateVolume"
	Code       codes.Code    `json:"-"`
	CodeName   string        `json:"code"`
	Message    string        `json:"message,omitempty"`
	Duration   time.Duration `json:"-"`
	DurationMS float64       `json:"duration_ms"`
	Caller     string        `json:"caller,omitempty"`
	// IDs are the identifying request fields that were set: name, volume_id, snapshot_id,
	// source_volume_id, node_id, volume_group_id, group_snapshot_id.
	IDs      map[string]string `json:"ids,omitempty"`
	Backend  string            `json:"backend,omitempty"`
	Attempts int               `json:"attempts,omitempty"`
	TraceID  string            `json:"trace_id,omitempty"`
	// BackendCode and BackendMessage are the backend's own answer when the caller got another
	// status (the backend's message scrubbed of the request's secrets like Message), and
	// Repairs what the gateway changed (code, message, message-cut, details, secret, answer;
	// see Repair); all empty when the caller got what the backend said.
	BackendCode    string   `json:"backend_code,omitempty"`
	BackendMessage string   `json:"backend_message,omitempty"`
	Repairs        []string `json:"repairs,omitempty"`
}

// CallObserver receives a record of every call when it ends. Observe is called on the
// call's goroutine, so it must be quick and must never block: an observer that buffers
// (the tap) drops records rather than slow a call down.
//
// An observer that is often idle may also have an `Observing() bool` method (the tap does:
// it is idle while nobody watches); while it reports false it is given no records, and when
// no observer wants one the record is not built.
type CallObserver interface {
	Observe(CallRecord)
}

// observing reports whether o wants records now.
func observing(o CallObserver) bool {
	if idle, ok := o.(interface{ Observing() bool }); ok {
		return idle.Observing()
	}
	return true
}

// newCallRecord builds the record of call, which ended with err (already canonicalized).
func newCallRecord(ctx context.Context, call *Call, err error) CallRecord {
	st := status.Convert(err)
	d := time.Since(call.Start)
	rec := CallRecord{
		Time:       call.Start,
		Method:     call.MethodName(),
		FullMethod: call.Method,
		Code:       st.Code(),
		CodeName:   st.Code().String(),
		Message:    st.Message(),
		Duration:   d,
		DurationMS: float64(d.Microseconds()) / 1000,
		Backend:    call.Backend,
		Attempts:   backends.CallInfoFrom(ctx).Attempts(),
		TraceID:    traceID(ctx),
	}
	if id, ok := auth.FromContext(ctx); ok {
		rec.Caller = id.String()
	}
	rec.IDs = call.IDs()
	if r := call.repaired; r != nil {
		rec.BackendCode, rec.BackendMessage, rec.Repairs = r.code.String(), r.message, r.kinds
	}
	return rec
}

// observeCalls hands the record of every call to each observer that is observing.
func observeCalls(observers []CallObserver) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			err := next(ctx, call)
			var rec CallRecord // built for the first observer that wants it
			built := false
			for _, o := range observers {
				if !observing(o) {
					continue
				}
				if !built {
					rec, built = newCallRecord(ctx, call, err), true
				}
				o.Observe(rec)
			}
			return err
		}
	}
}

// recordedIDFields are the request fields whose values identify what a call is about.
var recordedIDFields = [...]protoreflect.Name{"name", "volume_id", "snapshot_id", "source_volume_id", "node_id", "volume_group_id", "group_snapshot_id"}

// idFieldsOf returns the fields of recordedIDFields that md has as singular strings, in that
// order (nil entries for the others), for requestIDs.
func idFieldsOf(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	fds := make([]protoreflect.FieldDescriptor, len(recordedIDFields))
	for i, name := range recordedIDFields {
		if fd := md.Fields().ByName(name); protoread.IsSingularString(fd) {
			fds[i] = fd
		}
	}
	return fds
}

// requestIDs returns the identifying fields a request sets, read in one pass off its wire
// bytes raw without decoding the rest (see protoread.WireStrings); fds are its idFieldsOf. Nil when
// there are none.
func requestIDs(fds []protoreflect.FieldDescriptor, raw []byte) map[string]string {
	var values [len(recordedIDFields)]string
	if !protoread.WireStrings(raw, fds, values[:]) {
		return nil
	}
	var out map[string]string
	for i, v := range values {
		if v == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[string(recordedIDFields[i])] = v
	}
	return out
}
