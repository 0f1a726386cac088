package proxy

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

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

// recordingAuthorizer refuses with err (nil admits) and records who asked.
type recordingAuthorizer struct {
	err  error
	seen []auth.Identity
}

func (f *recordingAuthorizer) Authorize(id auth.Identity) error {
	f.seen = append(f.seen, id)
	return f.err
}

func TestAuthorize(t *testing.T) {
	caller := auth.Identity{Kind: "unix", UID: 1000, GID: 1000, PID: 7}
	nextErr := status.Error(codes.NotFound, "from next")
	tests := []struct {
		name     string
		az       authorizer
		ctx      context.Context
		want     codes.Code
		wantMsg  string
		wantNext bool
	}{
		{"admitted", &recordingAuthorizer{}, auth.NewContext(context.Background(), caller), codes.NotFound, "from next", true},
		{"refused with the authorizer's reason", &recordingAuthorizer{err: errors.New("uid 1000 is not welcome here")},
			auth.NewContext(context.Background(), caller),
			codes.PermissionDenied, "csi-gateway: uid 1000 is not welcome here", false},
		{"allow-list refuses an unlisted uid", auth.UIDAllowList{UIDs: []uint32{0}}, auth.NewContext(context.Background(), caller),
			codes.PermissionDenied, "csi-gateway: uid 1000 (gid 1000) is not in this listener's allowUIDs/allowGIDs", false},
		{"allow-list admits a listed gid", auth.UIDAllowList{UIDs: []uint32{0}, GIDs: []uint32{1000}}, auth.NewContext(context.Background(), caller),
			codes.NotFound, "from next", true},
		{"allow-list fails closed without an identity", auth.UIDAllowList{UIDs: []uint32{1000}}, context.Background(),
			codes.PermissionDenied, "csi-gateway: the caller's Unix credentials are unknown and this listener only admits listed users", false},
		{"allow-list fails closed for anonymous", auth.UIDAllowList{UIDs: []uint32{1000}},
			auth.NewContext(context.Background(), auth.Identity{Kind: "anonymous"}),
			codes.PermissionDenied, "csi-gateway: the caller's Unix credentials are unknown and this listener only admits listed users", false},
		{"empty allow-list admits anyone", auth.UIDAllowList{}, context.Background(), codes.NotFound, "from next", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			h := authorize(tt.az)(func(context.Context, *Call) error {
				called = true
				return nextErr
			})
			st := status.Convert(h(tt.ctx, &Call{Method: "/csi.v1.Controller/CreateVolume"}))
			if st.Code() != tt.want || st.Message() != tt.wantMsg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tt.want, tt.wantMsg)
			}
			if called != tt.wantNext {
				t.Errorf("next called = %v, want %v", called, tt.wantNext)
			}
			if f, ok := tt.az.(*recordingAuthorizer); ok {
				want, _ := auth.FromContext(tt.ctx)
				if len(f.seen) != 1 || f.seen[0] != want {
					t.Errorf("the authorizer saw %+v, want [%+v]", f.seen, want)
				}
			}
		})
	}
}
