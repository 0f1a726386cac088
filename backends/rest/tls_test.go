package rest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

// applianceTLS serves the reference appliance over HTTPS with a certificate of ca, requiring
// a client certificate of ca, and returns its URL. wrap (if any) sees every request first.
func applianceTLS(t *testing.T, ca *testutil.CA, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	a, err := embedded.Open(embedded.Config{DataDir: t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var r connect.Registrar
	a.Register(&r)
	var h http.Handler = connect.NewHandler(r.Services())
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.NewServerLeaf(t).TLSCertificate(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// gatewayTLS returns the client TLS configuration of a gateway that trusts ca and presents
// a certificate of certCA.
func gatewayTLS(t *testing.T, ca, certCA *testutil.CA) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	files := tlsconf.ClientFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"),
		Key: filepath.Join(dir, "tls.key"), ServerName: "localhost"}
	kp := certCA.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/gateway"}})
	testutil.WritePEM(t, files.CA, ca.PEM)
	testutil.WritePEM(t, files.Cert, kp.CertPEM)
	testutil.WritePEM(t, files.Key, kp.KeyPEM)
	c, err := tlsconf.NewClient(files, tlsconf.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Config()
}

func tlsBackend(t *testing.T, cfg Config, tlsCfg *tls.Config, url string) *Backend {
	t.Helper()
	cfg.URLs = []string{url}
	cfg.Retry.MaxAttempts = 1
	b, err := New(testName, cfg, WithTLSConfig(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestMutualTLSWithAppliance(t *testing.T) {
	ca := testutil.NewCA(t, "appliance CA")
	url := applianceTLS(t, ca, nil)

	b := tlsBackend(t, Config{}, gatewayTLS(t, ca, ca), url)
	var info csi.GetPluginInfoResponse
	if err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &info); err != nil {
		t.Fatalf("with the right CA and certificate: %v", err)
	}
	if info.GetName() != "embedded.csi-gateway.io" {
		t.Errorf("plugin name %q", info.GetName())
	}

	other := testutil.NewCA(t, "other CA")
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want []string
	}{
		{"wrong CA", gatewayTLS(t, other, ca), []string{"backends.array1.tls.ca", "unknown authority"}},
		{"certificate the appliance does not trust", gatewayTLS(t, ca, other), []string{"refused the gateway's client certificate", "backends.array1.tls.cert"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tlsBackend(t, Config{}, tc.tls, url)
			err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &info)
			var be *backends.Error
			if !errors.As(err, &be) || be.Class != backends.ClassUnavailable {
				t.Fatalf("error %v, want a ClassUnavailable *backends.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(be.Message, w) {
					t.Errorf("message %q does not contain %q", be.Message, w)
				}
			}
		})
	}
}

// authRecorder records the Authorization header of every request before the appliance
// answers it.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (a *authRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[len(a.seen)-1]
}

func TestBearerTokenFileRotation(t *testing.T) {
	ca := testutil.NewCA(t, "appliance CA")
	var rec authRecorder
	url := applianceTLS(t, ca, rec.wrap)
	tokenFile := filepath.Join(t.TempDir(), "token")
	testutil.WritePEM(t, tokenFile, []byte("first-token\n"))
	b := tlsBackend(t, Config{Auth: Auth{BearerTokenFile: tokenFile}}, gatewayTLS(t, ca, ca), url)

	var info csi.GetPluginInfoResponse
	for _, token := range []string{"first-token", "second-token-rotated"} {
		testutil.WritePEM(t, tokenFile, []byte(token+"\n"))
		if err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &info); err != nil {
			t.Fatal(err)
		}
		if got := rec.last(); got != "Bearer "+token {
			t.Errorf("the appliance saw %q, want the token now in the file, %q", got, "Bearer "+token)
		}
	}
}

func TestBasicAuthFiles(t *testing.T) {
	ca := testutil.NewCA(t, "appliance CA")
	var user, pass string
	url := applianceTLS(t, ca, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ = r.BasicAuth()
			next.ServeHTTP(w, r)
		})
	})
	dir := t.TempDir()
	a := Auth{UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}
	testutil.WritePEM(t, a.UsernameFile, []byte("admin"))
	testutil.WritePEM(t, a.PasswordFile, []byte("s3cret\n"))
	b := tlsBackend(t, Config{Auth: a}, gatewayTLS(t, ca, ca), url)
	if err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &csi.GetPluginInfoResponse{}); err != nil {
		t.Fatal(err)
	}
	if user != "admin" || pass != "s3cret" {
		t.Errorf("the appliance saw %q:%q, want admin:s3cret", user, pass)
	}
}

// TestCredentialsNeverShown checks that a canary token appears in no error: not when the
// appliance refuses it, not when the file turns bad, and that a bad file is named by key.
func TestCredentialsNeverShown(t *testing.T) {
	const canary = "canary-token-4f1d9a"
	ca := testutil.NewCA(t, "appliance CA")
	url := applianceTLS(t, ca, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code":"unauthenticated","message":"bad token"}`)
		})
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	b := tlsBackend(t, Config{Auth: Auth{BearerTokenFile: tokenFile}}, gatewayTLS(t, ca, ca), url)

	for _, tc := range []struct {
		name    string
		content string // "": no file
		want    string
	}{
		{"refused by the appliance", canary, "bad token"},
		{"two lines", canary + "\n" + canary, "backends.array1.auth.bearerTokenFile"},
		{"empty", "\n", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.WritePEM(t, tokenFile, []byte(tc.content))
			err := unary(t, b, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}, &csi.GetPluginInfoResponse{})
			if err == nil {
				t.Fatal("the call succeeded")
			}
			var be *backends.Error
			errors.As(err, &be)
			text := err.Error()
			if be != nil && be.Cause != nil {
				text += " " + be.Cause.Error()
			}
			if strings.Contains(text, canary) {
				t.Errorf("the error shows the token: %s", text)
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("error %q does not contain %q", text, tc.want)
			}
		})
	}
}

func TestAuthConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"plain http", Config{URLs: []string{"http://array:8080"}, Auth: Auth{BearerTokenFile: "/t"}}, "backends.array1.urls[0]: credentials (auth) are sent only over https://"},
		{"both kinds", Config{URLs: []string{"https://array"}, Auth: Auth{BearerTokenFile: "/t", UsernameFile: "/u"}}, "backends.array1.auth: bearerTokenFile and usernameFile/passwordFile are both set"},
		{"username alone", Config{URLs: []string{"https://array"}, Auth: Auth{UsernameFile: "/u"}}, "backends.array1.auth: basic authentication needs both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(testName, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
