package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lockMetrics instrument the store's locks of operations across replicas
// (lockAcrossReplicas); they are registered with the tenancy metrics (WatchTenancy), the only
// gateways that take such locks.
type lockMetrics struct {
	waits   *prometheus.HistogramVec // csigw_replica_lock_wait_seconds
	aborted *prometheus.CounterVec   // csigw_replica_aborted_total
}

func newLockMetrics(reg prometheus.Registerer) *lockMetrics {
	l := &lockMetrics{
		waits:   histogramVec("csigw_replica_lock_wait_seconds", "Time an operation waited for the identical operation in flight on another replica (or in the process before a restart) to end.", backendRequestBuckets, "method_name"),
		aborted: counterVec("csigw_replica_aborted_total", "Calls answered ABORTED because another replica (or the process before a restart) had an operation in flight on the same object.", "method_name"),
	}
	reg.MustRegister(l.waits, l.aborted)
	return l
}

// observeLockWait records an operation's wait for another replica's lock.
func (m *Metrics) observeLockWait(fullMethod string, d time.Duration) {
	if m != nil && m.locks != nil {
		m.locks.waits.WithLabelValues(m.methodLabel(fullMethod)).Observe(d.Seconds())
	}
}

// countAbortedElsewhere counts a call refused because of another replica's operation.
func (m *Metrics) countAbortedElsewhere(fullMethod string) {
	if m != nil && m.locks != nil {
		m.locks.aborted.WithLabelValues(m.methodLabel(fullMethod)).Inc()
	}
}
