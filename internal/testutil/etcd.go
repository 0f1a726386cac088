package testutil

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EtcdEnv names the etcd binary the tests that need a real etcd run (make test builds the
// pinned one with test/orchestrators/build-components.sh etcd-ledger and sets it).
const EtcdEnv = "CSIGWTEST_ETCD"

// EtcdCluster is a real etcd cluster of child processes on loopback: clients reach it over
// mTLS (certificates minted by the test), members talk plain HTTP to each other. Members can
// be killed and restarted to take quorum away and give it back.
type EtcdCluster struct {
	t       testing.TB
	bin     string
	dir     string
	members []*etcdMember
	// ServerName is the name the members' certificate carries (their endpoints are IPs).
	ServerName string
	// CA, Cert and Key are PEM files: the CA bundle the members' certificate chains to,
	// and a client certificate and key they accept.
	CA, Cert, Key string
	client        *http.Client // for the readiness check
}

type etcdMember struct {
	name, client, peer string // name, client URL, peer URL
	cmd                *exec.Cmd
	done               chan struct{}
}

// StartEtcd starts a cluster of n members and waits until it serves; the test's cleanup
// kills it. Without $CSIGWTEST_ETCD the test is skipped, saying how to run it.
func StartEtcd(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	bin := os.Getenv(EtcdEnv)
	if bin == "" {
		t.Skipf("SKIPPED, NEEDS A REAL ETCD: $%s is not set. make test builds etcd and sets it; by hand: "+
			"test/orchestrators/build-components.sh etcd-ledger && export %s=$(test/orchestrators/build-components.sh --path etcd-ledger)", EtcdEnv, EtcdEnv)
	}
	dir := t.TempDir()
	ca := NewCA(t, "etcd test CA")
	c := &EtcdCluster{t: t, bin: bin, dir: dir, ServerName: "localhost"}
	c.Cert, c.Key, c.CA = ServerPEMFiles(t, dir, ca, ca.NewServerLeaf(t))
	c.client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: ClientTLS(t, []*CA{ca}, ca.NewServerLeaf(t), tls.VersionTLS12, 0),
	}}
	var cluster []string
	for i := range n {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), client: "https://" + FreeAddr(t), peer: "http://" + FreeAddr(t)}
		c.members = append(c.members, m)
		cluster = append(cluster, m.name+"="+m.peer)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Stop(i)
		}
	})
	for i := range c.members {
		c.start(i, "--initial-cluster="+strings.Join(cluster, ","), "--initial-cluster-state=new",
			"--initial-cluster-token="+filepath.Base(dir))
	}
	for i := range c.members {
		c.WaitHealthy(i)
	}
	return c
}

// Endpoints are the members' client URLs.
func (c *EtcdCluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.client)
	}
	return eps
}

// start runs member i with its data directory (new with the initial flags; an existing one
// on a restart, which ignores them).
func (c *EtcdCluster) start(i int, initial ...string) {
	m := c.members[i]
	log, err := os.OpenFile(filepath.Join(c.dir, m.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{
		"--name=" + m.name, "--data-dir=" + filepath.Join(c.dir, m.name),
		"--listen-client-urls=" + m.client, "--advertise-client-urls=" + m.client,
		"--listen-peer-urls=" + m.peer, "--initial-advertise-peer-urls=" + m.peer,
		"--cert-file=" + c.Cert, "--key-file=" + c.Key, "--trusted-ca-file=" + c.CA, "--client-cert-auth",
		// A loaded test machine: slower heartbeats than the default keep the leader steady;
		// no fsync (the data dies with the test).
		"--heartbeat-interval=200", "--election-timeout=2000", "--unsafe-no-fsync",
		"--log-level=warn",
	}, initial...)
	m.cmd = exec.Command(c.bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("starting etcd %s: %v", m.name, err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(m.cmd, m.done)
}

// Stop kills member i (SIGKILL: as a crash) and waits for it to exit.
func (c *EtcdCluster) Stop(i int) {
	m := c.members[i]
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// Restart starts a stopped member i again, on its data.
func (c *EtcdCluster) Restart(i int) {
	c.start(i)
}

// WaitHealthy waits until member i says it is healthy (it has a leader and serves), or
// fails the test after a minute, showing the member's log.
func (c *EtcdCluster) WaitHealthy(i int) {
	c.t.Helper()
	m := c.members[i]
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := c.client.Get(m.client + "/health")
		if err == nil {
			ok := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if ok {
				return
			}
		}
		select {
		case <-m.done:
			c.t.Fatalf("etcd %s exited:\n%s", m.name, c.log(m))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd %s not healthy after a minute (%v):\n%s", m.name, err, c.log(m))
		}
	}
}

func (c *EtcdCluster) log(m *etcdMember) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, m.name+".log"))
	return string(b)
}
