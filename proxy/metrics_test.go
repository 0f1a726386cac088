package proxy

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// scrape GETs h over a real HTTP server, as Prometheus does, and parses the text exposition.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: the exposition does not parse: %v", err)
	}
	return fams
}

// labelsOf returns a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// series returns the metric of family name whose labels are exactly labels, or nil.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, m := range fams[name].GetMetric() {
		if maps.Equal(labelsOf(m), labels) {
			return m
		}
	}
	return nil
}

// seriesCount is how many series family name has.
func seriesCount(fams map[string]*dto.MetricFamily, name string) int {
	return len(fams[name].GetMetric())
}

// metricValue is the value of a counter or gauge series, or -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(fams, name, labels)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestMetricsRecord feeds outcomes to Metrics and reads them back from its HTTP handler:
// exact names, labels and counts, unknown methods as "other".
func TestMetricsRecord(t *testing.T) {
	m := NewMetrics("csi.example.com", prometheus.NewRegistry())
	const create = "/csi.v1.Controller/CreateVolume"
	const get = "/csi.v1.Controller/ControllerGetVolume"
	outcomes := []outcome{
		{fullMethod: create, code: codes.OK, duration: 50 * time.Millisecond, backend: "array1", attempts: 1},
		{fullMethod: create, code: codes.OK, duration: 2 * time.Second, backend: "array1", attempts: 3},
		{fullMethod: get, code: codes.NotFound, duration: time.Millisecond, backend: "array2", attempts: 1},
		// Refused before routing: no backend series.
		{fullMethod: create, code: codes.PermissionDenied, duration: time.Millisecond},
		// Methods the gateway does not know are "other", whatever their name.
		{fullMethod: "/example.v1.Storage/Wipe", code: codes.Unimplemented, backend: "array1", attempts: 1},
		{fullMethod: "/example.v1.Storage/Wipe-" + strings.Repeat("x", 10), code: codes.Unimplemented, backend: "array1", attempts: 1},
		{fullMethod: "/csi.v1.Controller/NoSuchMethod", code: codes.Code(99), backend: "array1"},
	}
	for _, o := range outcomes {
		m.record(o)
	}
	fams := scrape(t, m.Handler())

	const ops = "csigw_operations_seconds"
	if typ := fams[ops].GetType(); typ != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is %v, want a histogram", ops, typ)
	}
	sidecar := func(method, code string) map[string]string {
		return map[string]string{"driver_name": "csi.example.com", "method_name": method, "grpc_status_code": code}
	}
	opsWant := []struct {
		labels map[string]string
		count  uint64
		sum    float64
	}{
		{sidecar(create, "OK"), 2, 2.05},
		{sidecar(get, "NotFound"), 1, 0.001},
		{sidecar(create, "PermissionDenied"), 1, 0.001},
		{sidecar("other", "Unimplemented"), 2, 0},
		{sidecar("other", "Unknown"), 1, 0}, // a code outside the 17 counts as Unknown
	}
	if n := seriesCount(fams, ops); n != len(opsWant) {
		t.Errorf("%s has %d series, want %d", ops, n, len(opsWant))
	}
	for _, w := range opsWant {
		s := series(fams, ops, w.labels)
		if s == nil {
			t.Errorf("%s%v: no such series", ops, w.labels)
			continue
		}
		h := s.GetHistogram()
		if h.GetSampleCount() != w.count || h.GetSampleSum() < w.sum-1e-9 || h.GetSampleSum() > w.sum+1e-9 {
			t.Errorf("%s%v: count %d sum %g, want %d and %g", ops, w.labels, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
		}
	}
	// csi-lib-utils' buckets, exactly.
	var bounds []float64
	for _, b := range series(fams, ops, sidecar(create, "OK")).GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if want := []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600, math.Inf(1)}; !slices.Equal(bounds, want) {
		t.Errorf("buckets = %v, want %v", bounds, want)
	}

	backendWant := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"csigw_backend_requests_total", map[string]string{"backend": "array1", "method_name": create, "grpc_status_code": "OK"}, 2},
		{"csigw_backend_requests_total", map[string]string{"backend": "array2", "method_name": get, "grpc_status_code": "NotFound"}, 1},
		{"csigw_backend_requests_total", map[string]string{"backend": "array1", "method_name": "other", "grpc_status_code": "Unimplemented"}, 2},
		{"csigw_backend_requests_total", map[string]string{"backend": "array1", "method_name": "other", "grpc_status_code": "Unknown"}, 1},
		{"csigw_backend_attempts_total", map[string]string{"backend": "array1"}, 6},
		{"csigw_backend_attempts_total", map[string]string{"backend": "array2"}, 1},
		{"csigw_backend_retries_total", map[string]string{"backend": "array1"}, 2},
		{"csigw_backend_retries_total", map[string]string{"backend": "array2"}, 0},
		{"csigw_calls_in_flight", map[string]string{}, 0},
	}
	for _, w := range backendWant {
		if got := metricValue(fams, w.name, w.labels); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	for name, n := range map[string]int{
		"csigw_backend_requests_total": 4, "csigw_backend_attempts_total": 2, "csigw_backend_retries_total": 2,
		"csigw_backend_request_seconds": 3,
	} {
		if got := seriesCount(fams, name); got != n {
			t.Errorf("%s has %d series, want %d", name, got, n)
		}
	}
	s := series(fams, "csigw_backend_request_seconds", map[string]string{"backend": "array1", "method_name": create})
	if s.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("csigw_backend_request_seconds{array1,CreateVolume}: %v, want a count of 2", s)
	}
	// Finer buckets than the sidecar's below 100 ms: the 50 ms call is in le=0.05, not le=0.025.
	if b := s.GetHistogram().GetBucket(); len(b) != 18 || b[0].GetUpperBound() != .005 || b[2].GetUpperBound() != .025 ||
		b[3].GetUpperBound() != .05 || b[2].GetCumulativeCount() != 0 || b[3].GetCumulativeCount() != 1 {
		t.Errorf("csigw_backend_request_seconds buckets = %v, want 5 ms .. 600 s with the 50 ms call first in le=0.05", b)
	}

	// The Go and process collectors share the registry, under the gateway's prefix.
	for _, name := range []string{"csigw_go_goroutines", "csigw_go_memstats_alloc_bytes", "csigw_process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s is missing from the scrape", name)
		}
	}
	// Nothing a sidecar or a csi-lib-utils driver in the same pod exports: their
	// csi_sidecar_* / csi_plugin_* histograms, go_*, process_*, workqueue_*, rest_client_*,
	// leader_election_*: every name of the gateway's has its own prefix.
	for name := range fams {
		if !strings.HasPrefix(name, "csigw_") {
			t.Errorf("%s: a name a sidecar or driver in the same pod may export too", name)
		}
	}

	noPerCallLabels(t, fams)
}

// noPerCallLabels fails t when a volume name or ID (pvc-…, vol-…) or a method the gateway
// does not know became a label value.
func noPerCallLabels(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for _, fam := range fams {
		for _, mt := range fam.GetMetric() {
			for _, v := range labelsOf(mt) {
				if strings.HasPrefix(v, "pvc-") || strings.HasPrefix(v, "vol-") || strings.Contains(v, "example.v1") {
					t.Errorf("%s has the per-call label value %q", fam.GetName(), v)
				}
			}
		}
	}
}

func TestMetricsDriverNameDefault(t *testing.T) {
	m := NewMetrics("", nil)
	m.record(outcome{fullMethod: "/csi.v1.Identity/Probe", code: codes.OK})
	fams := scrape(t, m.Handler())
	want := map[string]string{"driver_name": "unknown-driver", "method_name": "/csi.v1.Identity/Probe", "grpc_status_code": "OK"}
	if s := series(fams, "csigw_operations_seconds", want); s.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("no single sample for %v in %v", want, fams["csigw_operations_seconds"])
	}
}

// TestMetricsDriverNameLearnt: without a configured name, driver_name is what the backend's
// GetPluginInfo answered; a configured name wins.
func TestMetricsDriverNameLearnt(t *testing.T) {
	info, err := proto.Marshal(&csi.GetPluginInfoResponse{Name: "hostpath.csi.k8s.io", VendorVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ configured, want string }{{"", "hostpath.csi.k8s.io"}, {"configured.example.com", "configured.example.com"}} {
		m := NewMetrics(tc.configured, nil)
		methods := newMethodTable()
		h := m.Measure()(func(_ context.Context, call *Call) error {
			call.Backend = "driver"
			if call.Method == getPluginInfoMethod {
				call.Response = info
			}
			return nil
		})
		for _, method := range []string{getPluginInfoMethod, "/csi.v1.Identity/Probe"} {
			if err := h(context.Background(), &Call{Method: method, Start: time.Now(), info: methods[method]}); err != nil {
				t.Fatal(err)
			}
		}
		fams := scrape(t, m.Handler())
		want := map[string]string{"driver_name": tc.want, "method_name": "/csi.v1.Identity/Probe", "grpc_status_code": "OK"}
		if s := series(fams, "csigw_operations_seconds", want); s.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("configured %q: no single sample for %v in %v", tc.configured, want, fams["csigw_operations_seconds"])
		}
	}
}

func TestMetricsCertificateExpiry(t *testing.T) {
	m := NewMetrics("d", prometheus.NewRegistry())
	notAfter := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	m.SetCertificateExpiry("listeners[0]", notAfter.Add(-time.Hour))
	m.SetCertificateExpiry("listeners[0]", notAfter) // a reload: the last value wins
	m.SetCertificateExpiry("backends.array1", notAfter.Add(24*time.Hour))
	fams := scrape(t, m.Handler())
	const name = "csigw_tls_certificate_expiry_timestamp_seconds"
	if got := metricValue(fams, name, map[string]string{"name": "listeners[0]"}); got != float64(notAfter.Unix()) {
		t.Errorf("listeners[0] = %v, want %d", got, notAfter.Unix())
	}
	if got := metricValue(fams, name, map[string]string{"name": "backends.array1"}); got != float64(notAfter.Add(24*time.Hour).Unix()) {
		t.Errorf("backends.array1 = %v", got)
	}
	if n := seriesCount(fams, name); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}

// TestMetricsHandlerNeedsGatherer: a registerer that cannot be gathered is said so, not served
// as an empty page that looks like a healthy scrape.
func TestMetricsHandlerNeedsGatherer(t *testing.T) {
	m := NewMetrics("d", prometheus.WrapRegistererWith(prometheus.Labels{"x": "y"}, prometheus.NewRegistry()))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "pass a *prometheus.Registry") {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
}

// TestMetricsThroughServer runs calls through a real Server: csigw_calls_in_flight is 1 while a
// call is blocked in its backend and 0 after, each call is counted once, and neither the
// volume's name nor its ID becomes a label.
func TestMetricsThroughServer(t *testing.T) { onEachTransport(t, testMetricsThroughServer) }

func testMetricsThroughServer(t *testing.T, tr Transport) {
	m := NewMetrics("csi.example.com", prometheus.NewRegistry())
	entered, release := make(chan struct{}), make(chan struct{})
	fake := &serverFake{answer: func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		if method == "/csi.v1.Controller/CreateVolume" {
			close(entered)
			<-release
		}
		return nil, nil
	}}
	opts := serverFakeOptions(fake)
	opts.Metrics = m
	ts := startServerHarness(t, tr, opts, ListenerPolicy{}, slog.LevelError)
	client := csi.NewControllerClient(ts.conn)

	done := make(chan error, 1)
	go func() {
		_, err := client.CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-blocked"))
		done <- err
	}()
	<-entered
	inFlight := func() float64 {
		return metricValue(scrape(t, m.Handler()), "csigw_calls_in_flight", map[string]string{})
	}
	if got := inFlight(); got != 1 {
		t.Errorf("csigw_calls_in_flight = %v during a blocked call, want 1", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := client.ControllerGetVolume(serverCallCtx(t), &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"}); err != nil {
		t.Fatal(err)
	}
	// The call is recorded and the gauge drops before the caller's answer is sent: both are
	// settled once the caller has its answer.
	if got := inFlight(); got != 0 {
		t.Errorf("csigw_calls_in_flight = %v after the calls, want 0", got)
	}
	fams := scrape(t, m.Handler())
	for _, method := range []string{"/csi.v1.Controller/CreateVolume", "/csi.v1.Controller/ControllerGetVolume"} {
		labels := map[string]string{"driver_name": "csi.example.com", "method_name": method, "grpc_status_code": "OK"}
		if n := series(fams, "csigw_operations_seconds", labels).GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s counted %d times, want 1", method, n)
		}
	}
	if got := metricValue(fams, "csigw_backend_attempts_total", map[string]string{"backend": "fake"}); got != 2 {
		t.Errorf("csigw_backend_attempts_total{fake} = %v, want 2", got)
	}
	noPerCallLabels(t, fams)
}
