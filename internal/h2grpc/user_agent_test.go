package h2grpc

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// agentServer is a grpc-go server that answers every call with the user-agent it saw, one
// value per response; it announces maxHeaderList (0: grpc-go's default).
func agentServer(t *testing.T, maxHeaderList uint32) string {
	t.Helper()
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			return err
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		return ss.SendMsg(&frame{b: []byte(strings.Join(md.Get("user-agent"), "|"))})
	})}
	if maxHeaderList > 0 {
		opts = append(opts, grpc.MaxHeaderListSize(maxHeaderList))
	}
	l := unixListener(t)
	s := grpc.NewServer(opts...)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// TestClientUserAgent: a call carries ClientConfig.UserAgent, or the one CallUserAgent gives,
// followed by the client's token, as grpc-go's client does with grpc.WithUserAgent; without
// either, the token alone.
func TestClientUserAgent(t *testing.T) {
	addr := agentServer(t, 0)
	for _, c := range []struct {
		name, config string
		call         []grpc.CallOption
		want         string
	}{
		{"none", "", nil, "grpc-go-h2grpc/1"},
		{"config", "csi-gateway/v1.2.3", nil, "csi-gateway/v1.2.3 grpc-go-h2grpc/1"},
		{"call", "csi-gateway/v1.2.3", []grpc.CallOption{CallUserAgent("csi-provisioner/v5.1.0 grpc-go/1.70.0")},
			"csi-provisioner/v5.1.0 grpc-go/1.70.0 grpc-go-h2grpc/1"},
		{"call without config", "", []grpc.CallOption{CallUserAgent("kubelet/v1.31.4")}, "kubelet/v1.31.4 grpc-go-h2grpc/1"},
	} {
		cc := newTestClient(t, addr, ClientConfig{UserAgent: c.config})
		var got frame
		if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{b: []byte("x")}, &got, c.call...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got.b) != c.want {
			t.Errorf("%s: the server saw user-agent %q, want %q", c.name, got.b, c.want)
		}
	}
}

// TestClientUserAgentBounded: a user-agent is held to the rules of other headers — printable
// ASCII, and within the server's header list size, or the call fails before it is sent.
func TestClientUserAgentBounded(t *testing.T) {
	cc := newTestClient(t, agentServer(t, 4096), ClientConfig{})
	err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{}, &frame{}, CallUserAgent("bad\nagent"))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "user-agent") {
		t.Errorf("a user-agent with a newline: %v, want Internal naming the user-agent", err)
	}
	err = cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{}, &frame{}, CallUserAgent(strings.Repeat("a", 8192)))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "header list size") {
		t.Errorf("an 8 KiB user-agent to a server taking 4 KiB of headers: %v, want Internal (header list size)", err)
	}
	var got frame
	if err := cc.Invoke(ctxTimeout(t, 5*time.Second), mUnary, &frame{}, &got, CallUserAgent(strings.Repeat("a", 1024))); err != nil {
		t.Fatalf("a 1 KiB user-agent: %v", err)
	}
	if len(got.b) != 1024+len(" grpc-go-h2grpc/1") {
		t.Errorf("the server saw a user-agent of %d bytes", len(got.b))
	}
}
