package proxy

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverPanics turns a panic anywhere in the chain into INTERNAL for that one call and logs
// the stack, so one bad call never takes the gateway (and every other caller) down. The
// stack goes to the log only; the caller sees a short message.
func recoverPanics(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) (err error) {
			defer func() {
				if r := recover(); r != nil {
					log.Error("panic while serving a call", "method", call.Method, "stack", string(debug.Stack()))
					err = status.Errorf(codes.Internal, "csi-gateway: internal error while serving %s; see the gateway's log", call.MethodName())
				}
			}()
			return next(ctx, call)
		}
	}
}
