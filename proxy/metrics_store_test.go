package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStoreMetrics: the ledger store's observer counts etcd's requests by method and gRPC
// code (a context's deadline as DeadlineExceeded, an error that is not gRPC's as Unknown) and
// its lost leases. (proxy/tenancy's store tests drive a real etcd store's observer.)
func TestStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newStoreMetrics(reg)
	s.StoreRequest("Txn", 3*time.Millisecond, nil)
	s.StoreRequest("Txn", 2*time.Second, status.Error(codes.Unavailable, "etcdserver: no leader"))
	s.StoreRequest("Range", time.Second, context.DeadlineExceeded)
	s.StoreRequest("LeaseGrant", time.Millisecond, errors.New("dial failed"))
	s.LeaseLost()
	want := `
# HELP csigw_ledger_etcd_leases_lost_total Leases of this replica that etcd let expire or revoked while it was using them: its quota holds and operation locks went with them (it takes a new lease at its next call).
# TYPE csigw_ledger_etcd_leases_lost_total counter
csigw_ledger_etcd_leases_lost_total 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "csigw_ledger_etcd_leases_lost_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	const requests = "csigw_ledger_etcd_request_seconds"
	if n := seriesCount(fams, requests); n != 4 {
		t.Errorf("%s has %d series, want 4", requests, n)
	}
	for _, code := range [][2]string{{"Txn", "OK"}, {"Txn", "Unavailable"}, {"Range", "DeadlineExceeded"}, {"LeaseGrant", "Unknown"}} {
		labels := map[string]string{"method": code[0], "grpc_status_code": code[1]}
		if n := series(fams, requests, labels).GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s%v counted %d requests, want 1", requests, labels, n)
		}
	}
}
