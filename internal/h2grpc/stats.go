package h2grpc

import (
	"context"

	"google.golang.org/grpc/stats"
)

// statsHandlers calls every handler the way grpc-go combines several: TagRPC chains the
// contexts in order, HandleRPC gives each handler the same event.
type statsHandlers []stats.Handler

func (h statsHandlers) tagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	for _, sh := range h {
		ctx = sh.TagRPC(ctx, info)
	}
	return ctx
}

func (h statsHandlers) handleRPC(ctx context.Context, s stats.RPCStats) {
	for _, sh := range h {
		sh.HandleRPC(ctx, s)
	}
}

func (h statsHandlers) tagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	for _, sh := range h {
		ctx = sh.TagConn(ctx, info)
	}
	return ctx
}

func (h statsHandlers) handleConn(ctx context.Context, s stats.ConnStats) {
	for _, sh := range h {
		sh.HandleConn(ctx, s)
	}
}
