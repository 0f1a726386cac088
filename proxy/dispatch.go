package proxy

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// dispatch is the end of the chain: it routes the call and hands it to its backend.
func dispatch(routes routeTable, bes map[string]backends.Backend) Handler {
	return func(ctx context.Context, call *Call) error {
		name := routes.match(call.Method)
		if name == "" {
			return status.Errorf(codes.Unimplemented, "csi-gateway: no route for %s; add a route for it to the gateway's configuration", call.Method)
		}
		call.Backend = name
		b := bes[name]
		if call.Stream != nil {
			return b.Stream(ctx, call.Method, call.Stream)
		}
		resp, err := b.Unary(ctx, call.Method, call.Request)
		if err != nil {
			return err
		}
		call.Response = resp
		info := backends.CallInfoFrom(ctx)
		if a := info.AnsweredOtherwise(); a != nil {
			// The backend made the driver's failure a success (a translation): recorded as the
			// gateway's own repairs are, beside the driver's code and (scrubbed) message.
			call.noteRepair(a.Code, info.Scrub(a.Message), []string{repairCode})
		}
		return nil
	}
}
