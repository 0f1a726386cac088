package cspfake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFaultTimesAndMatching(t *testing.T) {
	c := start(t, Options{})
	c.fake.Inject(
		Fault{Method: "GET", Path: "/volumes/*", Times: 2, Status: 503, RetryAfter: "7"},
		Fault{Path: "/hosts", Status: 429},
	)
	for i := range 2 {
		resp, body, err := c.do(context.Background(), "GET", "/volumes/abc", "")
		if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" || !errorsShape(body) {
			t.Fatalf("attempt %d: %v %v %s", i, err, resp, body)
		}
	}
	c.expect(404, "GET", "/volumes/abc", "", nil) // used up: handled normally
	c.expect(200, "GET", "/volumes", "", nil)     // "/volumes/*" does not match "/volumes"
	c.expect(429, "GET", "/hosts", "", nil)
	c.expect(200, "GET", "/hosts", "", nil)

	c.fake.Inject(Fault{Path: "/tokens", Times: -1, Status: 401})
	for range 3 {
		c.expect(401, "POST", "/tokens", `{"username":"admin","password":"`+testPassword+`","array_ip":"x"}`, nil)
	}
	c.fake.ClearFaults()
	c.login()
	calls := c.fake.Calls()
	if last := calls[len(calls)-1]; last.Faulted || last.Status != 200 {
		t.Errorf("last call %+v", last)
	}
	if !calls[len(calls)-2].Faulted {
		t.Errorf("faulted call not marked: %+v", calls[len(calls)-2])
	}
}

func TestFaultBodies(t *testing.T) {
	c := start(t, Options{})
	cases := []struct {
		fault     Fault
		wantBody  string
		wantCType string
	}{
		{Fault{Status: 502, Body: "<html><body>Bad Gateway</body></html>", ContentType: "text/html"}, "<html><body>Bad Gateway</body></html>", "text/html"},
		{Fault{Status: 404, EmptyBody: true}, "", "application/json"},
		{Fault{Status: 404, Body: `{"code":"Not Found","message":"volume group not found"}`}, `{"code":"Not Found","message":"volume group not found"}`, "application/json"},
		{Fault{Status: 200, Body: `{"not":"an array"}`}, `{"not":"an array"}`, "application/json"},
	}
	for _, tc := range cases {
		c.fake.Inject(tc.fault)
		resp, body, err := c.do(context.Background(), "GET", "/volume_groups", "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.fault.Status || string(body) != tc.wantBody || resp.Header.Get("Content-Type") != tc.wantCType {
			t.Errorf("fault %+v: %d %q %q", tc.fault, resp.StatusCode, body, resp.Header.Get("Content-Type"))
		}
	}
}

// TestDropReplyAppliesTheWrite proves that "create, reply lost" really created the
// volume: the client sees a broken connection, and a lookup by name finds one volume.
func TestDropReplyAppliesTheWrite(t *testing.T) {
	c := start(t, Options{})
	c.fake.Inject(Fault{Method: "POST", Path: "/volumes", DropReply: true})
	_, _, err := c.do(context.Background(), "POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	if err == nil {
		t.Fatal("dropped reply: no error")
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") {
		t.Logf("transport error: %v", err)
	}
	var list []volumeJSON
	c.expect(200, "GET", "/volumes?name=pvc-1", "", &list)
	c.expect(409, "POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`, nil)
	if n := c.fake.Counters(); n.Volumes != 1 || len(list) != 1 {
		t.Errorf("volumes %d, list %d", n.Volumes, len(list))
	}
	call := c.fake.Calls()[1]
	if !call.Dropped || call.Status != 200 {
		t.Errorf("call log %+v", call)
	}
}

func TestCutReply(t *testing.T) {
	c := start(t, Options{})
	c.host("node-a")
	c.fake.Inject(Fault{Method: "GET", Path: "/hosts", CutReply: true})
	_, _, err := c.do(context.Background(), "GET", "/hosts", "")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut reply: %v, want unexpected EOF", err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	c := start(t, Options{})
	c.fake.Inject(Fault{Method: "POST", Path: "/volumes", Latency: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := c.do(ctx, "POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	// The handler gives up too: the call is logged without a status and nothing was created.
	deadline := time.Now().Add(5 * time.Second)
	for {
		calls := c.fake.Calls()
		if len(calls) == 2 {
			if calls[1].Status != 0 || !calls[1].Faulted {
				t.Errorf("call %+v", calls[1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("handler still waiting after its request ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if n := c.fake.Counters(); n.Volumes != 0 {
		t.Errorf("volumes %d", n.Volumes)
	}

	// A latency shorter than the deadline delays, then handles.
	c.fake.Inject(Fault{Method: "GET", Latency: 50 * time.Millisecond})
	t0 := time.Now()
	c.expect(http.StatusOK, "GET", "/volumes", "", nil)
	if time.Since(t0) < 50*time.Millisecond {
		t.Error("latency not applied")
	}
}
