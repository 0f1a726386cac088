package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/csi-gateway/csi-gateway/backends"
)

// guardCollector reports the backends' circuit breakers and retry budgets, read at scrape
// time from the backends that have them (backends.BreakerReporter, backends.BudgetReporter).
type guardCollector struct {
	backends map[string]backends.Backend
}

var (
	circuitStateDesc = prometheus.NewDesc("csigw_backend_circuit_state",
		"State of a backend's circuit breaker: 0 closed, 1 open, 2 half-open. target is the URL's scheme://host for REST backends, empty for a whole backend.",
		[]string{"backend", "target"}, nil)
	circuitRejectedDesc = prometheus.NewDesc("csigw_backend_circuit_rejected_total",
		"Calls a backend's open circuit failed fast, without sending them.",
		[]string{"backend", "target"}, nil)
	budgetRefusedDesc = prometheus.NewDesc("csigw_backend_retry_budget_refused_total",
		"Retries a backend's retry budget refused.",
		[]string{"backend"}, nil)
)

// WatchBackends adds the circuit breakers and retry budgets of bes to the metrics.
func (m *Metrics) WatchBackends(bes map[string]backends.Backend) {
	if m != nil {
		m.registry.MustRegister(guardCollector{backends: bes})
	}
}

func (c guardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- circuitStateDesc
	ch <- circuitRejectedDesc
	ch <- budgetRefusedDesc
}

func (c guardCollector) Collect(ch chan<- prometheus.Metric) {
	for name, b := range c.backends {
		if r, ok := b.(backends.BreakerReporter); ok {
			for _, br := range r.Breakers() {
				if br == nil {
					continue
				}
				ch <- prometheus.MustNewConstMetric(circuitStateDesc, prometheus.GaugeValue, circuitStateValue(br.State()), name, br.Target())
				ch <- prometheus.MustNewConstMetric(circuitRejectedDesc, prometheus.CounterValue, float64(br.Rejected()), name, br.Target())
			}
		}
		if r, ok := b.(backends.BudgetReporter); ok && r.RetryBudget() != nil {
			ch <- prometheus.MustNewConstMetric(budgetRefusedDesc, prometheus.CounterValue, float64(r.RetryBudget().Refused()), name)
		}
	}
}

func circuitStateValue(s backends.BreakerState) float64 {
	switch s {
	case backends.BreakerOpen:
		return 1
	case backends.BreakerHalfOpen:
		return 2
	}
	return 0
}
