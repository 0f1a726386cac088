package proxy

import (
	"context"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthWatchInterval is how often a Watch asks the readiness again; it sends only changes.
// Readiness caches its backend checks (2 s by default), so watchers cost the backends nothing
// more than /readyz probes do.
const healthWatchInterval = time.Second

// healthServer is grpc.health.v1.Health on one listener, answered from the gateway's
// readiness (the same as /readyz): the overall service "" is SERVING when the CSI listeners
// serve and every backend is ready; a service the gateway knows is SERVING when the backends
// its methods are routed to are ready. Only services this listener may call (its methods
// allow-list) and the built-in services exist for it; any other name is NOT_FOUND (Check) or
// SERVICE_UNKNOWN (Watch), as the gRPC health-checking protocol says.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	readiness *Readiness
	// services maps a service's full name to the backends its methods go to on this listener
	// (empty, not nil, for the built-in services: they need no backend).
	services map[string][]string
	// stopping is closed when the server shuts down (Server.stopping).
	stopping <-chan struct{}
}

// newHealthServer returns the health service of a listener with policy p.
func (s *Server) newHealthServer(p ListenerPolicy) *healthServer {
	services := map[string][]string{
		healthpb.Health_ServiceDesc.ServiceName: {},
	}
	for _, name := range s.reflection.builtinServiceNames() {
		services[name] = []string{}
	}
	for method, info := range s.methods {
		backend := s.routes.match(method)
		if backend == "" || p.Methods.Allow(method) != nil {
			continue
		}
		service := string(info.desc.Parent().FullName())
		if !slices.Contains(services[service], backend) {
			services[service] = append(services[service], backend)
		}
	}
	return &healthServer{readiness: s.readiness, services: services, stopping: s.stopping}
}

// exists reports whether this listener has service ("" is the overall service).
func (h *healthServer) exists(service string) bool {
	_, ok := h.services[service]
	return ok || service == ""
}

// status is the serving status of service; ok is false when this listener has no such service.
func (h *healthServer) status(ctx context.Context, service string) (st healthpb.HealthCheckResponse_ServingStatus, ok bool) {
	var backends []string // nil: every backend, for the overall status
	if service != "" {
		if backends, ok = h.services[service]; !ok {
			return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, false
		}
	}
	if h.readiness.CheckBackends(ctx, backends) != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING, true
	}
	return healthpb.HealthCheckResponse_SERVING, true
}

// Check answers the status of one service now.
func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, ok := h.status(ctx, req.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "csi-gateway: no service %q on this listener", req.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List answers the status of every service of this listener, and the overall one as "".
func (h *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for _, name := range append([]string{""}, slices.Sorted(maps.Keys(h.services))...) {
		st, _ := h.status(ctx, name)
		out.Statuses[name] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// errShuttingDown ends health watches when the server shuts down.
var errShuttingDown = status.Error(codes.Unavailable, "csi-gateway is shutting down")

// Watch sends the status of one service at once, then each change, until the caller leaves
// or the server shuts down: then it sends NOT_SERVING (for a service that exists) and ends
// the call with UNAVAILABLE, so a watcher does not hold the graceful stop, and reconnects to
// another replica, as the health-checking protocol expects of its clients.
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	tick := time.NewTicker(healthWatchInterval)
	defer tick.Stop()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	for {
		if st, _ := h.status(ctx, req.GetService()); st != last && ctx.Err() == nil {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-h.stopping:
			if h.exists(req.GetService()) && last != healthpb.HealthCheckResponse_NOT_SERVING {
				if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}); err != nil {
					return err
				}
			}
			return errShuttingDown
		case <-tick.C:
		}
	}
}
