package csp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
)

const (
	createVolumeMethod = "/csi.v1.Controller/CreateVolume"
	deleteVolumeMethod = "/csi.v1.Controller/DeleteVolume"
	getVolumeMethod    = "/csi.v1.Controller/ControllerGetVolume"
)

var mountRWO = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

func createReq(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mountRWO, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}}
}

// wantClass fails unless err is a classified backend error of class whose message does not
// repeat the CSP's password.
func wantClass(t *testing.T, err error, class backends.Class) {
	t.Helper()
	if got := backends.ClassOf(err); err == nil || got != class {
		t.Fatalf("error %v (class %v), want class %v", err, got, class)
	}
	if strings.Contains(err.Error(), canaryPassword) {
		t.Fatalf("the error repeats the CSP's password: %v", err)
	}
}

// A create whose reply is lost (the CSP applied it, then the connection closed) is found by
// name: one volume, the same one on every retry.
func TestCreateVolumeReplyLost(t *testing.T) {
	for _, p := range []cspfake.Profile{cspfake.ProfileSpec, cspfake.ProfileHPE, cspfake.ProfileTrueNAS} {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, p)
			r.fake.Inject(cspfake.Fault{Method: http.MethodPost, Path: "/volumes", DropReply: true})
			first, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-lost-reply"))
			if err != nil {
				t.Fatalf("CreateVolume with its reply dropped: %v", err)
			}
			again, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-lost-reply"))
			if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
				t.Fatalf("the retry: %v, %v; want the same volume %s", again, err, first.GetVolume().GetVolumeId())
			}
			if n := r.fake.Counters().Volumes; n != 1 {
				t.Errorf("the CSP holds %d volumes, want 1", n)
			}
		})
	}
}

// A token that expires is renewed by exactly one login, even when many calls find it
// expired at once; calls go on.
func TestTokenExpiryOneLoginPerExpiry(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	v, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-token"))
	if err != nil {
		t.Fatal(err)
	}
	id := v.GetVolume().GetVolumeId()
	for expiry := 1; expiry <= 3; expiry++ {
		r.fake.ExpireTokens()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := call[*csi.ControllerGetVolumeResponse](t, r, getVolumeMethod, &csi.ControllerGetVolumeRequest{VolumeId: id})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a call after expiry %d: %v", expiry, err)
			}
		}
		if got := r.fake.Counters().Logins; got != 1+expiry {
			t.Errorf("after %d expiries: %d logins, want %d (one per expiry)", expiry, got, 1+expiry)
		}
	}
}

// A CSP that keeps answering 401 after a fresh login gets one login and one retry, never a
// loop; the caller learns the credentials are refused (UNAVAILABLE: the gateway's own
// configuration is at fault, not the caller).
func TestUnauthorizedNeverLoops(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	if _, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-401")); err != nil {
		t.Fatal(err)
	}
	logins := r.fake.Counters().Logins
	r.fake.Inject(cspfake.Fault{Method: http.MethodGet, Path: "/volumes/*", Status: http.StatusUnauthorized, Times: -1})
	_, err := call[*csi.ControllerGetVolumeResponse](t, r, getVolumeMethod, &csi.ControllerGetVolumeRequest{VolumeId: "whatever"})
	wantClass(t, err, backends.ClassUnavailable)
	if got := r.fake.Counters().Logins - logins; got != 1 {
		t.Errorf("%d logins for a call answered 401 throughout, want exactly 1", got)
	}
}

// Wrong credentials: the login fails once per call, UNAVAILABLE, naming the files, never
// the password.
func TestCredentialsRefused(t *testing.T) {
	r := newRig(t, cspfake.ProfileTrueNAS, func(c *Config) { c.Nodes = nil })
	r.fake.Inject(cspfake.Fault{Method: http.MethodPost, Path: "/tokens", Status: http.StatusUnauthorized,
		Body: `{"title":"401 Unauthorized","description":"bad key ` + canaryPassword + `"}`})
	_, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-refused"))
	wantClass(t, err, backends.ClassUnavailable)
	if !strings.Contains(err.Error(), "password") {
		t.Errorf("the error does not name the credentials files: %v", err)
	}
}

// 429 and 503 are retried within the deadline (honouring Retry-After); when the deadline
// cannot hold another try, the caller gets UNAVAILABLE before it, not DEADLINE_EXCEEDED.
func TestRateLimitedRetriedWithinDeadline(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	v, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-429"))
	if err != nil {
		t.Fatal(err)
	}
	r.fake.Inject(
		cspfake.Fault{Method: http.MethodGet, Path: "/volumes/*", Status: http.StatusTooManyRequests, RetryAfter: "0"},
		cspfake.Fault{Method: http.MethodGet, Path: "/volumes/*", Status: http.StatusServiceUnavailable},
	)
	if _, err := call[*csi.ControllerGetVolumeResponse](t, r, getVolumeMethod, &csi.ControllerGetVolumeRequest{VolumeId: v.GetVolume().GetVolumeId()}); err != nil {
		t.Fatalf("after a 429 and a 503: %v, want the retries to succeed", err)
	}
	r.fake.Inject(cspfake.Fault{Method: http.MethodGet, Path: "/volumes/*", Status: http.StatusServiceUnavailable, RetryAfter: "1", Times: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = callCtx[*csi.ControllerGetVolumeResponse](ctx, t, r, getVolumeMethod, &csi.ControllerGetVolumeRequest{VolumeId: v.GetVolume().GetVolumeId()})
	wantClass(t, err, backends.ClassUnavailable)
	if ctx.Err() != nil {
		t.Errorf("the call ended after its deadline (%v); it should give up when no retry fits", time.Since(start))
	}
}

// A 404 that is not the CSP's (an HTML page: a wrong base URL behind a proxy) is never
// "absent": DeleteVolume is UNAVAILABLE, not OK, and the volume stays.
func TestNonCSP404IsNotAbsent(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	v, err := call[*csi.CreateVolumeResponse](t, r, createVolumeMethod, createReq("pvc-404"))
	if err != nil {
		t.Fatal(err)
	}
	r.fake.Inject(cspfake.Fault{Method: http.MethodDelete, Path: "/volumes/*", Status: http.StatusNotFound,
		Body: "<html><head><title>404 Not Found</title></head><body>nginx</body></html>", ContentType: "text/html"})
	_, err = call[*csi.DeleteVolumeResponse](t, r, deleteVolumeMethod, &csi.DeleteVolumeRequest{VolumeId: v.GetVolume().GetVolumeId()})
	wantClass(t, err, backends.ClassUnavailable)
	if n := r.fake.Counters().Volumes; n != 1 {
		t.Errorf("the volume is gone (%d volumes)", n)
	}
	// A CSP-shaped 404 is absent: OK.
	if _, err := call[*csi.DeleteVolumeResponse](t, r, deleteVolumeMethod, &csi.DeleteVolumeRequest{VolumeId: "0123456789abcdef0123456789abcdef0123456789"}); err != nil {
		t.Errorf("DeleteVolume of an absent volume: %v, want OK", err)
	}
}

// A URL that is no CSP at all (a web server's own 404): Probe is UNAVAILABLE, naming the URL
// key to check.
func TestProbeWrongURL(t *testing.T) {
	r := newRig(t, cspfake.ProfileSpec)
	notCSP := httptest.NewTLSServer(http.NotFoundHandler())
	defer notCSP.Close()
	b, err := New("array1", Config{URL: notCSP.URL, UsernameFile: r.b.cfg.UsernameFile, PasswordFile: r.b.cfg.PasswordFile},
		rest.WithHTTPClient(notCSP.Client()))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Ready(context.Background())
	wantClass(t, err, backends.ClassUnavailable)
	if !strings.Contains(err.Error(), "backends.array1.urls") {
		t.Errorf("the error does not say which key to check: %v", err)
	}
}
