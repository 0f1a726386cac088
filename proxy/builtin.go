package proxy

import (
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// builtinMethods are the methods the gateway answers itself on a listener, before the chain
// and whatever the route table says: gRPC health (health.go) and server reflection
// (reflection.go), the two services grpc tooling (grpc_health_probe, grpcurl, kubelet's gRPC
// probes) expects of any gRPC server. They are answered on both transports the same way,
// because both hand every method to streamHandler, which looks here first.
//
// They pass no middleware: no call log line, no tap record and no CSI call metrics (a probe
// every few seconds would drown the call log and skew the CSI figures), no method allow-list
// (health reveals only whether the gateway can serve, reflection only the schema of public
// protos), no tenant scoping. The OpenTelemetry stats handler still sees them.
type builtinMethods map[string]func(grpc.ServerStream) error

// add registers every method of a generated service description, served by impl.
func (b builtinMethods) add(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		b["/"+desc.ServiceName+"/"+m.MethodName] = func(stream grpc.ServerStream) error {
			resp, err := m.Handler(impl, stream.Context(), stream.RecvMsg, nil)
			if err != nil {
				return err
			}
			return stream.SendMsg(resp)
		}
	}
	for _, sd := range desc.Streams {
		b["/"+desc.ServiceName+"/"+sd.StreamName] = func(stream grpc.ServerStream) error {
			return sd.Handler(impl, stream)
		}
	}
}

// builtins returns the methods the server answers itself on a listener with policy p: health
// as that listener sees it, reflection as every listener does.
func (s *Server) builtins(p ListenerPolicy) builtinMethods {
	b := builtinMethods{}
	b.add(&healthpb.Health_ServiceDesc, s.newHealthServer(p))
	s.reflection.addTo(b)
	return b
}
