package embedded

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Backend serves the gateway's calls from an appliance in the same process: each call is
// decoded and handed to the appliance's service method directly, with no socket in between.
type Backend struct {
	name    string
	a       *Appliance
	methods map[string]inProcessMethod
}

type inProcessMethod struct {
	impl    any
	handler grpc.MethodHandler
}

var _ backends.Backend = (*Backend)(nil)

// OpenBackend opens the appliance in cfg.DataDir and returns it as the backend called name.
// Close closes the appliance.
func OpenBackend(name string, cfg Config, log *slog.Logger) (*Backend, error) {
	a, err := Open(cfg, log)
	if err != nil {
		return nil, err
	}
	b := &Backend{name: name, a: a, methods: map[string]inProcessMethod{}}
	a.Register(b)
	return b, nil
}

// RegisterService makes Backend a grpc.ServiceRegistrar, so the appliance registers its
// services with it exactly as with a gRPC server.
func (b *Backend) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		b.methods["/"+desc.ServiceName+"/"+m.MethodName] = inProcessMethod{impl: impl, handler: m.Handler}
	}
}

// Appliance returns the appliance behind the backend.
func (b *Backend) Appliance() *Appliance { return b.a }

// Unary decodes the request, calls the appliance's method and encodes its response. The
// appliance's status becomes a classified error.
func (b *Backend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	m, ok := b.methods[method]
	if !ok {
		return nil, backends.Errorf(backends.ClassUnimplemented, "backend %q: the embedded appliance does not implement %s", b.name, method)
	}
	backends.CallInfoFrom(ctx).AddAttempt()
	decode := func(v any) error {
		if err := proto.Unmarshal(req, v.(proto.Message)); err != nil {
			return backends.Errorf(backends.ClassInvalid, "backend %q: the request of %s does not decode: %v", b.name, method, err)
		}
		return nil
	}
	resp, err := m.handler(m.impl, ctx, decode, nil)
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return nil, &backends.Error{Class: backends.ClassFromCode(st.Code()), Message: fmt.Sprintf("backend %q: %s", b.name, st.Message()), Cause: err}
		}
		return nil, err
	}
	return proto.Marshal(resp.(proto.Message))
}

// Stream refuses: the appliance serves no streaming method.
func (b *Backend) Stream(_ context.Context, method string, _ grpc.ServerStream) error {
	return backends.Errorf(backends.ClassUnimplemented, "backend %q: the embedded appliance does not serve %s", b.name, method)
}

// Ready reports whether the appliance's data directory is usable (its Probe).
func (b *Backend) Ready(ctx context.Context) error {
	_, err := (&identityServer{a: b.a}).Probe(ctx, nil)
	return err
}

// Close closes the appliance.
func (b *Backend) Close() error { return b.a.Close() }
