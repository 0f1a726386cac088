package h2grpc

import (
	"context"

	"google.golang.org/grpc/stats"
)

// statsHandlers calls every handler the way grpc-go combines several: TagRPC chains the
// contexts in order, HandleRPC gives each handler the same event.
type statsHandlers []stats.Handler

func (h statsHandlers) tagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return tagEach(h, ctx, info, stats.Handler.TagRPC)
}

func (h statsHandlers) handleRPC(ctx context.Context, s stats.RPCStats) {
	handleEach(h, ctx, s, stats.Handler.HandleRPC)
}

func (h statsHandlers) tagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return tagEach(h, ctx, info, stats.Handler.TagConn)
}

func (h statsHandlers) handleConn(ctx context.Context, s stats.ConnStats) {
	handleEach(h, ctx, s, stats.Handler.HandleConn)
}

// tagEach passes ctx through tag of every handler in order and returns the last context.
func tagEach[I any](h statsHandlers, ctx context.Context, info I, tag func(stats.Handler, context.Context, I) context.Context) context.Context {
	for _, sh := range h {
		ctx = tag(sh, ctx, info)
	}
	return ctx
}

// handleEach gives every handler the same event.
func handleEach[S any](h statsHandlers, ctx context.Context, s S, handle func(stats.Handler, context.Context, S)) {
	for _, sh := range h {
		handle(sh, ctx, s)
	}
}
