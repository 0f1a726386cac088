package proxy

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/redact"
)

// Call is one call on its way through the gateway. The middleware chain reads and annotates
// it; the backend handler fills Response. A Call belongs to one goroutine at a time.
type Call struct {
	// Method is the full method name, e.g. "/csi.v1.Controller/CreateVolume".
	Method string
	// Start is when the gateway received the call.
	Start time.Time
	// Request is the raw request of a unary or server-streaming call, exactly as the caller
	// sent it; nil for client-streaming calls and methods the gateway does not know.
	Request []byte
	// Response is the raw response of a unary call, set by the backend handler.
	Response []byte
	// Stream is the caller's stream for streaming calls and methods the gateway does not
	// know (for a server-streaming call it hands out Request first); nil for unary calls.
	Stream grpc.ServerStream
	// Backend is the name of the backend the route table chose, once routed.
	Backend string

	info *methodInfo // nil for methods the gateway does not know

	// decodedBy, when set, is the Call whose identical request this one decodes through (a
	// serialized flight's shared Call), so the request is decoded once at most.
	decodedBy  *Call
	decodeOnce sync.Once
	decoded    proto.Message
	decodeErr  error

	// resp is Response decoded, and respOf the Response it was decoded from: validation and
	// the debug log share one decode, unless the response was replaced in between.
	resp   proto.Message
	respOf []byte

	// repaired is what the gateway changed in the backend's answer (noteRepair); nil: nothing.
	repaired *repair

	scrubber *redact.Scrubber
	redactor *redact.Redactor // finds the request's secret values for Scrub; nil: Scrub does nothing
	ids      map[string]string
	idsDone  bool
}

// Known reports whether the gateway knows the method's messages (CSI and csi-addons).
func (c *Call) Known() bool { return c.info != nil }

// MethodName is the short method name ("CreateVolume"), or the full name for unknown methods.
func (c *Call) MethodName() string {
	if c.info != nil {
		return c.info.name
	}
	return c.Method
}

// DecodedRequest returns the request as a typed message, decoding it on first use only:
// calls that no middleware inspects are never decoded. It returns nil, nil for methods the
// gateway does not know and for client-streaming calls; an empty request (no bytes on the
// wire) decodes to the empty message. The message must not be modified.
func (c *Call) DecodedRequest() (proto.Message, error) {
	if c.info == nil || c.info.desc.IsStreamingClient() {
		return nil, nil
	}
	if c.decodedBy != nil {
		return c.decodedBy.DecodedRequest()
	}
	c.decodeOnce.Do(func() {
		m := c.info.input.New().Interface()
		if err := proto.Unmarshal(c.Request, m); err != nil {
			c.decodeErr = fmt.Errorf("request is not a valid %s: %w", c.info.desc.Input().FullName(), err)
			return
		}
		c.decoded = m
	})
	return c.decoded, c.decodeErr
}

// DecodedResponse returns the raw response as a typed message, nil when there is none. It is
// decoded once for validation and logging alike, and again only when Response has been
// replaced since. The message must not be modified.
func (c *Call) DecodedResponse() (proto.Message, error) {
	if c.info == nil || c.Stream != nil || c.Response == nil {
		return nil, nil
	}
	if c.resp != nil && sameBytes(c.respOf, c.Response) {
		return c.resp, nil
	}
	m := c.info.output.New().Interface()
	if err := proto.Unmarshal(c.Response, m); err != nil {
		return nil, err
	}
	c.resp, c.respOf = m, c.Response
	return m, nil
}

// sameBytes reports whether a and b are the same slice of the same array.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// secrets returns the scrubber for the secret values of the call's request, built on first
// use. Calls whose request carries no secrets get an empty scrubber.
func (c *Call) secrets(r *redact.Redactor) *redact.Scrubber {
	if c.scrubber == nil {
		req, _ := c.DecodedRequest()
		var values []string
		if req != nil {
			values = r.SecretValues(req)
		}
		c.scrubber = redact.NewScrubber(values)
	}
	return c.scrubber
}

// Scrub removes the secret values of the call's request from text: it is the call's
// backends.Scrubber, lent to its backend through backends.CallInfo so that the backend can
// scrub an appliance's words before it transforms them. It runs on the goroutine that runs
// the backend call, which owns the Call then.
func (c *Call) Scrub(text string) string {
	if c.redactor == nil {
		return text
	}
	return c.secrets(c.redactor).Scrub(text)
}

// IDs returns the identifying fields the request sets (see requestIDs), computed once for the
// log, the call record and the span; nil when there are none.
func (c *Call) IDs() map[string]string {
	if !c.idsDone {
		c.idsDone = true
		if c.info != nil && c.Request != nil {
			c.ids = requestIDs(c.info.idFields, c.Request)
		}
	}
	return c.ids
}
