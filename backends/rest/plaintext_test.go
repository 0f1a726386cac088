package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// TestPlaintextSecrets sends requests with and without CSI secrets to real HTTP servers on
// loopback: over http:// a request with secrets is refused before it is sent, unless the
// backend opts in; over https:// it goes.
func TestPlaintextSecrets(t *testing.T) {
	withSecrets := createRequest(t) // secrets: {password: s3cr3t-canary}
	withoutSecrets, err := proto.Marshal(&csi.CreateVolumeRequest{Name: "pvc-1"})
	if err != nil {
		t.Fatal(err)
	}
	tlsServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(created)) }))
	t.Cleanup(tlsServer.Close)
	tests := []struct {
		name    string
		https   bool
		optIn   bool
		req     []byte
		refused string // the URL index the refusal names; "" when the request must go
	}{
		{"http, secrets: refused", false, false, withSecrets, "urls[0]"},
		{"http, no secrets: sent", false, false, withoutSecrets, ""},
		{"http, secrets, opted in: sent", false, true, withSecrets, ""},
		{"https, secrets: sent", true, false, withSecrets, ""},
		{"https then http, secrets: refused (a call may fail over)", true, false, withSecrets, "urls[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := newServer(t, reply(http.StatusOK, "application/json", created))
			cfg := Config{URLs: []string{plain.URL}, AllowSecretsOverPlaintextHTTP: tt.optIn, Retry: Retry{MaxAttempts: 1}}
			var opts []Option
			if tt.https {
				cfg.URLs = []string{tlsServer.URL}
				if tt.refused != "" {
					cfg.URLs = append(cfg.URLs, plain.URL)
				}
				opts = append(opts, WithHTTPClient(tlsServer.Client()))
			}
			b, err := New(testName, cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			ctx, _ := callContext(t)
			_, err = b.Unary(ctx, createPath, tt.req)
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("Unary: %v, want success", err)
				}
				if !tt.https && plain.hits.Load() != 1 {
					t.Errorf("the appliance got %d requests, want 1", plain.hits.Load())
				}
				return
			}
			checkError(t, err, backends.ClassPrecondition, "CreateVolume", "carries CSI secrets", "backends.array1."+tt.refused,
				"is http://", "set backends.array1.allowSecretsOverPlaintextHTTP: true")
			if n := plain.hits.Load(); n != 0 {
				t.Errorf("the plaintext appliance got %d requests, want none", n)
			}
		})
	}
}

func TestPlaintextWarning(t *testing.T) {
	tests := []struct {
		cfg  Config
		want []string // "" when no warning
	}{
		{Config{URLs: []string{"https://a"}}, nil},
		{Config{URLs: []string{"https://a", "http://b"}}, []string{"backends.array1.urls[1] is http://", "refused (FAILED_PRECONDITION)", "backends.array1.allowSecretsOverPlaintextHTTP: true"}},
		{Config{URLs: []string{"HTTP://a"}, AllowSecretsOverPlaintextHTTP: true}, []string{"backends.array1.allowSecretsOverPlaintextHTTP: true", "in the clear", "urls[0]"}},
	}
	for _, tt := range tests {
		got := tt.cfg.PlaintextWarning(testName)
		if (got == "") != (tt.want == nil) {
			t.Errorf("%v: warning %q, want one holding %q", tt.cfg.URLs, got, tt.want)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: warning %q lacks %q", tt.cfg.URLs, got, w)
			}
		}
	}
}
