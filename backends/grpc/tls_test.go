package grpcbackend

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// mtlsAppliance serves the embedded appliance over gRPC with mutual TLS (certificates of
// ca) on 127.0.0.1 and returns its dns:/// target.
func mtlsAppliance(t *testing.T, ca *testutil.CA) string {
	t.Helper()
	dir := t.TempDir()
	cert, key, clientCA := testutil.ServerPEMFiles(t, dir, ca, ca.NewServerLeaf(t))
	ts, err := tlsconf.NewServer(tlsconf.ServerFiles{Cert: cert, Key: key, ClientCA: clientCA}, tlsconf.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(ts.Config())))
	a.Register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "dns:///" + lis.Addr().String()
}

// clientCreds returns TLS credentials that trust ca and present a certificate of certCA.
func clientCreds(t *testing.T, ca, certCA *testutil.CA) credentials.TransportCredentials {
	t.Helper()
	dir := t.TempDir()
	kp := certCA.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/gateway"}})
	files := tlsconf.ClientFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"),
		Key: filepath.Join(dir, "tls.key"), ServerName: "localhost"}
	testutil.WritePEM(t, files.CA, ca.PEM)
	testutil.WritePEM(t, files.Cert, kp.CertPEM)
	testutil.WritePEM(t, files.Key, kp.KeyPEM)
	c, err := tlsconf.NewClient(files, tlsconf.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return credentials.NewTLS(c.Config())
}

func TestMutualTLSTarget(t *testing.T) {
	ca := testutil.NewCA(t, "driver CA")
	target := mtlsAppliance(t, ca)

	b := newBackend(t, target, WithTransportCredentials(clientCreds(t, ca, ca)))
	raw, err := b.Unary(context.Background(), "/csi.v1.Identity/GetPluginInfo", mustMarshal(t, &csi.GetPluginInfoRequest{}))
	if err != nil {
		t.Fatalf("GetPluginInfo over mTLS: %v", err)
	}
	var info csi.GetPluginInfoResponse
	if err := proto.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "embedded.csi-gateway.io" {
		t.Errorf("plugin name %q", info.GetName())
	}

	// A gateway that does not trust the driver's CA cannot call it.
	other := testutil.NewCA(t, "other CA")
	b = newBackend(t, target, WithTransportCredentials(clientCreds(t, other, ca)))
	_, err = b.Unary(context.Background(), "/csi.v1.Identity/GetPluginInfo", mustMarshal(t, &csi.GetPluginInfoRequest{}))
	if err == nil || !strings.Contains(err.Error(), "authority") {
		t.Errorf("with the wrong CA: %v, want a failure naming the unknown authority", err)
	}
}
