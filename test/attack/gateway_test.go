package attack

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// This file starts the real gateway for one case and watches it: its peak RSS, and a
// bystander that keeps calling Probe on its own connection throughout.

const probeMethod = "/csi.v1.Identity/Probe"

// The memory bound. The gateway runs with GOMEMLIMIT=64MiB: at rest it holds about 25 MiB
// (most of it the binary's own pages and the runtime), and within the limits below an
// attacker with a handful of connections can make it hold at most a few MiB more (100
// streams × 64 KiB of headers is 6.4 MiB per connection). GOMEMLIMIT makes the collector work
// harder rather than let garbage pile up, so what stays is memory the gateway keeps for the
// attacker. rssBound, twice that, leaves room for what the limit does not count (the binary's
// text, freed pages the scavenger has not yet returned) and for a loaded machine's slow
// collector. Every attack below took 260–800 MiB on a gateway without limits (issue 16).
const (
	goMemLimit = "64MiB"
	rssBound   = 128 << 20
)

// limitsConfig is the limits section every case's gateway runs with: the defaults,
// except the two timeouts, which are shortened so that a case that waits for them takes
// seconds, not half a minute.
type limitsConfig struct {
	firstMessageTimeout time.Duration
	writeTimeout        time.Duration
}

// maxConcurrentStreams is the configured bound on streams per connection; the stream flood
// expects every stream beyond it refused.
const maxConcurrentStreams = 100

func (l limitsConfig) yaml() string {
	return fmt.Sprintf(`limits:
  maxFrameSize: 16384
  maxHeaderListSize: 65536
  maxConcurrentStreams: %d
  maxConnections: 256
  firstMessageTimeout: %s
  writeTimeout: %s
  keepaliveMinTime: 10s
`, maxConcurrentStreams, l.firstMessageTimeout, l.writeTimeout)
}

// defaultLimits are the limits of most cases.
var defaultLimits = limitsConfig{firstMessageTimeout: 10 * time.Second, writeTimeout: 2 * time.Second}

// The identities on the TLS listener: the bystander's and the attacker's are listed in
// clients, the unlisted one is signed by the same CA but not listed.
const (
	attackerID = "spiffe://example.org/attacker"
	unlistedID = "spiffe://example.org/unlisted"
)

// gateway is the real binary serving one case. It has three listeners: gw.sock, which the
// test's own uid may call (the bystander's, and the Unix attacks'); locked.sock, whose
// allowUIDs holds only another uid; and a TLS listener on 127.0.0.1 whose clients list the
// attacker's identity.
type gateway struct {
	proc       *testutil.Process
	sock       string
	lockedSock string
	tlsAddr    string
	ca         *testutil.CA
}

// startGateway writes the case's configuration, starts the binary with GOMEMLIMIT and waits
// until it is ready. extraListeners (YAML list items) are added after the three listeners.
func startGateway(t *testing.T, transport string, limits limitsConfig, extraListeners string) *gateway {
	t.Helper()
	// The binary is built before GOMEMLIMIT is in play (only the gateway gets it).
	testutil.Binary(t)
	dir := t.TempDir()
	ca := testutil.NewCA(t, "attack CA")
	cert, key, clientCA := testutil.ServerPEMFiles(t, dir, ca, ca.NewServerLeaf(t))
	g := &gateway{
		sock: filepath.Join(dir, "gw.sock"), lockedSock: filepath.Join(dir, "locked.sock"),
		tlsAddr: freePort(t), ca: ca,
	}
	uid := os.Getuid()
	base := fmt.Sprintf(`transport: %s
listeners:
  - endpoint: unix://%s
    allowUIDs: [%d]
  - endpoint: unix://%s
    allowUIDs: [%d]
  - endpoint: tcp://%s
    tls: {cert: %s, key: %s, clientCA: %s}
    clients: [{uri: %q}]
%sbackends: {embedded: {type: embedded, dataDir: %s}}
routes: [{methods: ["*"], backend: embedded}]
`, transport, g.sock, uid, g.lockedSock, uid+1, g.tlsAddr, cert, key, clientCA, attackerID, extraListeners, filepath.Join(dir, "data"))
	config := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(config, []byte(base+limits.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOMEMLIMIT="+goMemLimit)
	g.proc = testutil.StartEnv(t, env, "serve", "--config", config)
	if err := waitReady(g.proc, g.sock); err != nil {
		t.Fatalf("the gateway did not start: %v\n%s", err, g.proc.Output())
	}
	return g
}

// waitReady waits until the gateway says it is ready and its Unix socket accepts
// connections; it returns an error when the process exits first.
func waitReady(p *testutil.Process, sock string) error {
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.Output(), "gateway ready") {
		if err := exitStatus(p, 20*time.Millisecond); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 30s")
		}
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	return c.Close()
}

// exitStatus waits up to timeout for the process to exit and returns why it did, or nil when
// it is still running.
func exitStatus(p *testutil.Process, timeout time.Duration) error {
	err := p.Wait(timeout)
	if err == nil {
		return fmt.Errorf("exited with status 0")
	}
	if strings.HasPrefix(err.Error(), "still running") {
		return nil
	}
	return fmt.Errorf("exited: %w", err)
}

// tlsTarget is the TLS listener, reached with a client certificate for uri.
func (g *gateway) tlsTarget(t *testing.T, uri string) attackerTarget {
	kp := g.ca.NewLeaf(t, testutil.Leaf{URIs: []string{uri}})
	return attackerTarget{addr: g.tlsAddr, tls: testutil.ClientTLS(t, []*testutil.CA{g.ca}, kp, 0, 0)}
}

// memory reads the gateway's peak (VmHWM) and current (VmRSS) resident set, in bytes.
func (g *gateway) memory() (peak, now int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", g.proc.PID()))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, v, ok := strings.Cut(s.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %v", s.Text(), err)
		}
		if name == "VmHWM" {
			peak = kb << 10
		} else {
			now = kb << 10
		}
	}
	return peak, now, s.Err()
}

// freePort returns a TCP address on 127.0.0.1 that nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// bystander is a well-behaved caller: a grpc-go client on its own connection to gw.sock that
// calls Probe every few milliseconds until stopped. Every call must succeed.
type bystander struct {
	conn     *grpc.ClientConn
	calls    atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	firstErr error
	stop     chan struct{}
	done     chan struct{}
}

// bystanderCallTimeout is generous: on a loaded 2-core machine under attack a call can take
// a second or more, and the question is whether it is answered, not how fast.
const bystanderCallTimeout = 20 * time.Second

func startBystander(t *testing.T, sock string) *bystander {
	t.Helper()
	conn := testutil.Dial(t, "unix://"+sock) // waits for a first Probe
	b := &bystander{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for {
			b.probe()
			select {
			case <-b.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return b
}

func (b *bystander) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), bystanderCallTimeout)
	defer cancel()
	_, err := csi.NewIdentityClient(b.conn).Probe(ctx, &csi.ProbeRequest{})
	b.calls.Add(1)
	if err != nil {
		b.failed.Add(1)
		b.mu.Lock()
		if b.firstErr == nil {
			b.firstErr = err
		}
		b.mu.Unlock()
	}
}

// finish makes one more call (the gateway must still answer once the attack is over), stops
// the loop and returns the counts and the first failure.
func (b *bystander) finish() (calls, failed int64, firstErr error) {
	close(b.stop)
	<-b.done
	b.probe()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls.Load(), b.failed.Load(), b.firstErr
}
