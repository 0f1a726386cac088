package connect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxBodyBytes is the request-body limit when WithMaxBodyBytes is not given.
const DefaultMaxBodyBytes = 4 << 20

// Service is one gRPC service to serve: its generated descriptor (for example
// &csi.Controller_ServiceDesc) and an implementation of the descriptor's HandlerType.
type Service struct {
	Desc *grpc.ServiceDesc
	Impl any
}

// HandlerOption adjusts NewHandler.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	maxBodyBytes int64
	log          *slog.Logger
}

// WithMaxBodyBytes limits request bodies to n bytes; a larger body is answered with 413 and
// code resource_exhausted. A non-positive n keeps DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) HandlerOption {
	return func(c *handlerConfig) {
		if n > 0 {
			c.maxBodyBytes = n
		}
	}
}

// WithErrorLog sets where internal failures are logged (a response that cannot be encoded,
// an implementation that returns a non-status error). Request bodies are never logged. A nil
// logger keeps slog.Default().
func WithErrorLog(l *slog.Logger) HandlerOption {
	return func(c *handlerConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// route is one servable path. A streaming method has a route with a nil method so that it
// can be refused with a precise message rather than as an unknown path.
type route struct {
	impl   any
	method *grpc.MethodDesc
}

type handler struct {
	routes   map[string]route
	services map[string]bool
	cfg      handlerConfig
}

// NewHandler returns an http.Handler that serves every unary method of services as
// "POST /{package.Service}/{Method}" in the Connect protocol's unary JSON form. The route
// table is built once, here; the handler is safe for concurrent use.
//
// Each call runs the method's generated handler with the request's context (so a client
// that disconnects cancels the call), a deadline from Connect-Timeout-Ms if sent, and the
// request's headers as incoming gRPC metadata. No interceptor runs. Errors are answered as
// {"code", "message"} with the status from HTTPStatus, except where the protocol itself
// fails: unknown path 404, streaming method 501, method not POST 405, media type not
// application/json 415, body over the limit 413; all use the codes documented in
// docs/rest-protocol.md.
//
// NewHandler panics, as grpc.Server.RegisterService does, on a programming error: a nil
// Desc or Impl, an Impl that does not implement Desc.HandlerType, or a service given twice.
func NewHandler(services []Service, opts ...HandlerOption) http.Handler {
	h := &handler{
		routes:   make(map[string]route),
		services: make(map[string]bool),
		cfg:      handlerConfig{maxBodyBytes: DefaultMaxBodyBytes, log: slog.Default()},
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	for _, s := range services {
		if s.Desc == nil || s.Impl == nil {
			panic("connect: NewHandler: Service needs both Desc and Impl")
		}
		name := s.Desc.ServiceName
		if ht := reflect.TypeOf(s.Desc.HandlerType).Elem(); !reflect.TypeOf(s.Impl).Implements(ht) {
			panic(fmt.Sprintf("connect: NewHandler: %T does not implement %v for %s", s.Impl, ht, name))
		}
		if h.services[name] {
			panic(fmt.Sprintf("connect: NewHandler: service %s given twice", name))
		}
		h.services[name] = true
		for i := range s.Desc.Methods {
			h.routes["/"+name+"/"+s.Desc.Methods[i].MethodName] = route{s.Impl, &s.Desc.Methods[i]}
		}
		for _, st := range s.Desc.Streams {
			h.routes["/"+name+"/"+st.StreamName] = route{impl: s.Impl}
		}
	}
	return h
}

// ServeHTTP checks the request in the order of the protocol's layers (route, method, media
// type, headers, body), then calls the method.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := h.routes[r.URL.Path]
	switch {
	case !ok:
		h.unknownPath(w, r.URL.Path)
		return
	case rt.method == nil:
		writeError(w, http.StatusNotImplemented, status.Newf(codes.Unimplemented,
			"connect: %s is a streaming method; streaming methods are not served over HTTP, use gRPC", r.URL.Path))
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, status.Newf(codes.Unimplemented,
			"connect: method %s is not supported; send POST", r.Method))
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		w.Header().Set("Accept-Post", "application/json")
		writeError(w, http.StatusUnsupportedMediaType, status.Newf(codes.Unimplemented,
			"connect: content-type %q is not supported; send application/json", r.Header.Get("Content-Type")))
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		writeStatus(w, status.Newf(codes.Unimplemented,
			"connect: content-encoding %q is not supported; send the body uncompressed (supported: identity)", enc))
		return
	}
	ctx, cancel, st := requestContext(r)
	defer cancel()
	if st != nil {
		writeStatus(w, st)
		return
	}
	body, httpStatus, st := h.readBody(w, r)
	if st != nil {
		writeError(w, httpStatus, st)
		return
	}
	resp, err := rt.method.Handler(rt.impl, ctx, decoder(body), nil)
	if err != nil {
		writeStatus(w, h.toStatus(r.URL.Path, err))
		return
	}
	h.writeResponse(w, r.URL.Path, resp)
}

func (h *handler) unknownPath(w http.ResponseWriter, path string) {
	svc, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	msg := fmt.Sprintf("connect: no method is served at %q; paths look like /csi.v1.Controller/CreateVolume", path)
	if !h.services[svc] {
		msg = fmt.Sprintf("connect: service %q is not served here (path %q)", svc, path)
	}
	writeError(w, http.StatusNotFound, status.New(codes.Unimplemented, msg))
}

// readBody reads the whole body within the limit; a failure comes with its HTTP status.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, *status.Status) {
	tooLarge := status.Newf(codes.ResourceExhausted,
		"connect: request body is larger than the %d-byte limit", h.cfg.maxBodyBytes)
	if r.ContentLength > h.cfg.maxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.maxBodyBytes))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	case err != nil && r.Context().Err() != nil:
		return nil, HTTPStatus(codes.Canceled), status.New(codes.Canceled, "connect: client went away while sending the request")
	case err != nil:
		return nil, http.StatusBadRequest, status.Newf(codes.InvalidArgument, "connect: reading request body: %v", err)
	}
	return body, http.StatusOK, nil
}

// decoder returns the dec function a generated gRPC method handler calls with the empty
// request message. An empty body is the empty message; unknown fields are rejected.
func decoder(body []byte) func(any) error {
	return func(m any) error {
		msg, ok := m.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "connect: request type %T is not a protobuf message", m)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		if err := protojson.Unmarshal(body, msg); err != nil {
			return status.Errorf(codes.InvalidArgument, "connect: request body is not a valid %s in protojson: %v",
				msg.ProtoReflect().Descriptor().FullName(), err)
		}
		return nil
	}
}

func (h *handler) writeResponse(w http.ResponseWriter, path string, resp any) {
	msg, ok := resp.(proto.Message)
	if !ok {
		h.cfg.log.Error("connect: method returned a non-protobuf response", "path", path, "type", fmt.Sprintf("%T", resp))
		writeStatus(w, status.New(codes.Internal, "connect: the response could not be encoded; see the server log"))
		return
	}
	out, err := protojson.Marshal(msg)
	if err != nil {
		h.cfg.log.Error("connect: encoding response failed", "path", path, "error", err)
		writeStatus(w, status.New(codes.Internal, "connect: the response could not be encoded; see the server log"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out) // a failed write means the client went away; nobody is left to tell
}
