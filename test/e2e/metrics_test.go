package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestGatewayMetricsAndReadiness runs the real gateway with its admin listener on, in front of
// an embedded appliance ("local", which takes every call) and a gRPC backend ("remote", a real
// appliance process that takes none): CSI calls show up in /metrics under the sidecars' metric
// name and labels, and /readyz follows the remote appliance going away and coming back while
// /healthz stays 200.
func TestGatewayMetricsAndReadiness(t *testing.T) {
	dir := t.TempDir()
	remoteSock := "unix://" + filepath.Join(dir, "remote.sock")
	startRemote := func() *testutil.Process {
		p := testutil.Start(t, "appliance", "--data", filepath.Join(dir, "remote-data"), "--endpoint", remoteSock)
		testutil.Dial(t, remoteSock)
		return p
	}
	remote := startRemote()

	admin := "http://" + testutil.FreeAddr(t)
	gw := startGatewayWith(t, dir, fmt.Sprintf(`admin: {listen: %q}
backends:
  local: {type: embedded, dataDir: %q}
  remote: {type: grpc, target: %q}
routes:
  - {methods: ["*"], backend: local}
`, strings.TrimPrefix(admin, "http://"), filepath.Join(dir, "local-data"), remoteSock))

	// Ready once the listeners are up and both backends answer.
	waitHTTP(t, gw.Process, admin+"/readyz", http.StatusOK, "ready", 60*time.Second)
	checkHTTP(t, admin+"/healthz", http.StatusOK, "ok")

	ctl := csi.NewControllerClient(gw.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const canary = "CANARY-metrics-4e21"
	req := volumeRequest("pvc-metrics")
	req.Secrets = map[string]string{"password": canary}
	vol, err := ctl.CreateVolume(ctx, req)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	for range 2 {
		_, err := ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "no-such-volume"})
		checkStatus(t, "ControllerGetVolume of a missing volume", err, codes.NotFound)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolume().GetVolumeId()}); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}

	if _, body, err := getHTTP(admin + "/metrics"); err != nil || strings.Contains(body, canary) || strings.Contains(body, "4e21") {
		t.Errorf("the canary secret appears in /metrics (or the scrape failed: %v)", err)
	}
	fams := scrapeMetrics(t, admin+"/metrics")
	// Nothing a csi-provisioner or a csi-lib-utils driver in the same pod also exports (their
	// csi_sidecar_* / csi_plugin_* histograms, go_*, process_*, workqueue_*, rest_client_*,
	// leader_election_*): every name of the gateway's has its own prefix.
	for name := range fams {
		if !strings.HasPrefix(name, "csigw_") {
			t.Errorf("/metrics has %s, a name outside the gateway's csigw_ prefix", name)
		}
	}
	const ops = "csigw_operations_seconds"
	if typ := fams[ops].GetType(); typ != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is %v, want a histogram; families: %v", ops, typ, slices.Sorted(maps.Keys(fams)))
	}
	want := map[[2]string]uint64{
		{"/csi.v1.Controller/CreateVolume", "OK"}:              1,
		{"/csi.v1.Controller/ControllerGetVolume", "NotFound"}: 2,
		{"/csi.v1.Controller/DeleteVolume", "OK"}:              1,
	}
	got := map[[2]string]uint64{}
	for _, m := range fams[ops].GetMetric() {
		l := metricLabels(m)
		if len(l) != 3 || l["driver_name"] == "" {
			t.Errorf("%s has labels %v, want exactly driver_name, method_name, grpc_status_code", ops, l)
		}
		got[[2]string{l["method_name"], l["grpc_status_code"]}] += m.GetHistogram().GetSampleCount()
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s_count{method_name=%q,grpc_status_code=%q} = %d, want %d", ops, k[0], k[1], got[k], n)
		}
	}
	// Nothing else went through the gateway (the readiness checks call backends directly).
	if len(got) != len(want) {
		t.Errorf("%s series: %v, want only %v", ops, got, want)
	}
	reqs := metricSeries(fams, "csigw_backend_requests_total", map[string]string{
		"backend": "local", "method_name": "/csi.v1.Controller/ControllerGetVolume", "grpc_status_code": "NotFound"})
	if reqs.GetCounter().GetValue() != 2 {
		t.Errorf("csigw_backend_requests_total{local,ControllerGetVolume,NotFound} = %v, want 2", reqs)
	}
	for _, b := range []string{"local", "remote"} {
		if v := metricSeries(fams, "csigw_backend_ready", map[string]string{"backend": b}); v.GetGauge().GetValue() != 1 {
			t.Errorf("csigw_backend_ready{backend=%q} = %v, want 1", b, v)
		}
	}
	if v := metricSeries(fams, "csigw_calls_in_flight", map[string]string{}); v == nil || v.GetGauge().GetValue() != 0 {
		t.Errorf("csigw_calls_in_flight = %v, want 0", v)
	}

	// The remote appliance dies: not ready, naming it; still alive.
	remote.Kill()
	body := waitHTTP(t, gw.Process, admin+"/readyz", http.StatusServiceUnavailable, "", 60*time.Second)
	if !strings.Contains(body, `backend "remote"`) || strings.Contains(body, `backend "local"`) {
		t.Errorf("/readyz while remote is down: %q, want a reason naming remote only", body)
	}
	checkHTTP(t, admin+"/healthz", http.StatusOK, "ok")
	if v := metricSeries(scrapeMetrics(t, admin+"/metrics"), "csigw_backend_ready", map[string]string{"backend": "remote"}); v.GetGauge().GetValue() != 0 {
		t.Errorf("csigw_backend_ready{remote} = %v while it is down, want 0", v)
	}

	// Restarted on the same socket: ready again (the gRPC client reconnects within its
	// backoff, at most 10 s for a Unix socket; the readiness cache lasts 2 s).
	startRemote()
	waitHTTP(t, gw.Process, admin+"/readyz", http.StatusOK, "ready", 60*time.Second)
}

// getHTTP GETs url and returns the status and body; err when nothing answered.
func getHTTP(url string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func checkHTTP(t *testing.T, url string, wantCode int, wantBody string) {
	t.Helper()
	code, body, err := getHTTP(url)
	if err != nil || code != wantCode || body != wantBody {
		t.Errorf("GET %s = %d %q (%v), want %d %q", url, code, body, err, wantCode, wantBody)
	}
}

// waitHTTP polls url until it answers wantCode (and wantBody, unless empty) and returns the
// body, failing the test with the gateway's output after timeout.
func waitHTTP(t *testing.T, p *testutil.Process, url string, wantCode int, wantBody string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := getHTTP(url)
		if err == nil && code == wantCode && (wantBody == "" || body == wantBody) {
			return body
		}
		if exited(p) || time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q (%v), want %d %q within %v\ngateway output:\n%s",
				url, code, body, err, wantCode, wantBody, timeout, p.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrapeMetrics GETs a Prometheus text exposition and parses it.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: the exposition does not parse: %v", url, err)
	}
	return fams
}

func metricLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// metricSeries returns the series of family name with exactly labels, or nil.
func metricSeries(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, m := range fams[name].GetMetric() {
		if maps.Equal(metricLabels(m), labels) {
			return m
		}
	}
	return nil
}
