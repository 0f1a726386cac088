package translate

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
)

// Errors: a backend's failure passes to the caller with its code, and the gateway's
// canonicalize applies the caller's version's table to it: the v0 and v1 tables agree row by
// row on every RPC both have (docs/versions.md), but for one.
//
// v0's ControllerUnpublishVolume answers NOT_FOUND when the volume or the node does not exist;
// it has no other NOT_FOUND. v1 answers NOT_FOUND only when the volume cannot be regarded as
// unpublished, and OK when it can: a volume or node that does not exist has nothing published.
// So a v0 driver's NOT_FOUND there is v1's OK (and Kubernetes' attacher, which retries a
// NOT_FOUND detach forever, can finish).

// unpublishedWhenNotFound is r answering OK (its empty response) when the v0 driver answers
// NOT_FOUND, noted on the call's CallInfo so the gateway records the driver's answer beside
// it (a repair of kind code).
func unpublishedWhenNotFound(r rpc) rpc {
	return rpc{call: func(ctx context.Context, b *Backend, raw []byte) ([]byte, error) {
		resp, err := r.call(ctx, b, raw)
		var be *backends.Error
		if errors.As(err, &be) && be.Answer != nil && be.Answer.Code() == codes.NotFound {
			backends.CallInfoFrom(ctx).NoteAnswered(codes.NotFound, be.Answer.Message())
			return []byte{}, nil
		}
		return resp, err
	}}
}
