package proxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestMaxConnections: with maxConnections open on a listener, the next connection is
// accepted and closed at once, on both transports, while the open ones keep being served.
// Without the bound the extra connection would stay open and the test would time out.
func TestMaxConnections(t *testing.T) {
	onEachTransport(t, func(t *testing.T, transport Transport) {
		ts, _ := startLimitsHarness(t, transport, TransportLimits{MaxConnections: 2}, &serverFake{})
		probe := func() error {
			_, err := csi.NewIdentityClient(ts.conn).Probe(serverCallCtx(t), &csi.ProbeRequest{})
			return err
		}
		if err := probe(); err != nil { // connection 1: the bystander
			t.Fatal(err)
		}
		testutil.DialRawH2(t, "unix", ts.sock) // connection 2, served: the server's SETTINGS came
		extra, err := net.Dial("unix", ts.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		_ = extra.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := extra.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a connection past the limit: read %v, want it closed", err)
		}
		if err := probe(); err != nil {
			t.Errorf("the bystander after the refusal: %v", err)
		}
		if lines := ts.log.lines(t, "connection closed: the listener has limits.maxConnections open"); len(lines) != 1 {
			t.Errorf("refusal log lines: %v, want one", lines)
		}
	})
}
