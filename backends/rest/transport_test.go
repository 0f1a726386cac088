package rest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/backends"
)

// TestTransportErrorsOverTheWire makes real connections fail.
func TestTransportErrorsOverTheWire(t *testing.T) {
	tlsServer := httptestTLS(t)
	plain := newServer(t, reply(200, "application/json", created))
	hangup := hangupServer(t)
	tests := []struct {
		name      string
		url       string
		class     backends.Class
		attempts  int
		fragments []string
	}{
		{"connection refused", refusedURL(t), backends.ClassUnavailable, 3,
			[]string{"cannot connect to http://127.0.0.1:", "connection refused", "backends.array1.urls", "gave up after 3 attempts"}},
		{"unknown certificate authority", tlsServer, backends.ClassUnavailable, 1,
			[]string{"TLS with https://127.0.0.1:", "certificate", "backends.array1.tls.ca"}},
		{"plain HTTP at an https URL", strings.Replace(plain.URL, "http://", "https://", 1), backends.ClassUnavailable, 1,
			[]string{"did not answer in TLS", "use http:// in backends.array1.urls"}},
		{"connection closed without an answer", hangup, backends.ClassUnavailable, 3,
			[]string{"the connection to http://127.0.0.1:", "ended before the appliance answered", "gave up after 3 attempts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, Config{Retry: Retry{MaxAttempts: 3}}, tt.url)
			ctx, info := callContext(t)
			_, err := b.Unary(ctx, createPath, createRequest(t))
			checkError(t, err, tt.class, append([]string{`backend "array1": CreateVolume: `}, tt.fragments...)...)
			if info.Attempts() != tt.attempts {
				t.Errorf("%d attempts, want %d", info.Attempts(), tt.attempts)
			}
		})
	}
}

// httptestTLS returns the URL of a TLS server whose certificate no CA of the gateway
// signed.
func httptestTLS(t *testing.T) string {
	t.Helper()
	answer := reply(200, "application/json", created)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(0, w, r) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failures are the point
	t.Cleanup(srv.Close)
	return srv.URL
}

// hangupServer returns the URL of a server that reads each request and closes the
// connection without answering.
func hangupServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				c.Close()
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// TestDescribeTransport covers the failures that a test cannot easily cause for real.
func TestDescribeTransport(t *testing.T) {
	const display = "https://array1.example:8443"
	wrap := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://admin:hunter2@array1.example:8443/x?token=t0k3n", Err: err}
	}
	timeoutErr := &net.OpError{Op: "dial", Net: "tcp", Err: &timeoutError{}}
	tests := []struct {
		name      string
		err       error
		timeout   time.Duration
		class     backends.Class
		retry     bool
		fragments []string
	}{
		{"dns", wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "array1.example", IsNotFound: true}}), 0,
			backends.ClassUnavailable, true, []string{"cannot resolve the host of https://array1.example:8443", "no such host", "gateway's DNS"}},
		{"reset", wrap(&net.OpError{Op: "read", Err: syscall.ECONNRESET}), 0,
			backends.ClassUnavailable, true, []string{"ended before the appliance answered", "connection reset"}},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), 0, backends.ClassUnavailable, true, []string{"ended before"}},
		{"attempt timeout", wrap(timeoutErr), 30 * time.Second,
			backends.ClassDeadline, true, []string{"did not answer in time", "30s", "backends.array1.requestTimeout"}},
		{"hostname mismatch", wrap(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "array1.example"}}), 0,
			backends.ClassUnavailable, false, []string{"must name the host in backends.array1.urls"}},
		{"expired", wrap(&tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.Expired}}), 0,
			backends.ClassUnavailable, false, []string{"gateway's clock"}},
		{"client certificate refused", wrap(&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}), 0,
			backends.ClassUnavailable, false, []string{"refused the gateway's client certificate", "backends.array1.tls.cert"}},
		{"other TLS alert is retried", wrap(&net.OpError{Op: "remote error", Err: errors.New("tls: internal error")}), 0,
			backends.ClassUnavailable, true, []string{"cannot reach https://array1.example:8443"}},
		{"other", wrap(errors.New("something odd")), 0, backends.ClassUnavailable, true, []string{"cannot reach https://array1.example:8443: something odd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := transportError(testName, "CreateVolume", display, tt.err, tt.timeout)
			checkError(t, e, tt.class, tt.fragments...)
			for _, secret := range []string{"hunter2", "admin", "t0k3n"} {
				if strings.Contains(e.Message, secret) {
					t.Errorf("message %q contains %q", e.Message, secret)
				}
			}
			if got := RetryableTransport(tt.err); got != tt.retry {
				t.Errorf("retryableTransport = %v, want %v", got, tt.retry)
			}
		})
	}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }
