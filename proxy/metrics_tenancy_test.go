package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

func TestTenancyMetrics(t *testing.T) {
	ledger, err := tenancy.Open(filepath.Join(t.TempDir(), "tenancy.db"), map[string]tenancy.Quota{
		"blue": {MaxVolumes: 10, MaxBytes: 1 << 30}, "green": {},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	for _, v := range []struct{ id, tenant string }{{"vol-1", "blue"}, {"vol-2", "blue"}, {"vol-3", "green"}} {
		if err := ledger.Record(t.Context(), tenancy.Volume, v.id, tenancy.Record{Tenant: v.tenant, Bytes: 64 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	NewMetrics("", reg).WatchTenancy(ledger)
	want := `
# HELP csigw_tenant_bytes Total capacity of a tenant's volumes (creates and expansions in flight included).
# TYPE csigw_tenant_bytes gauge
csigw_tenant_bytes{tenant="blue"} 1.34217728e+08
csigw_tenant_bytes{tenant="green"} 6.7108864e+07
# HELP csigw_tenant_quota_bytes A tenant's maxBytes quota; absent when unlimited.
# TYPE csigw_tenant_quota_bytes gauge
csigw_tenant_quota_bytes{tenant="blue"} 1.073741824e+09
# HELP csigw_tenant_quota_volumes A tenant's maxVolumes quota; absent when unlimited.
# TYPE csigw_tenant_quota_volumes gauge
csigw_tenant_quota_volumes{tenant="blue"} 10
# HELP csigw_tenant_volumes Volumes a tenant holds (creates in flight included).
# TYPE csigw_tenant_volumes gauge
csigw_tenant_volumes{tenant="blue"} 2
csigw_tenant_volumes{tenant="green"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want),
		"csigw_tenant_volumes", "csigw_tenant_bytes", "csigw_tenant_quota_volumes", "csigw_tenant_quota_bytes"); err != nil {
		t.Error(err)
	}
}

// TestTenancyMetricsWithoutEtcd: while the ledger's etcd cannot be reached, a scrape still
// answers (within the store's request timeout) with every other metric; the tenants' gauges
// are missing rather than wrong.
func TestTenancyMetricsWithoutEtcd(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := l.Addr().String()
	l.Close() // nothing listens there now
	store, err := tenancy.OpenEtcd(tenancy.EtcdConfig{Endpoints: []string{nobody}, RequestTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := tenancy.New(store, map[string]tenancy.Quota{"blue": {MaxVolumes: 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	reg := prometheus.NewRegistry()
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "other_gauge", Help: "Another metric."})
	other.Set(7)
	reg.MustRegister(other)
	m := NewMetrics("", reg)
	m.WatchTenancy(ledger)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "other_gauge 7") {
		t.Errorf("scrape without etcd: %d\n%s", rec.Code, body)
	}
	if strings.Contains(body, "csigw_tenant_") {
		t.Errorf("tenants' gauges without etcd:\n%s", body)
	}
}
