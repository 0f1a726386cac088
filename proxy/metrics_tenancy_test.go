package proxy

import (
	"path/filepath"
	"strings"
	"testing"

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
