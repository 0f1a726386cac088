package connect

import (
	"slices"

	"google.golang.org/grpc"
)

// Registrar is a grpc.ServiceRegistrar that only collects what is registered on it, so that
// code written to register services on a grpc.Server (for example the generated
// csi.RegisterControllerServer) can hand the same services to NewHandler:
//
//	var r connect.Registrar
//	appliance.Register(&r)
//	h := connect.NewHandler(r.Services())
//
// It checks nothing itself; NewHandler does. The zero value is ready to use; it is not safe
// for concurrent use.
type Registrar struct {
	services []Service
}

var _ grpc.ServiceRegistrar = (*Registrar)(nil)

// RegisterService records desc and impl.
func (r *Registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	r.services = append(r.services, Service{Desc: desc, Impl: impl})
}

// Services returns a copy of what was registered, in order.
func (r *Registrar) Services() []Service {
	return slices.Clone(r.services)
}
