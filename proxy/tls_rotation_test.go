package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// rotationCaller is one caller of the listener: a tlsconf.Client over its own PEM files,
// wrapped in credentials.NewTLS exactly as the gateway wraps it to dial a grpc backend
// (cmd/csi-gateway openBackend). One credentials value is kept across every reload, as a
// connection pool keeps it.
type rotationCaller struct {
	identity testutil.Leaf
	files    tlsconf.ClientFiles
	tls      *tlsconf.Client
	creds    credentials.TransportCredentials
	leaf     testutil.KeyPair // the certificate now on disk
}

// newRotationCaller writes a leaf of ca with identity and ca's bundle to a new directory and
// loads them with tlsconf.NewClient, polling like the gateway does (faster) and logging to log.
func newRotationCaller(t *testing.T, i int, ca *testutil.CA, identity testutil.Leaf, log *testutil.SyncBuffer) *rotationCaller {
	t.Helper()
	dir := t.TempDir()
	c := &rotationCaller{identity: identity, files: tlsconf.ClientFiles{
		CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), ServerName: "localhost",
	}}
	c.leaf = ca.NewLeaf(t, identity)
	testutil.WritePEM(t, c.files.CA, ca.PEM)
	testutil.WritePEM(t, c.files.Cert, c.leaf.CertPEM)
	testutil.WritePEM(t, c.files.Key, c.leaf.KeyPEM)
	var err error
	c.tls, err = tlsconf.NewClient(c.files, tlsconf.WithPollInterval(10*time.Millisecond),
		tlsconf.WithName(fmt.Sprintf("backends.caller%d.tls", i)), tlsconf.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.tls.Close() })
	c.creds = credentials.NewTLS(c.tls.Config())
	return c
}

// rotationProbe makes one Probe on a new connection (so a new handshake) with creds and
// returns the serial of the certificate the listener presented.
func rotationProbe(addr string, creds credentials.TransportCredentials) (*big.Int, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return nil, fmt.Errorf("no TLS peer certificate (auth info %T)", p.AuthInfo)
	}
	return info.State.PeerCertificates[0].SerialNumber, nil
}

// rotationLoad runs callers in a loop until stopped, counting calls and failures by the
// phase current when each call started.
type rotationLoad struct {
	addr   string
	names  []string // of the phases
	phase  atomic.Int64
	calls  []atomic.Int64 // by phase
	failed []atomic.Int64 // by phase
	// started[w] is the phase in which worker w started its last completed call: once every
	// worker has completed a call started in phase p, no handshake in flight began earlier.
	started []atomic.Int64
	mu      sync.Mutex
	errs    []string // the first few failures
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func (l *rotationLoad) run(callers []*rotationCaller, perCaller int) {
	l.started = make([]atomic.Int64, len(callers)*perCaller)
	for w := range l.started {
		l.started[w].Store(-1)
		creds := callers[w%len(callers)].creds
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				p := l.phase.Load()
				_, err := rotationProbe(l.addr, creds)
				l.calls[p].Add(1)
				if err != nil {
					l.failed[p].Add(1)
					l.mu.Lock()
					if len(l.errs) < 5 {
						l.errs = append(l.errs, fmt.Sprintf("phase %q, caller %d: %v", l.names[p], w%len(callers), err))
					}
					l.mu.Unlock()
				}
				l.started[w].Store(p)
			}
		}()
	}
}

func (l *rotationLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// TestMTLSCARotationUnderLoad rotates the CA the way cert-manager and trust-manager do, on
// both sides (the listener's tlsconf.Server and the callers' tlsconf.Client files), while
// callers make calls continuously, each on a new connection: (0) CA1 everywhere; (1) the
// trust bundles become CA1+CA2; (2) every leaf is re-issued by CA2; (3) CA1 is removed from
// every bundle. Each step runs first with only the listener changed, then with the callers
// changed too, since the two are rotated independently. Then corrupt files (the listener's
// key, certificate and client CA bundle; a caller's CA bundle and key) keep the old material
// serving and are logged. No call may fail.
//
// Each step is applied with an explicit Reload (what SIGHUP does) once its files are written,
// and the next starts only when every caller has completed a call begun after it, so a
// handshake never spans more than two adjacent steps, whatever the machine's speed. The
// pollers (10 ms) run too, racing the writes and the reloads; whether they or Reload publish
// a step first is timing, so their "reloaded" lines are not asserted (TestMTLSReloadUnderLoad
// does), only their errors for the corrupt files, which no Reload can publish.
func TestMTLSCARotationUnderLoad(t *testing.T) { onEachTransport(t, testMTLSCARotationUnderLoad) }

func testMTLSCARotationUnderLoad(t *testing.T, tr Transport) {
	const minCallsPerPhase, minPhaseTime = 10, 150 * time.Millisecond
	h := startMTLS(t, tr)
	ca1, ca2 := h.ca, testutil.NewCA(t, "CA2")
	bundle12 := append(append([]byte{}, ca1.PEM...), ca2.PEM...)
	serverLeaf := ca1.NewServerLeaf(t) // phase 0 re-issues the listener's leaf so the test knows its serial
	testutil.WritePEM(t, h.files.Key, serverLeaf.KeyPEM)
	testutil.WritePEM(t, h.files.Cert, serverLeaf.CertPEM)
	if err := h.tls.Reload(); err != nil {
		t.Fatal(err)
	}

	clog := &testutil.SyncBuffer{}
	var callers []*rotationCaller
	for i, id := range []testutil.Leaf{
		{URIs: []string{mtlsAllowed}},
		{CN: "node", DNSNames: []string{"node.example.org"}},
		{URIs: []string{mtlsAllowed}},
	} {
		callers = append(callers, newRotationCaller(t, i, ca1, id, clog))
	}
	ca1Leaf := callers[0].leaf // kept to show CA1 is retired at the end

	phases := []string{
		"0 CA1 everywhere",
		"1a listener trusts CA1+CA2",
		"1b callers trust CA1+CA2",
		"2a listener leaf from CA2",
		"2b callers' leaves from CA2",
		"3a listener retires CA1",
		"3b callers retire CA1",
		"4 listener key corrupt",
		"5 listener certificate corrupt",
		"6 listener client CA bundle corrupt",
		"7 callers' CA bundle and key corrupt",
		"8 repaired",
	}
	load := &rotationLoad{addr: h.addr, names: phases, calls: make([]atomic.Int64, len(phases)), failed: make([]atomic.Int64, len(phases)), stop: make(chan struct{})}
	load.run(callers, 2)
	t.Cleanup(load.halt) // before the listener's cleanups, should the test stop early
	// The calls' tally, also when a phase stops the test early.
	defer func() {
		load.halt()
		var total, failed int64
		var summary []string
		for p, name := range phases {
			n, f := load.calls[p].Load(), load.failed[p].Load()
			total, failed = total+n, failed+f
			summary = append(summary, fmt.Sprintf("%s: %d calls, %d failed", name, n, f))
		}
		t.Logf("calls by phase:\n\t%s", strings.Join(summary, "\n\t"))
		if failed != 0 || total < 20 {
			t.Errorf("%d of %d calls failed during the rotation, want 0 of at least 20; first failures:\n\t%s",
				failed, total, strings.Join(load.errs, "\n\t"))
		}
	}()

	reload := func(what string, r interface{ Reload() error }) {
		t.Helper()
		if err := r.Reload(); err != nil {
			t.Fatalf("%s: Reload: %v", what, err)
		}
	}
	// settle makes p the current phase, once its material is in place, and waits until the
	// load has run in it: minCallsPerPhase calls, minPhaseTime, and a call by every worker.
	settle := func(p int) {
		t.Helper()
		load.phase.Store(int64(p))
		start := time.Now()
		for deadline := start.Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			done := load.calls[p].Load() >= minCallsPerPhase && time.Since(start) >= minPhaseTime
			for w := range load.started {
				done = done && load.started[w].Load() >= int64(p)
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("phase %q: only %d calls in 60s", phases[p], load.calls[p].Load())
			}
		}
		// The listener serves the certificate of this phase (the corrupt phases: still the last good one).
		serial, err := rotationProbe(h.addr, callers[0].creds)
		if err != nil {
			t.Fatalf("phase %q: a check call: %v", phases[p], err)
		}
		if serial.Cmp(serverLeaf.Cert.SerialNumber) != 0 {
			t.Errorf("phase %q: the listener serves serial %s, want %s", phases[p], serial, serverLeaf.Cert.SerialNumber)
		}
	}
	// corrupt writes data to path, checks that Reload refuses it naming the file, and waits for
	// the poller to log it (naming the file, and with logged in the error when not empty).
	corrupt := func(r interface{ Reload() error }, log *testutil.SyncBuffer, path string, data []byte, logged string) {
		t.Helper()
		from := len(log.String())
		testutil.WritePEM(t, path, data)
		if err := r.Reload(); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Reload of a corrupt %s: %v, want an error naming it", filepath.Base(path), err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			s := log.String()[from:]
			if strings.Contains(s, "cannot be loaded") && strings.Contains(s, path) && strings.Contains(s, logged) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the corrupt %s was not logged (want %q): %s", path, logged, log.String()[from:])
			}
		}
	}

	settle(0)

	// 1: distribute trust: both bundles hold CA1 and CA2; every leaf is still CA1's.
	testutil.WritePEM(t, h.files.ClientCA, bundle12)
	reload("listener", h.tls)
	settle(1)
	for i, c := range callers {
		testutil.WritePEM(t, c.files.CA, bundle12)
		reload(fmt.Sprintf("caller %d", i), c.tls)
	}
	settle(2)

	// 2: re-issue every leaf from CA2: the listener's, then each caller its own.
	serverLeaf = ca2.NewServerLeaf(t)
	testutil.WritePEM(t, h.files.Key, serverLeaf.KeyPEM)
	testutil.WritePEM(t, h.files.Cert, serverLeaf.CertPEM)
	reload("listener", h.tls)
	settle(3)
	for i, c := range callers {
		c.leaf = ca2.NewLeaf(t, c.identity)
		testutil.WritePEM(t, c.files.Key, c.leaf.KeyPEM)
		testutil.WritePEM(t, c.files.Cert, c.leaf.CertPEM)
		reload(fmt.Sprintf("caller %d", i), c.tls)
	}
	settle(4)

	// 3: retire CA1: both bundles hold CA2 only, the listener's first. From 3a on, a caller
	// still presenting its CA1 leaf (a reload that did not take) would fail its calls.
	testutil.WritePEM(t, h.files.ClientCA, ca2.PEM)
	reload("listener", h.tls)
	settle(5)
	for i, c := range callers {
		testutil.WritePEM(t, c.files.CA, ca2.PEM)
		reload(fmt.Sprintf("caller %d", i), c.tls)
	}
	settle(6)

	// CA1 is really retired, on both sides: the listener refuses a caller still presenting its
	// CA1 leaf and admits a CA2 one, and a caller trusting only CA1 refuses the listener.
	oneShot := func(ca []byte, kp testutil.KeyPair) error {
		t.Helper()
		dir := t.TempDir()
		files := tlsconf.ClientFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), ServerName: "localhost"}
		testutil.WritePEM(t, files.CA, ca)
		testutil.WritePEM(t, files.Cert, kp.CertPEM)
		testutil.WritePEM(t, files.Key, kp.KeyPEM)
		c, err := tlsconf.NewClient(files, tlsconf.WithPollInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = rotationProbe(h.addr, credentials.NewTLS(c.Config()))
		return err
	}
	if err := oneShot(ca2.PEM, ca1Leaf); status.Code(err) != codes.Unavailable {
		t.Errorf("a caller presenting its CA1 leaf after CA1 is retired: %v, want refused (Unavailable)", err)
	}
	if err := oneShot(ca2.PEM, ca2.NewLeaf(t, testutil.Leaf{URIs: []string{mtlsAllowed}})); err != nil {
		t.Errorf("a caller presenting a CA2 leaf after CA1 is retired: %v, want admitted", err)
	}
	if err := oneShot(ca1.PEM, ca2.NewLeaf(t, testutil.Leaf{URIs: []string{mtlsAllowed}})); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("a caller trusting only CA1 after the listener's leaf moved to CA2: %v, want refused (unknown authority)", err)
	}

	// 4-7: corrupt files mid-load keep the last good material serving, and are logged.
	corrupt(h.tls, h.log, h.files.Key, []byte("not a key"), "in key input")
	settle(7)
	testutil.WritePEM(t, h.files.Key, serverLeaf.KeyPEM)
	reload("listener", h.tls)

	corrupt(h.tls, h.log, h.files.Cert, []byte("-----BEGIN CERTIFICATE-----\nbroken\n"), "in certificate input")
	settle(8)
	testutil.WritePEM(t, h.files.Cert, serverLeaf.CertPEM)
	reload("listener", h.tls)

	// A bundle cut short, as by a copy interrupted mid-write.
	corrupt(h.tls, h.log, h.files.ClientCA, ca2.PEM[:len(ca2.PEM)/2], "")
	settle(9)
	testutil.WritePEM(t, h.files.ClientCA, ca2.PEM)
	reload("listener", h.tls)

	corrupt(callers[0].tls, clog, callers[0].files.CA, ca2.PEM[:len(ca2.PEM)/2], "")
	corrupt(callers[1].tls, clog, callers[1].files.Key, []byte("not a key"), "in key input")
	settle(10)
	testutil.WritePEM(t, callers[0].files.CA, ca2.PEM)
	reload("caller 0", callers[0].tls)
	testutil.WritePEM(t, callers[1].files.Key, callers[1].leaf.KeyPEM)
	reload("caller 1", callers[1].tls)
	settle(11)
}
