package tlsconf

import (
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// A CA bundle cut short (CA1 whole, CA2 truncated), as trust-manager's CA1+CA2 bundle would be
// after an interrupted, non-atomic write mid-rotation, must be refused and keep the old
// material: publishing it drops CA2 silently, and every CA2 client is refused at phase 2.
func TestReloadRefusesTruncatedCABundle(t *testing.T) {
	f := newFixture(t)
	s, _ := f.start(t, WithPollInterval(0))
	ca2 := testutil.NewCA(t, "CA2")
	good := append(append([]byte{}, f.ca.PEM...), ca2.PEM...)
	testutil.WritePEM(t, f.files.ClientCA, good[:len(f.ca.PEM)+len(ca2.PEM)/2])
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), f.files.ClientCA) {
		t.Errorf("Reload of a CA bundle cut short: %v, want an error naming %s", err, f.files.ClientCA)
	}
	// A bundle whose second certificate is damaged (valid PEM, bad DER) likewise.
	bad := append(append([]byte{}, f.ca.PEM...), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")...)
	testutil.WritePEM(t, f.files.ClientCA, bad)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), f.files.ClientCA) {
		t.Errorf("Reload of a CA bundle with a damaged certificate: %v, want an error naming %s", err, f.files.ClientCA)
	}
}

// The same broken file, broken again after a repair, must be logged again.
func TestPollerLogsRecurringErrorAfterRepair(t *testing.T) {
	f := newFixture(t)
	_, _ = f.start(t, WithPollInterval(10*time.Millisecond))
	waitLogged := func(n int) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); strings.Count(f.log.String(), "cannot be loaded") < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%d failed reloads logged, want %d: %s", strings.Count(f.log.String(), "cannot be loaded"), n, f.log.String())
			}
		}
	}
	testutil.WritePEM(t, f.files.Key, []byte("not a key"))
	waitLogged(1)
	testutil.WritePEM(t, f.files.Key, f.server.KeyPEM) // repaired: same material as before
	time.Sleep(200 * time.Millisecond)
	testutil.WritePEM(t, f.files.Key, []byte("not a key")) // broken again, days later
	waitLogged(2)
}
