package connect

import (
	"encoding/base64"
	"testing"
	"time"
)

// TestHandlerRequestErrors covers what the request's headers can get wrong: media type,
// encoding, protocol version, timeout and binary metadata.
func TestHandlerRequestErrors(t *testing.T) {
	srv := serve(t, &fake{})
	del := func(body string) request { return request{path: "/csi.v1.Controller/DeleteVolume", body: body} }
	withHeader := func(r request, k, v string) request { r.header = map[string]string{k: v}; return r }
	checkErrorCases(t, srv, []errorCase{
		{"text/plain", withHeader(del("{}"), "Content-Type", "text/plain"), 415, "unimplemented", map[string]string{"Accept-Post": "application/json"}, "text/plain"},
		{"no content type", withHeader(del("{}"), "Content-Type", ""), 415, "unimplemented", nil, "application/json"},
		{"latin1 charset", withHeader(del("{}"), "Content-Type", "application/json; charset=latin1"), 415, "unimplemented", nil, "latin1"},
		{"application/proto", withHeader(del("{}"), "Content-Type", "application/proto"), 415, "unimplemented", nil, "application/proto"},
		{"gzip body", withHeader(del("{}"), "Content-Encoding", "gzip"), 501, "unimplemented", nil, "gzip"},
		{"protocol version 2", withHeader(del("{}"), "Connect-Protocol-Version", "2"), 400, "invalid_argument", nil, "Connect-Protocol-Version"},
		{"timeout not a number", withHeader(del("{}"), "Connect-Timeout-Ms", "soon"), 400, "invalid_argument", nil, "Connect-Timeout-Ms"},
		{"timeout zero", withHeader(del("{}"), "Connect-Timeout-Ms", "0"), 400, "invalid_argument", nil, "positive"},
		{"timeout 11 digits", withHeader(del("{}"), "Connect-Timeout-Ms", "12345678901"), 400, "invalid_argument", nil, "10 digits"},
		{"binary header not base64", withHeader(del("{}"), "Trace-Bin", "!!"), 400, "invalid_argument", nil, "Trace-Bin"},
		{"deadline passes in the method", withHeader(del(`{"volumeId":"slow"}`), "Connect-Timeout-Ms", "20"), 504, "deadline_exceeded", nil, "deadline"},
	})
}

func TestHandlerTimeoutBecomesDeadline(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration // 0: no deadline
	}{
		{"none", nil, 0},
		{"5s", map[string]string{"Connect-Timeout-Ms": "5000"}, 5 * time.Second},
		{"10 digits", map[string]string{"Connect-Timeout-Ms": "9999999999"}, 9999999999 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{}
			srv := serve(t, f)
			start := time.Now()
			if resp, body := do(t, t.Context(), srv, request{path: "/csi.v1.Identity/GetPluginInfo", header: tt.header}); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if tt.want == 0 {
				if !f.deadline.IsZero() {
					t.Errorf("deadline %v, want none", f.deadline)
				}
				return
			}
			if left := f.deadline.Sub(start); left <= tt.want-time.Second || left > tt.want+time.Second {
				t.Errorf("deadline %v after the call started, want about %v", left, tt.want)
			}
		})
	}
}

func TestHandlerHeadersBecomeMetadata(t *testing.T) {
	f := &fake{}
	srv := serve(t, f)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	header := map[string]string{
		"traceparent":        tp,
		"X-Tenant":           "blue",
		"Trace-Bin":          base64.RawStdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}),
		"Connect-Timeout-Ms": "60000",
		"Connection":         "X-Hop",
		"X-Hop":              "gone",
	}
	if resp, body := do(t, t.Context(), srv, request{path: "/csi.v1.Identity/GetPluginInfo", header: header}); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]string{"traceparent": tp, "x-tenant": "blue", "trace-bin": "\x00\x01\x02\xff"}
	for k, v := range want {
		if got := f.md.Get(k); len(got) != 1 || got[0] != v {
			t.Errorf("metadata %s = %q, want [%q]", k, got, v)
		}
	}
	for _, k := range []string{"content-type", "content-length", "connect-timeout-ms", "connection", "x-hop"} {
		if got := f.md.Get(k); len(got) != 0 {
			t.Errorf("metadata %s = %q, want absent", k, got)
		}
	}
}
