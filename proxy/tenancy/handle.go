package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Invoker sends one call on to the backend and returns its response, of the method's
// response type.
type Invoker func(ctx context.Context, method string, req proto.Message) (proto.Message, error)

// Handle serves one unary call (full method name) of a tenant: it scopes the request, sends
// it through invoke (several times for a List that has to skip other tenants' entries), keeps
// the ledger in step with what the backend did, and returns the response in the tenant's
// terms. req itself is not modified.
func (l *Ledger) Handle(ctx context.Context, tenant, method string, req proto.Message, invoke Invoker) (proto.Message, error) {
	c := &call{l: l, tenant: tenant, method: method, b: behaviours[method], invoke: invoke}
	scoped := proto.Clone(req)
	if err := c.scopeRequest(ctx, scoped); err != nil {
		var absent *absentError
		if errors.As(err, &absent) && (c.b.lists != 0 || c.b.deletes == absent.kind || c.b.absentOK) {
			// Deleting, unpublishing or listing by what the tenant does not own: as for an
			// absent object, which CSI answers with OK (or no entries).
			return newResponse(method)
		}
		return nil, err
	}
	switch {
	case c.b.lists != 0:
		return c.list(ctx, scoped)
	case c.b.deletes != 0:
		return c.delete(ctx, scoped)
	case len(c.b.creates) > 0:
		return c.create(ctx, scoped, nameOf(req))
	case method == expandVolume:
		return c.expand(ctx, scoped.(*csi.ControllerExpandVolumeRequest))
	}
	resp, err := invoke(ctx, method, scoped)
	if err != nil {
		return nil, err
	}
	if method == getCapacity {
		if err := c.limitCapacity(ctx, resp.(*csi.GetCapacityResponse)); err != nil {
			return nil, err
		}
	}
	return resp, c.scopeResponse(resp)
}

// ScopeRequest scopes the request of a streaming call in place (the stream's responses
// carry no references). A reference to an object the tenant does not own is NOT_FOUND.
func (l *Ledger) ScopeRequest(ctx context.Context, tenant, method string, req proto.Message) error {
	c := &call{l: l, tenant: tenant, method: method, b: behaviours[method]}
	return c.scopeRequest(ctx, req)
}

// call is one call of a tenant on its way through Handle.
type call struct {
	l      *Ledger
	tenant string
	method string
	b      behaviour
	invoke Invoker
}

// absentError is the answer to a reference to an object the tenant does not own: NOT_FOUND,
// worded as for an object that does not exist, so that another tenant's objects are not
// revealed.
type absentError struct{ ref }

func (e *absentError) Error() string {
	return fmt.Sprintf("csi-gateway: %s %q does not exist", e.kind, e.id)
}

func (e *absentError) GRPCStatus() *status.Status { return status.New(codes.NotFound, e.Error()) }

// ledgerError reports a ledger that cannot be read or written: UNAVAILABLE, to be retried.
func ledgerError(err error) error {
	return status.Errorf(codes.Unavailable, "csi-gateway: the tenancy ledger failed (%v); retry", err)
}

// scopeRequest turns the tenant's request into the backend's, in place: the name of an
// object to create gets the tenant's prefix, references lose it. A reference to an object
// the tenant does not own is an *absentError.
func (c *call) scopeRequest(ctx context.Context, req proto.Message) error {
	m := req.ProtoReflect()
	if len(c.b.creates) > 0 {
		if fd := m.Descriptor().Fields().ByName("name"); fd != nil && m.Get(fd).String() != "" {
			name, err := ScopeName(c.tenant, m.Get(fd).String())
			if err != nil {
				return err
			}
			m.Set(fd, protoreflect.ValueOfString(name))
		}
	}
	return rewriteRefs(m, func(r ref) (string, error) {
		if r.id == "" {
			return "", nil // missing: the backend (or validation) says so
		}
		backendID, ok := UnscopeID(c.tenant, r.id)
		if !ok {
			return "", &absentError{r}
		}
		owned, err := c.owns(ctx, r.kind, backendID)
		if err != nil {
			return "", err
		}
		if !owned {
			return "", &absentError{r}
		}
		return backendID, nil
	})
}

// owns reports whether the ledger gives the backend object to the call's tenant.
func (c *call) owns(ctx context.Context, kind Kind, backendID string) (bool, error) {
	rec, ok, err := c.l.Lookup(ctx, kind, backendID)
	if err != nil {
		return false, ledgerError(err)
	}
	return ok && rec.Tenant == c.tenant, nil
}

// scopeResponse turns the backend's references in resp into the tenant's, in place.
func (c *call) scopeResponse(resp proto.Message) error {
	return rewriteRefs(resp.ProtoReflect(), func(r ref) (string, error) {
		if r.id == "" {
			return "", nil
		}
		return ScopeID(c.tenant, r.id)
	})
}

// record gives a backend object the backend just created or changed to the tenant; res, if
// any, is the quota the call held for it.
func (c *call) record(ctx context.Context, kind Kind, backendID string, r Record, res *reservation) error {
	r.Tenant = c.tenant
	err := c.l.recordReserved(ctx, kind, backendID, r, res)
	if errors.Is(err, errOwnedElsewhere) {
		return status.Errorf(codes.Internal, "csi-gateway: the backend answered %s with a %s that belongs to another tenant; the gateway withheld it (is the backend shared with something that reuses IDs?)", strings.TrimPrefix(c.method, "/"), kind)
	}
	if err != nil {
		return ledgerError(err)
	}
	return nil
}

// newResponse returns the empty response of a method.
func newResponse(method string) (proto.Message, error) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if sd, ok := d.(protoreflect.ServiceDescriptor); err == nil && ok {
		if md := sd.Methods().ByName(protoreflect.Name(name)); md != nil {
			if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
				return mt.New().Interface(), nil
			}
		}
	}
	return nil, status.Errorf(codes.Internal, "csi-gateway: no response type known for %s", method)
}
