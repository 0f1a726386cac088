package proxy

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/csi-gateway/csi-gateway/auth"
)

func TestIdentify(t *testing.T) {
	unixID := auth.Identity{Kind: "unix", UID: 1000, GID: 100, PID: 4242}
	anonymous := auth.Identity{Kind: "anonymous"}
	addr := &net.UnixAddr{Name: "@", Net: "unix"}
	tests := []struct {
		name string
		ctx  context.Context
		want auth.Identity
	}{
		{"peer credentials", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: auth.PeerAuthInfo{Identity: unixID}}), unixID},
		{"root", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: auth.PeerAuthInfo{Identity: auth.Identity{Kind: "unix"}}}), auth.Identity{Kind: "unix"}},
		{"no peer", context.Background(), anonymous},
		{"peer without auth info", peer.NewContext(context.Background(), &peer.Peer{Addr: addr}), anonymous},
		{"TLS auth info", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}}), anonymous},
		{"pointer to peer auth info is not trusted", peer.NewContext(context.Background(),
			&peer.Peer{Addr: addr, AuthInfo: &auth.PeerAuthInfo{Identity: unixID}}), anonymous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := identify(tt.ctx); got != tt.want {
				t.Errorf("identify = %+v, want %+v", got, tt.want)
			}
		})
	}
}
