package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// storeMetrics instrument the tenancy ledger's store, as its tenancy.StoreObserver: etcd's
// request latency and the replica's lost leases (a bbolt store reports nothing). They are
// registered with the tenancy metrics (WatchTenancy).
type storeMetrics struct {
	requests   *prometheus.HistogramVec // csigw_ledger_etcd_request_seconds
	leasesLost prometheus.Counter       // csigw_ledger_etcd_leases_lost_total
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	s := &storeMetrics{
		requests: histogramVec("csigw_ledger_etcd_request_seconds", "Time each request of the tenancy ledger to etcd took (each attempt), by etcd method (Txn, Range, LeaseGrant, …) and gRPC status code.", backendRequestBuckets, "method", "grpc_status_code"),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "csigw_ledger_etcd_leases_lost_total",
			Help: "Leases of this replica that etcd let expire or revoked while it was using them: its quota holds and operation locks went with them (it takes a new lease at its next call).",
		}),
	}
	reg.MustRegister(s.requests, s.leasesLost)
	return s
}

// StoreRequest records one request to etcd.
func (s *storeMetrics) StoreRequest(method string, took time.Duration, err error) {
	code := status.Code(err)
	if code == codes.Unknown { // a context's error (the request timeout) not yet made gRPC's
		code = status.FromContextError(err).Code()
	}
	s.requests.WithLabelValues(method, code.String()).Observe(took.Seconds())
}

// LeaseLost counts a lost lease.
func (s *storeMetrics) LeaseLost() { s.leasesLost.Inc() }
