package proxy

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// Phase 1 of a CA rotation, with the listener's new CA1+CA2 bundle cut short mid-CA2 (a
// non-atomic write interrupted): the file is corrupt, so the old material (CA1) must keep
// serving AND the failure must be reported, so that the operator does not proceed to phase 2.
// Today Reload accepts it (CA1 parses), and CA2 callers are refused at phase 2 with no error
// ever reported.
func TestMTLSTruncatedBundleMidRotation(t *testing.T) {
	onEachTransport(t, testMTLSTruncatedBundleMidRotation)
}

func testMTLSTruncatedBundleMidRotation(t *testing.T, tr Transport) {
	h := startMTLS(t, tr)
	ca2 := testutil.NewCA(t, "CA2")
	bundle := append(append([]byte{}, h.ca.PEM...), ca2.PEM...)
	testutil.WritePEM(t, h.files.ClientCA, bundle[:len(h.ca.PEM)+len(ca2.PEM)/2])
	if err := h.tls.Reload(); err == nil {
		t.Errorf("Reload of the CA1+CA2 bundle cut short mid-CA2: accepted, want refused naming %s", h.files.ClientCA)
	}
	conn := h.client(t, testutil.Leaf{URIs: []string{mtlsAllowed}}) // a CA1 leaf: still admitted
	if _, err := csi.NewIdentityClient(conn).Probe(serverCallCtx(t), &csi.ProbeRequest{}); err != nil {
		t.Errorf("a CA1 caller after the corrupt bundle: %v", err)
	}
}
