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
// registry, merged with the reflection of the routed backends that serve it (see
// mergedReflection). It is the same on every listener.
type gatewayReflection struct {
	services []string // sorted
	v1       reflectionv1.ServerReflectionServer
	v1alpha  reflectionv1alpha.ServerReflectionServer
	backends []namedBackend
}

// newGatewayReflection returns the reflection service of the methods in t, merged with that
// of bes.
func newGatewayReflection(t methodTable, bes []namedBackend) *gatewayReflection {
	names := map[string]bool{
		healthpb.Health_ServiceDesc.ServiceName:                    true,
		reflectionv1.ServerReflection_ServiceDesc.ServiceName:      true,
		reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: true,
	}
	for _, info := range t {
		names[string(info.desc.Parent().FullName())] = true
	}
	r := &gatewayReflection{services: slices.Sorted(maps.Keys(names)), backends: bes}
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

// addTo registers both versions' ServerReflectionInfo in b, each merged with the backends'.
func (r *gatewayReflection) addTo(b builtinMethods) {
	for _, v := range []struct {
		desc *grpc.ServiceDesc
		impl any
	}{{&reflectionv1.ServerReflection_ServiceDesc, r.v1}, {&reflectionv1alpha.ServerReflection_ServiceDesc, r.v1alpha}} {
		sd := v.desc.Streams[0] // ServerReflectionInfo, its one method
		method := "/" + v.desc.ServiceName + "/" + sd.StreamName
		b[method] = mergedReflection(method, sd.Handler, v.impl, r.backends)
	}
}
