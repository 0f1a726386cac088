package proxy

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/rawcodec"
)

// namedBackend is a backend reflection may ask, by its configured name.
type namedBackend struct {
	name string
	b    backends.Backend
}

// routedBackends are the backends the routes name, in route order, each once.
func routedBackends(routes routeTable, bes map[string]backends.Backend) []namedBackend {
	var out []namedBackend
	for _, r := range routes {
		if !slices.ContainsFunc(out, func(n namedBackend) bool { return n.name == r.Backend }) {
			out = append(out, namedBackend{r.Backend, bes[r.Backend]})
		}
	}
	return out
}

// mergedReflection serves one version of ServerReflectionInfo (method) to a caller: each
// request is asked of the gateway's own reflection (local, served by impl) first; ListServices
// adds the services of every routed backend that serves reflection, and a symbol, file or
// extension the gateway does not know (NOT_FOUND) is asked of those backends in route order,
// the first answer that is not an error winning. v1 and v1alpha messages are the same on the
// wire, so one merge serves both. A backend that does not serve reflection (a REST or embedded
// backend, a driver without it) is skipped for the rest of the stream.
func mergedReflection(method string, local grpc.StreamHandler, impl any, bes []namedBackend) func(grpc.ServerStream) error {
	return func(caller grpc.ServerStream) error {
		ctx, cancel := context.WithCancel(caller.Context())
		ctx, _ = backends.WithCallInfo(ctx)
		s := &reflectionSession{ctx: ctx, method: method, bes: bes, asked: make([]*pipedHandler, len(bes))}
		s.local = startPiped(ctx, func(p *pipeStream) error { return local(impl, p) })
		defer s.close(cancel)
		return rawcodec.EachFrame(caller, func(req *rawcodec.Frame) error {
			resp, err := s.answer(req.Payload)
			if err != nil {
				return err
			}
			return caller.SendMsg(&rawcodec.Frame{Payload: resp})
		})
	}
}

// reflectionSession is one caller's reflection stream: the local reflection and, opened on
// first need, a reflection stream to each backend.
type reflectionSession struct {
	ctx    context.Context
	method string
	bes    []namedBackend
	local  *pipedHandler
	asked  []*pipedHandler // by index in bes; nil until asked
}

// answer is the merged response to one request's wire bytes.
func (s *reflectionSession) answer(req []byte) ([]byte, error) {
	local, err := s.local.ask(req)
	if err != nil {
		return nil, err
	}
	var q reflectionv1.ServerReflectionRequest
	var r reflectionv1.ServerReflectionResponse
	if proto.Unmarshal(req, &q) != nil || proto.Unmarshal(local, &r) != nil {
		return local, nil // the local reflection has said what is wrong with it
	}
	if _, list := q.GetMessageRequest().(*reflectionv1.ServerReflectionRequest_ListServices); list && r.GetListServicesResponse() != nil {
		names := r.GetListServicesResponse()
		for i := range s.bes {
			var br reflectionv1.ServerReflectionResponse
			if b, ok := s.ask(i, req); ok && proto.Unmarshal(b, &br) == nil {
				for _, svc := range br.GetListServicesResponse().GetService() {
					if !slices.ContainsFunc(names.Service, func(n *reflectionv1.ServiceResponse) bool { return n.GetName() == svc.GetName() }) {
						names.Service = append(names.Service, svc)
					}
				}
			}
		}
		return proto.Marshal(&r)
	}
	if r.GetErrorResponse().GetErrorCode() != int32(codes.NotFound) {
		return local, nil
	}
	for i := range s.bes {
		var br reflectionv1.ServerReflectionResponse
		if b, ok := s.ask(i, req); ok && proto.Unmarshal(b, &br) == nil && br.GetErrorResponse() == nil {
			return b, nil
		}
	}
	return local, nil
}

// ask sends req to backend i's reflection, opening the stream to it on first use; ok is false
// when the backend does not serve reflection (now or earlier in this stream).
func (s *reflectionSession) ask(i int, req []byte) ([]byte, bool) {
	if s.asked[i] == nil {
		be := s.bes[i].b
		s.asked[i] = startPiped(s.ctx, func(p *pipeStream) error { return be.Stream(s.ctx, s.method, p) })
	}
	resp, err := s.asked[i].ask(req)
	return resp, err == nil
}

// close ends every stream of the session and waits for their handlers to return.
func (s *reflectionSession) close(cancel context.CancelFunc) {
	cancel()
	for _, h := range append([]*pipedHandler{s.local}, s.asked...) {
		if h != nil {
			<-h.done
		}
	}
}

// pipedHandler is a stream handler running on a pipeStream, asked one request at a time.
type pipedHandler struct {
	pipe *pipeStream
	done chan struct{}
	err  error // once done is closed: what the handler returned
}

func startPiped(ctx context.Context, run func(*pipeStream) error) *pipedHandler {
	h := &pipedHandler{pipe: newPipeStream(ctx), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = run(h.pipe)
	}()
	return h
}

// errHandlerEnded is ask's error when the handler returned without an error before answering.
var errHandlerEnded = errors.New("the reflection stream ended")

// ask sends one request and waits for its one response, or for the handler to end.
func (h *pipedHandler) ask(req []byte) ([]byte, error) {
	ended := func() error {
		if h.err != nil {
			return h.err
		}
		return errHandlerEnded
	}
	select {
	case h.pipe.in <- req:
	case <-h.done:
		return nil, ended()
	case <-h.pipe.ctx.Done():
		return nil, h.pipe.ctx.Err()
	}
	select {
	case resp := <-h.pipe.out:
		return resp, nil
	case <-h.done:
		return nil, ended()
	case <-h.pipe.ctx.Done():
		return nil, h.pipe.ctx.Err()
	}
}
