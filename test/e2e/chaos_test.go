package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// chaosTotal is the calls each chaos test's load makes at least, before the retries.
const chaosTotal = 1000

// TestChaosReplicasUnderLoad: 3 central replicas from the real binary on a real 3-member etcd,
// 2 tenants with quotas, a backend whose creates make two objects of two concurrent identical
// calls, and 16 workers making at least 1,000 CreateVolume / DeleteVolume / CreateSnapshot
// calls on names that collide, each to a replica picked at random. During the run a replica
// is killed (SIGKILL) and restarted at once three times, and an etcd member once. Then every
// name is retried until it gets a definitive answer. The backend must never have held two
// objects of one name nor more of a tenant's volumes than its quota; the ledger and the
// backend must agree; a tenant sees and reaches nothing of the other's.
func TestChaosReplicasUnderLoad(t *testing.T) {
	start := time.Now()
	r := startChaosRig(t)
	l := newChaosLoad(r, 5*time.Second)
	l.setUp(t)
	l.run(chaosTotal, []chaosEvent{
		{at: 150, do: func() { r.killReplica(t, 0) }},
		{at: 350, do: func() { r.killReplica(t, 1) }},
		{at: 550, do: func() { r.restartEtcdMember(2) }},
		{at: 700, do: func() { r.killReplica(t, 2) }},
	})
	counts := l.counts()
	calls := len(l.calls)
	l.logDeadlines(t)
	slowest := l.checkAnswers(t, "")
	t.Logf("slowest answer %s (deadline %s)", slowest.Round(time.Millisecond), l.deadline)
	retries := l.retryAll(t)
	r.report(t, "chaos", l, calls, counts, retries, start)
}

// TestChaosEtcdQuorumLostUnderLoad: the same rig and load; meanwhile etcd loses 2 of its 3
// members for 20 s. Every call is answered within its deadline, OK (or another definitive
// answer) or UNAVAILABLE naming etcd; every replica's /readyz is 503 while the quorum is
// lost and 200 after; the retries then leave the ledger and the backend in agreement.
func TestChaosEtcdQuorumLostUnderLoad(t *testing.T) {
	start := time.Now()
	r := startChaosRig(t)
	l := newChaosLoad(r, 8*time.Second)
	l.setUp(t)
	var lost, back time.Time
	l.run(chaosTotal, []chaosEvent{{at: 200, do: func() {
		r.cluster.Stop(1)
		r.cluster.Stop(2)
		lost = time.Now()
		for _, addr := range r.addrs {
			waitHTTP(t, r.sc.central, "http://"+r.adminOf(addr)+"/readyz", http.StatusServiceUnavailable, "", 15*time.Second)
		}
		time.Sleep(time.Until(lost.Add(20 * time.Second)))
		r.cluster.Restart(1)
		r.cluster.Restart(2)
		r.cluster.WaitHealthy(1)
		r.cluster.WaitHealthy(2)
		back = time.Now()
		for _, addr := range r.addrs {
			waitHTTP(t, r.sc.central, "http://"+r.adminOf(addr)+"/readyz", http.StatusOK, "ready", 60*time.Second)
		}
	}}})
	counts := l.counts()
	calls := len(l.calls)
	l.logDeadlines(t)
	slowest := l.checkAnswers(t, "etcd")
	t.Logf("quorum lost for %s; slowest answer %s (deadline %s)", back.Sub(lost).Round(time.Millisecond), slowest.Round(time.Millisecond), l.deadline)
	retries := l.retryAll(t)
	r.report(t, "quorum lost", l, calls, counts, retries, start)
}

// checkAnswers fails the test on a call answered past its deadline, on one answered
// DEADLINE_EXCEEDED, and on one answered neither definitively, nor UNAVAILABLE (naming
// unavailableNames, when set), nor ABORTED for an operation in progress on the same object
// (an identical call another replica runs, which the call could not outwait within half of
// its time: the orchestrator retries it); it returns the slowest answer.
//
// DEADLINE_EXCEEDED is never right here: the gateway's own steps (lock waits, requests to
// etcd) end before the caller's deadline, answering ABORTED or UNAVAILABLE, and the driver's
// creates take 30 ms, so no backend call runs out of the time a call keeps for it.
func (l *chaosLoad) checkAnswers(t *testing.T, unavailableNames string) (slowest time.Duration) {
	t.Helper()
	const slack = 2 * time.Second
	for _, c := range l.calls {
		slowest = max(slowest, c.took)
		switch {
		case c.took > c.limit+slack:
			t.Errorf("%s answered %v after %s, past its deadline %s (+%s)", c.method, c.code, c.took, c.limit, slack)
		case c.code == codes.DeadlineExceeded:
			t.Errorf("%s answered DEADLINE_EXCEEDED after %s: %q", c.method, c.took.Round(time.Millisecond), c.message)
		case c.code == codes.Unavailable && !strings.Contains(c.message, unavailableNames):
			t.Errorf("%s UNAVAILABLE without naming %s: %q", c.method, unavailableNames, c.message)
		case c.code == codes.Aborted && !strings.Contains(c.message, "in progress"):
			t.Errorf("%s ABORTED without naming the operation in progress: %q", c.method, c.message)
		case c.code != codes.Unavailable && c.code != codes.Aborted && !definitive(c.code):
			t.Errorf("%s answered %v %q; want a definitive answer, UNAVAILABLE or ABORTED", c.method, c.code, c.message)
		}
	}
	return slowest
}

// logDeadlines logs the distinct messages of the calls answered DEADLINE_EXCEEDED or
// UNAVAILABLE.
func (l *chaosLoad) logDeadlines(t *testing.T) {
	seen := map[string]int{}
	for _, c := range l.calls {
		if c.code == codes.DeadlineExceeded || c.code == codes.Unavailable {
			seen[c.code.String()+" "+c.method+": "+c.message+" after "+c.took.Round(time.Second).String()]++
		}
	}
	for m, n := range seen {
		t.Logf("%d× %s", n, m)
	}
}

// adminOf is replica addr's admin listener.
func (r *chaosRig) adminOf(addr string) string {
	if a := r.sc.adminOf[addr]; a != "" {
		return a
	}
	return r.sc.admin
}

// report logs the run's figures and fails the test on a duplicate, an overshoot, a
// disagreement between the ledger and the backend, or a tenant reaching the other's objects.
func (r *chaosRig) report(t *testing.T, name string, l *chaosLoad, calls int, counts map[codes.Code]int, retries int64, start time.Time) {
	t.Helper()
	unrecorded, phantom := r.agreement(t)
	visibility := r.visibilityViolations(t)
	over := r.driver.overshoot()
	concurrent := r.driver.concurrentCreates()
	outlive, killedCalls := r.checkKilledLocks(t, l.deadline)
	r.driver.mu.Lock()
	duplicates := r.driver.duplicates
	r.driver.mu.Unlock()
	t.Logf("%s: calls %d, acknowledged %d (OK %d, RESOURCE_EXHAUSTED %d, NOT_FOUND %d, ALREADY_EXISTS %d), UNAVAILABLE %d, ABORTED %d, DEADLINE_EXCEEDED %d, other %d; retries after the run %d",
		name, calls, counts[codes.OK]+counts[codes.ResourceExhausted]+counts[codes.NotFound]+counts[codes.AlreadyExists],
		counts[codes.OK], counts[codes.ResourceExhausted], counts[codes.NotFound], counts[codes.AlreadyExists],
		counts[codes.Unavailable], counts[codes.Aborted], counts[codes.DeadlineExceeded],
		calls-counts[codes.OK]-counts[codes.ResourceExhausted]-counts[codes.NotFound]-counts[codes.AlreadyExists]-counts[codes.Unavailable]-counts[codes.Aborted]-counts[codes.DeadlineExceeded],
		retries)
	t.Logf("%s: duplicates %d, identical creates in flight together at the backend %d, backend objects missing from the ledger %d, ledger entries missing from the backend %d, quota overshoot %v, cross-tenant visibility %d, replicas killed %d, longest lock outlive %s (%d killed calls), run time %s",
		name, duplicates, concurrent, len(unrecorded), len(phantom), over, visibility, len(r.kills), outlive.Round(time.Millisecond), killedCalls, time.Since(start).Round(time.Second))
	if duplicates != 0 || concurrent != 0 {
		t.Errorf("the backend made %d duplicates; it had %d pairs of identical creates in flight together", duplicates, concurrent)
	}
	if len(unrecorded) != 0 || len(phantom) != 0 {
		t.Errorf("after the retries, the backend holds objects the ledger does not record: %v; the ledger records objects the backend does not hold: %v", unrecorded, phantom)
	}
	for tenant, n := range over {
		if n != 0 {
			t.Errorf("the backend held %d volumes of %s over its quota of %d", n, tenant, chaosQuota)
		}
	}
}
