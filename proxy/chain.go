package proxy

import "context"

// Handler serves one call: on success the call's Response is set (unary) or the stream has
// been served; on failure the error says why.
type Handler func(ctx context.Context, call *Call) error

// Middleware wraps a Handler with one concern (logging, authentication, ...).
type Middleware func(next Handler) Handler

// chain composes middlewares around h; the first middleware is the outermost.
func chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
