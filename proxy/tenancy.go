package proxy

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// scopeTenants keeps the tenants of a shared gateway apart (see package tenancy): a call that
// acts for a tenant is rewritten into the backend's terms, sent on (a List may be sent
// several times), and its answer rewritten back. Calls of no tenant pass unchanged.
//
// It runs after validation, which checks what the tenant sent, and after serialization,
// which keys on the tenant's own names and IDs qualified by the tenant: identical calls of a
// tenant reach it once (one quota hold for ten identical creates in flight), and two
// tenants' calls never join or contend. The calls it sends on (a List's pages, the reads
// around a delete) go straight to canonicalization and the backend. The log, the metrics and
// the tap see the call as the tenant made it.
func scopeTenants(ledger *tenancy.Ledger, methods methodTable) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			tenant := auth.TenantFromContext(ctx)
			if tenant == "" {
				return next(ctx, call)
			}
			if ledger == nil {
				return status.Errorf(codes.PermissionDenied, "csi-gateway: tenant %s: tenancy is not configured on this gateway", tenant)
			}
			if !call.Known() || call.info.desc.IsStreamingClient() {
				return status.Errorf(codes.PermissionDenied, "csi-gateway: %s cannot be scoped to tenant %s: the gateway does not know its messages", call.Method, tenant)
			}
			if !call.info.tenantScoped {
				return status.Errorf(codes.PermissionDenied, "csi-gateway: %s cannot be scoped to tenant %s: a tenant listener serves CSI v1 and VolumeGroup calls only (docs/tenancy.md)", call.Method, tenant)
			}
			req, err := call.DecodedRequest()
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "csi-gateway: %v", err)
			}
			if call.Stream != nil {
				return scopeStream(ctx, ledger, tenant, call, req, next)
			}
			invoke := func(ctx context.Context, method string, m proto.Message) (proto.Message, error) {
				info := methods[method]
				if info == nil {
					return nil, status.Errorf(codes.Internal, "csi-gateway: tenancy called unknown method %s", method)
				}
				b, err := proto.Marshal(m)
				if err != nil {
					return nil, status.Errorf(codes.Internal, "csi-gateway: %v", err)
				}
				sub := &Call{Method: method, Start: call.Start, Request: b, info: info}
				err = next(ctx, sub)
				if method == call.Method {
					call.Backend = sub.Backend
				}
				if err != nil {
					return nil, err
				}
				resp := info.output.New().Interface()
				if err := proto.Unmarshal(sub.Response, resp); err != nil {
					return nil, status.Errorf(codes.Internal, "csi-gateway: the backend's answer is not a valid %s: %v", info.desc.Output().FullName(), err)
				}
				return resp, nil
			}
			if call.info.paging != nil {
				ctx = withListing(ctx) // the pages Handle asks for are one listing (guardListings)
			}
			resp, err := ledger.Handle(ctx, tenant, call.Method, req, invoke)
			if err != nil {
				return err
			}
			if call.Response, err = proto.Marshal(resp); err != nil {
				return status.Errorf(codes.Internal, "csi-gateway: %v", err)
			}
			return nil
		}
	}
}

// scopeStream sends a server-streaming call on with its one request scoped; the responses
// carry no references and stream through unchanged.
func scopeStream(ctx context.Context, ledger *tenancy.Ledger, tenant string, call *Call, req proto.Message, next Handler) error {
	scoped := proto.Clone(req)
	if err := ledger.ScopeRequest(ctx, tenant, call.Method, scoped); err != nil {
		return err
	}
	b, err := proto.Marshal(scoped)
	if err != nil {
		return status.Errorf(codes.Internal, "csi-gateway: %v", err)
	}
	rs, ok := call.Stream.(*replayStream)
	if !ok {
		return status.Error(codes.Internal, fmt.Sprintf("csi-gateway: %s: unexpected stream type %T", call.Method, call.Stream))
	}
	sub := &Call{Method: call.Method, Start: call.Start, Request: b, info: call.info,
		Stream: &replayStream{ServerStream: rs.ServerStream, first: b}}
	err = next(ctx, sub)
	call.Backend = sub.Backend
	return err
}
