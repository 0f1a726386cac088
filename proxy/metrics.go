package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/backends"
)

// The gateway's per-call histogram, csigw_operations_seconds, has the labels and buckets of
// the one the Kubernetes CSI sidecars record through csi-lib-utils' metrics package
// (csi_sidecar_operations_seconds: driver_name, method_name (the full gRPC method),
// grpc_status_code (codes.Code.String())) under a name of its own: a sidecar and a
// csi-lib-utils driver in the same pod export theirs, and a dashboard summing by method would
// count every call twice. docs/operations.md shows how to read it with the sidecars'
// dashboards (a recording rule).
var sidecarOperationsBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// backendRequestBuckets are the sidecar buckets with a finer low end: most backend calls
// (Probe, capabilities, a local appliance) answer in milliseconds.
var backendRequestBuckets = append([]float64{.005, .01, .025, .05}, sidecarOperationsBuckets...)

const (
	// unknownDriverName is csi-lib-utils' driver_name when none is set.
	unknownDriverName = "unknown-driver"
	// otherMethod is the method_name of every method the gateway does not know, so a
	// caller inventing method names cannot grow the label set.
	otherMethod = "other"
)

// Metrics is the gateway's Prometheus instrumentation. It counts the calls in flight and
// records every finished call (Measure, a middleware), and holds the gauges other parts of
// the gateway set: backend readiness (set by Readiness) and TLS certificate expiry
// (SetCertificateExpiry); WatchBackends adds the backends' circuit breakers and retry budgets.
//
// Labels are bounded: method_name is a method the gateway knows or "other", status codes are
// the 17 gRPC codes, backend is a configured backend name; no volume, snapshot or node ID and
// no caller ever becomes a label. All methods are safe for concurrent use, and none blocks.
type Metrics struct {
	driverName string   // the configured driver_name, "" when it is learnt
	learnt     sync.Map // backend name → driver name its GetPluginInfo answered
	known      methodTable
	registry   prometheus.Registerer
	gatherer   prometheus.Gatherer

	operations      *prometheus.HistogramVec // csigw_operations_seconds
	repairs         *prometheus.CounterVec   // csigw_repairs_total
	backendRequests *prometheus.CounterVec   // csigw_backend_requests_total
	backendSeconds  *prometheus.HistogramVec // csigw_backend_request_seconds
	attempts        *prometheus.CounterVec   // csigw_backend_attempts_total
	retries         *prometheus.CounterVec   // csigw_backend_retries_total
	inFlight        prometheus.Gauge         // csigw_calls_in_flight
	certExpiry      *prometheus.GaugeVec     // csigw_tls_certificate_expiry_timestamp_seconds
	backendReady    *prometheus.GaugeVec     // csigw_backend_ready
	locks           *lockMetrics             // set by WatchTenancy
}

// NewMetrics registers the gateway's metrics, and the Go runtime and process collectors, with
// reg; a nil reg gets a fresh registry. driverName is the driver_name label of
// csigw_operations_seconds; when empty, each backend's label is the name its driver last
// answered GetPluginInfo with ("unknown-driver" until then, as in csi-lib-utils). The Go
// runtime and process metrics carry the prefix csigw_ too (csigw_go_goroutines, ...), so no
// series of the gateway's has the name of one a sidecar or driver in the same pod exports.
//
// Pass a fresh prometheus.NewRegistry() (the gateway keeps no global state): NewMetrics
// panics if reg already holds a metric of the same name, which is a programming error. Handler
// serves reg only when reg is also a prometheus.Gatherer, as a *prometheus.Registry is.
func NewMetrics(driverName string, reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		driverName:      driverName,
		registry:        reg,
		known:           newMethodTable(),
		operations:      histogramVec("csigw_operations_seconds", "Container Storage Interface operation duration with gRPC error code status total, as the gateway answered them (csi_sidecar_operations_seconds' labels and buckets).", sidecarOperationsBuckets, "driver_name", "method_name", "grpc_status_code"),
		repairs:         counterVec("csigw_repairs_total", "Changes the gateway made to a backend's answer, by kind (code, message, message-cut, details, secret, answer).", "backend", "method_name", "kind"),
		backendRequests: counterVec("csigw_backend_requests_total", "Calls the gateway routed to a backend, by the gRPC code the caller got.", "backend", "method_name", "grpc_status_code"),
		backendSeconds:  histogramVec("csigw_backend_request_seconds", "Duration of the calls the gateway routed to a backend, retries included, from receipt to answer.", backendRequestBuckets, "backend", "method_name"),
		attempts:        counterVec("csigw_backend_attempts_total", "Requests sent to a backend, every retry included.", "backend"),
		retries:         counterVec("csigw_backend_retries_total", "Requests sent to a backend beyond the first of each call.", "backend"),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "csigw_calls_in_flight",
			Help: "CSI calls the gateway has received and not yet answered.",
		}),
		certExpiry:   gaugeVec("csigw_tls_certificate_expiry_timestamp_seconds", "When each TLS certificate the gateway uses expires (NotAfter), in seconds since the Unix epoch.", "name"),
		backendReady: gaugeVec("csigw_backend_ready", "1 when the backend answered its last readiness check, 0 when it did not.", "backend"),
	}
	reg.MustRegister(
		m.operations, m.repairs, m.backendRequests, m.backendSeconds, m.attempts, m.retries,
		m.inFlight, m.certExpiry, m.backendReady,
	)
	prometheus.WrapRegistererWithPrefix("csigw_", reg).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	return m
}

// histogramVec, counterVec and gaugeVec define a metric with labels: its name, its help and,
// for a histogram, its buckets.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// outcome is what Metrics records of a finished call. It holds nothing that identifies the
// call or its caller (no ID, no name, no identity), so no such value can ever become a label.
type outcome struct {
	fullMethod string
	code       codes.Code // the code the caller got
	duration   time.Duration
	backend    string // "" when no backend saw the call (refused, unroutable)
	attempts   int    // requests sent to the backend, retries included
	repairs    []string
}

// record records one finished call. It never blocks: it only updates counters.
func (m *Metrics) record(o outcome) {
	method := m.methodLabel(o.fullMethod)
	code := codeLabel(o.code)
	seconds := o.duration.Seconds()
	m.operations.WithLabelValues(m.driverNameOf(o.backend), method, code).Observe(seconds)
	if o.backend == "" {
		return // refused or unroutable: no backend saw the call
	}
	for _, kind := range o.repairs {
		m.repairs.WithLabelValues(o.backend, method, kind).Inc()
	}
	m.backendRequests.WithLabelValues(o.backend, method, code).Inc()
	m.backendSeconds.WithLabelValues(o.backend, method).Observe(seconds)
	m.attempts.WithLabelValues(o.backend).Add(float64(o.attempts))
	retries := m.retries.WithLabelValues(o.backend) // created at 0 on the first call
	if o.attempts > 1 {
		retries.Add(float64(o.attempts - 1))
	}
}

// Measure returns the middleware that counts the calls in flight (csigw_calls_in_flight) and
// records every call when it ends, with the code its caller gets (it sits outside
// canonicalize). On a nil *Metrics it passes calls through untouched, so the chain needs no
// condition.
func (m *Metrics) Measure() Middleware {
	return func(next Handler) Handler {
		if m == nil {
			return next
		}
		return func(ctx context.Context, call *Call) error {
			m.inFlight.Inc()
			defer m.inFlight.Dec()
			err := next(ctx, call)
			if err == nil && call.Method == getPluginInfoMethod && call.Backend != "" {
				m.learnDriverName(call)
			}
			var repairs []string
			if call.repaired != nil {
				repairs = call.repaired.kinds
			}
			m.record(outcome{
				fullMethod: call.Method, code: status.Code(err), duration: time.Since(call.Start),
				backend: call.Backend, attempts: backends.CallInfoFrom(ctx).Attempts(), repairs: repairs,
			})
			return err
		}
	}
}

// getPluginInfoMethod is the call whose answer names the driver.
const getPluginInfoMethod = "/csi.v1.Identity/GetPluginInfo"

// learnDriverName keeps the name a backend's GetPluginInfo answer gives, for driver_name.
func (m *Metrics) learnDriverName(call *Call) {
	resp, err := call.DecodedResponse()
	if err != nil || resp == nil {
		return
	}
	fd := resp.ProtoReflect().Descriptor().Fields().ByName("name")
	if fd == nil {
		return
	}
	if name := resp.ProtoReflect().Get(fd).String(); name != "" {
		m.learnt.Store(call.Backend, name)
	}
}

// driverNameOf is the driver_name of a call routed to backend: the configured name, else the
// name the backend's driver gave, else "unknown-driver".
func (m *Metrics) driverNameOf(backend string) string {
	if m.driverName != "" {
		return m.driverName
	}
	if name, ok := m.learnt.Load(backend); ok {
		return name.(string)
	}
	return unknownDriverName
}

// SetCertificateExpiry records when the TLS certificate known as name (a listener or backend
// name, never a subject or serial) stops being valid. It is the seam for TLS loading: call it
// on every (re)load with the leaf certificate's NotAfter; the last value wins.
func (m *Metrics) SetCertificateExpiry(name string, notAfter time.Time) {
	m.certExpiry.WithLabelValues(name).Set(float64(notAfter.Unix()))
}

// setBackendReady records a backend's last readiness check.
func (m *Metrics) setBackendReady(backend string, ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	m.backendReady.WithLabelValues(backend).Set(v)
}

// Handler serves the registry in the Prometheus exposition formats. When the registerer given
// to NewMetrics cannot be gathered, it answers 500 and says so.
func (m *Metrics) Handler() http.Handler {
	if m.gatherer == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "metrics: the registry given to NewMetrics cannot be gathered; pass a *prometheus.Registry", http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// methodLabel is the full method name for methods the gateway knows, "other" for the rest.
func (m *Metrics) methodLabel(fullMethod string) string {
	if _, ok := m.known[fullMethod]; ok {
		return fullMethod
	}
	return otherMethod
}

// codeLabel is the code's name as csi-lib-utils writes it ("OK", "NotFound"); a code outside
// the 17 gRPC codes (which the gateway never returns) counts as "Unknown".
func codeLabel(c codes.Code) string {
	if c > codes.Unauthenticated {
		c = codes.Unknown
	}
	return c.String()
}
