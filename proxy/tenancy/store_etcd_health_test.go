package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestEtcdHealthStates: a request that ran out of a whole request timeout marks etcd down;
// then one request at a time goes as the probe and the others are refused at once; a probe
// that fails keeps it down, the first answer clears it. An end that says nothing of the
// quorum (the caller's own, a shortened request's timeout, a member unreachable) changes
// nothing.
func TestEtcdHealthStates(t *testing.T) {
	var h etcdHealth
	timedOut := context.DeadlineExceeded
	step := func(name string, wantProbe, wantRefused bool) bool {
		t.Helper()
		probe, err := h.admit()
		if probe != wantProbe || (err != nil) != wantRefused {
			t.Errorf("%s: admit = probe %v, %v; want probe %v, refused %v", name, probe, err, wantProbe, wantRefused)
		}
		return probe
	}
	h.done(step("up", false, false), timedOut, false) // a shortened request's timeout
	h.done(step("still up", false, false), status.Error(codes.Canceled, "gone"), true)
	h.done(step("still up", false, false), status.Error(codes.Unavailable, "connection refused"), true) // one member
	h.done(step("still up", false, false), timedOut, true)
	probe := step("down: the probe", true, false)
	step("down, probe in flight", false, true)
	h.done(probe, timedOut, true)
	probe = step("down: the next probe", true, false)
	h.done(probe, timedOut, false) // its caller ended: says nothing
	probe = step("down: still", true, false)
	h.done(probe, status.Error(codes.Unavailable, "connection refused"), true) // nor does one member
	probe = step("down: a probe again", true, false)
	h.done(probe, nil, true)
	step("back up", false, false)
	if _, err := (&etcdHealth{down: timedOut, probing: true}).admit(); err == nil || !errors.Is(err, timedOut) {
		t.Errorf("a refusal while down: %v; want it to wrap what showed etcd down", err)
	}
}

// TestEtcdKnownDownFailsAtOnce: once a request found etcd without quorum (it did not answer
// within the request timeout), the store's next steps fail at once, naming etcd, without a
// request to etcd, while one request (the probe) checks whether it is back; once etcd has
// its quorum again, the first answer clears it and the steps work.
func TestEtcdKnownDownFailsAtOnce(t *testing.T) {
	cluster := testutil.StartEtcd(t, 3)
	l := openEtcdLedger(t, cluster, "/down/", nil, func(c *EtcdConfig) { c.RequestTimeout = 5 * time.Second })
	var seen observed
	l.Observe(&seen)
	ctx := t.Context()
	if err := l.Record(ctx, Volume, "vol-1", Record{Tenant: "blue", Name: "blue.pvc-1"}); err != nil {
		t.Fatal(err)
	}
	cluster.Stop(1)
	cluster.Stop(2)
	if _, _, err := l.Lookup(ctx, Volume, "vol-1"); err == nil {
		t.Fatal("Lookup without quorum succeeded")
	}
	s := l.store.(*etcdStore)
	probing := func() bool { s.health.mu.Lock(); defer s.health.mu.Unlock(); return s.health.probing }
	probe := make(chan error, 1)
	go func() { _, _, err := l.Lookup(ctx, Volume, "vol-1"); probe <- err }()
	for !probing() {
		time.Sleep(time.Millisecond)
	}
	sent := func() (n int) {
		requests, _ := seen.counts()
		for _, c := range requests {
			n += c
		}
		return n
	}
	before := sent()
	steps := map[string]func() error{
		"Lookup": func() error { _, _, err := l.Lookup(ctx, Volume, "vol-1"); return err },
		"ByName": func() error { _, _, err := l.ByName(ctx, Volume, "blue.pvc-1"); return err },
		"Record": func() error { return l.Record(ctx, Volume, "vol-2", Record{Tenant: "blue"}) },
		"LockOperation": func() error {
			_, _, err := l.LockOperation(ctx, lockOf("blue/volume:vol-1", "DeleteVolume", "", time.Now().Add(time.Minute)))
			return err
		},
	}
	for name, step := range steps {
		err := step()
		if !probing() {
			t.Fatalf("the probe ended before %s was tried (a loaded machine?)", name)
		}
		if err == nil || !strings.Contains(err.Error(), "failed at once") || !strings.Contains(err.Error(), "etcd at "+cluster.Endpoints()[0]) {
			t.Errorf("%s while etcd is known down: %v; want it to fail at once, naming etcd", name, err)
		}
	}
	if n := sent() - before; n != 0 {
		t.Errorf("the steps refused at once sent %d requests to etcd; want none", n)
	}
	if err := <-probe; err == nil {
		t.Error("the probe without quorum succeeded")
	}

	cluster.Restart(1)
	cluster.WaitHealthy(1)
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, _, err := l.Lookup(ctx, Volume, "vol-1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with quorum back, Lookup still fails after 30 s: %v", err)
		}
	}
	if id, ok, err := l.ByName(ctx, Volume, "blue.pvc-1"); err != nil || !ok || id != "vol-1" {
		t.Errorf("with quorum back ByName = %q, %v, %v", id, ok, err)
	}
}
