package rest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

const (
	testName   = "array1"
	createPath = "/csi.v1.Controller/CreateVolume"
)

// newBackend returns a backend called testName for urls. Retries are fast unless cfg says
// otherwise; the backend is closed when the test ends.
func newBackend(t *testing.T, cfg Config, urls ...string) *Backend {
	t.Helper()
	cfg.URLs = urls
	// The tests' appliances are httptest servers on plain http://, and createRequest
	// carries a secret: plaintext_test.go tests the refusal without this.
	cfg.AllowSecretsOverPlaintextHTTP = true
	if cfg.Retry.MinBackoff == 0 {
		cfg.Retry.MinBackoff = time.Millisecond
	}
	if cfg.Retry.MaxBackoff == 0 {
		cfg.Retry.MaxBackoff = 10 * time.Millisecond
	}
	b, err := New(testName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// server is an httptest server whose handler is given per test; it counts requests and
// keeps each one's headers and body.
type server struct {
	*httptest.Server
	hits atomic.Int32

	mu      sync.Mutex
	headers []http.Header
	bodies  []string
	handle  func(n int, w http.ResponseWriter, r *http.Request) // n counts from 1
}

func newServer(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{handle: h}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.hits.Add(1))
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		s.handle(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// reply answers every request with status, Content-Type ct (if any) and body.
func reply(status int, ct, body string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// created is the appliance's answer to createRequest in protojson.
const created = `{"volume":{"volumeId":"vol-1","capacityBytes":"1073741824"}}`

// createRequest returns a CreateVolumeRequest as wire bytes.
func createRequest(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&csi.CreateVolumeRequest{
		Name:          "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		Secrets:       map[string]string{"password": "s3cr3t-canary"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// callContext returns a context carrying a CallInfo, and the CallInfo.
func callContext(t *testing.T) (context.Context, *backends.CallInfo) {
	return backends.WithCallInfo(t.Context())
}

// refusedURL returns the URL of a port where nothing listens: a listener opened and closed.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// checkError checks that err is a *backends.Error of class whose message holds every
// fragment, and never the canary secret of createRequest.
func checkError(t *testing.T, err error, class backends.Class, fragments ...string) *backends.Error {
	t.Helper()
	var e *backends.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *backends.Error of class %v", err, err, class)
	}
	if e.Class != class {
		t.Errorf("class %v, want %v; message: %s", e.Class, class, e.Message)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Message, f) {
			t.Errorf("message %q lacks %q", e.Message, f)
		}
	}
	if strings.Contains(e.Message, "s3cr3t") {
		t.Errorf("message %q contains the request's secret", e.Message)
	}
	if len(e.Message) > backends.MaxMessageBytes {
		t.Errorf("message is %d bytes, more than %d", len(e.Message), backends.MaxMessageBytes)
	}
	return e
}
