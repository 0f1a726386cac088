package proxy

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends"
)

// guardedBackend is a backend with a circuit breaker and a retry budget to report.
type guardedBackend struct {
	breaker *backends.Breaker
	budget  *backends.RetryBudget
}

func (guardedBackend) Unary(context.Context, string, []byte) ([]byte, error) { return nil, nil }
func (guardedBackend) Stream(context.Context, string, grpc.ServerStream) error {
	return nil
}
func (guardedBackend) Ready(context.Context) error          { return nil }
func (guardedBackend) Close() error                         { return nil }
func (g guardedBackend) Breakers() []*backends.Breaker      { return []*backends.Breaker{g.breaker} }
func (g guardedBackend) RetryBudget() *backends.RetryBudget { return g.budget }

func TestMetricsWatchBackends(t *testing.T) {
	br := backends.NewBreaker("array1", "https://a.example", backends.BreakerConfig{Failures: 1})
	p, err := br.Admit()
	if err != nil {
		t.Fatal(err)
	}
	p.Failed() // one transient failure opens it
	if _, err := br.Admit(); err == nil {
		t.Fatal("the breaker should be open and refuse")
	}
	m := NewMetrics("drv", nil)
	m.WatchBackends(map[string]backends.Backend{"array1": guardedBackend{breaker: br, budget: backends.NewRetryBudget(0.2, 3, 0)}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`csigw_backend_circuit_state{backend="array1",target="https://a.example"} 1`,
		`csigw_backend_circuit_rejected_total{backend="array1",target="https://a.example"} 1`,
		`csigw_backend_retry_budget_refused_total{backend="array1"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
