package proxy

import (
	"maps"
	"slices"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// gatewayReflection is gRPC server reflection, v1 and v1alpha (grpcurl asks v1 first, older
// tools v1alpha), over the services the gateway knows: every service of the known packages
// (csi.v1's Identity, Controller, Node, GroupController and SnapshotMetadata; csi-addons'
// volumegroup), health and reflection itself, with their descriptors from the protobuf
// registry. It is the same on every listener. A backend's own reflection is not merged: a
// service only a backend knows is forwarded when called, but reflection does not list or
// describe it (call it with its .proto files, or ask the backend's reflection directly).
type gatewayReflection struct {
	services []string // sorted
	v1       reflectionv1.ServerReflectionServer
	v1alpha  reflectionv1alpha.ServerReflectionServer
}

// newGatewayReflection returns the reflection service of the methods in t.
func newGatewayReflection(t methodTable) *gatewayReflection {
	names := map[string]bool{
		healthpb.Health_ServiceDesc.ServiceName:                    true,
		reflectionv1.ServerReflection_ServiceDesc.ServiceName:      true,
		reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: true,
	}
	for _, info := range t {
		names[string(info.desc.Parent().FullName())] = true
	}
	r := &gatewayReflection{services: slices.Sorted(maps.Keys(names))}
	opts := reflection.ServerOptions{Services: r}
	r.v1, r.v1alpha = reflection.NewServerV1(opts), reflection.NewServer(opts)
	return r
}

// GetServiceInfo lists the services for reflection's ListServices (the only part of a
// grpc.ServiceInfo reflection reads is the name).
func (r *gatewayReflection) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := make(map[string]grpc.ServiceInfo, len(r.services))
	for _, name := range r.services {
		out[name] = grpc.ServiceInfo{}
	}
	return out
}

// builtinServiceNames are the reflection services' names.
func (r *gatewayReflection) builtinServiceNames() []string {
	return []string{reflectionv1.ServerReflection_ServiceDesc.ServiceName, reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName}
}

// addTo registers both versions' methods in b.
func (r *gatewayReflection) addTo(b builtinMethods) {
	b.add(&reflectionv1.ServerReflection_ServiceDesc, r.v1)
	b.add(&reflectionv1alpha.ServerReflection_ServiceDesc, r.v1alpha)
}
