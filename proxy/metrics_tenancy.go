package proxy

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// tenancyCollector reports each tenant's volumes and bytes against its quotas, read from
// the ledger at scrape time (a ledger that cannot be read fails the tenants' gauges, not the
// scrape).
type tenancyCollector struct{ ledger *tenancy.Ledger }

var (
	tenantVolumesDesc = prometheus.NewDesc("csigw_tenant_volumes",
		"Volumes a tenant holds (creates in flight included).", []string{"tenant"}, nil)
	tenantBytesDesc = prometheus.NewDesc("csigw_tenant_bytes",
		"Total capacity of a tenant's volumes (creates and expansions in flight included).", []string{"tenant"}, nil)
	tenantMaxVolumesDesc = prometheus.NewDesc("csigw_tenant_quota_volumes",
		"A tenant's maxVolumes quota; absent when unlimited.", []string{"tenant"}, nil)
	tenantMaxBytesDesc = prometheus.NewDesc("csigw_tenant_quota_bytes",
		"A tenant's maxBytes quota; absent when unlimited.", []string{"tenant"}, nil)
)

// WatchTenancy adds the tenants' usage and quotas in ledger to the metrics, and the
// operation locks the ledger's store takes across replicas (metrics_locks.go). Call it before
// the server serves.
func (m *Metrics) WatchTenancy(ledger *tenancy.Ledger) {
	if m != nil && ledger != nil {
		m.registry.MustRegister(tenancyCollector{ledger: ledger})
		m.locks = newLockMetrics(m.registry)
	}
}

func (c tenancyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantVolumesDesc
	ch <- tenantBytesDesc
	ch <- tenantMaxVolumesDesc
	ch <- tenantMaxBytesDesc
}

func (c tenancyCollector) Collect(ch chan<- prometheus.Metric) {
	usage, err := c.ledger.Usage(context.Background()) // bounded by the store's request timeout
	if err != nil {
		ch <- prometheus.NewInvalidMetric(tenantVolumesDesc, err)
		return
	}
	for tenant, u := range usage {
		ch <- prometheus.MustNewConstMetric(tenantVolumesDesc, prometheus.GaugeValue, float64(u.Volumes), tenant)
		ch <- prometheus.MustNewConstMetric(tenantBytesDesc, prometheus.GaugeValue, float64(u.Bytes), tenant)
		if u.Quota.MaxVolumes > 0 {
			ch <- prometheus.MustNewConstMetric(tenantMaxVolumesDesc, prometheus.GaugeValue, float64(u.Quota.MaxVolumes), tenant)
		}
		if u.Quota.MaxBytes > 0 {
			ch <- prometheus.MustNewConstMetric(tenantMaxBytesDesc, prometheus.GaugeValue, float64(u.Quota.MaxBytes), tenant)
		}
	}
}
