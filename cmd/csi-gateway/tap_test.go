package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// startGatewayTap serves a Tap on an httptest server, as the gateway's admin listener does,
// and returns it with the server's host:port.
func startGatewayTap(t *testing.T) (*proxy.Tap, string) {
	t.Helper()
	tap := proxy.NewTap()
	mux := http.NewServeMux()
	mux.Handle(proxy.TapPath, tap.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		tap.Close()
		srv.Close()
	})
	return tap, srv.Listener.Addr().String()
}

// tapResult is what a run of `csi-gateway tap` printed and returned.
type tapResult struct {
	stdout, stderr string
	err            error
}

// startTapCommand runs `csi-gateway tap args...` in the background.
func startTapCommand(t *testing.T, args ...string) <-chan tapResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	done := make(chan tapResult, 1)
	go func() {
		defer cancel()
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"tap"}, args...), &stdout, &stderr)
		done <- tapResult{stdout.String(), stderr.String(), err}
	}()
	return done
}

// runTap runs `csi-gateway tap args...` to its end.
func runTap(t *testing.T, args ...string) tapResult {
	t.Helper()
	return <-startTapCommand(t, args...)
}

// waitTapSubscribers waits until the tap has n subscribers.
func waitTapSubscribers(t *testing.T, tap *proxy.Tap, n int, done <-chan tapResult) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for tap.Subscribers() != n {
		select {
		case r := <-done:
			t.Fatalf("tap ended before subscribing: %v\nstderr: %s", r.err, r.stderr)
		case <-deadline:
			t.Fatalf("%d subscribers after 10s, want %d", tap.Subscribers(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// tapTestRecords are four calls; the third is the one --code '!Unavailable' leaves out.
var tapTestRecords = []proxy.CallRecord{
	{
		Time: time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC), Method: "CreateVolume",
		FullMethod: "/csi.v1.Controller/CreateVolume", Code: codes.OK, CodeName: "OK", DurationMS: 12.345,
		IDs: map[string]string{"name": "pvc-\x1b[2J"}, Backend: "array1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	},
	{
		Time: time.Date(2026, 3, 1, 12, 30, 46, 5000000, time.UTC), Method: "ControllerPublishVolume",
		FullMethod: "/csi.v1.Controller/ControllerPublishVolume", Code: codes.FailedPrecondition, CodeName: "FailedPrecondition",
		Message: "volume is published to node-2", DurationMS: 0.04,
		BackendCode: "Aborted", BackendMessage: "volume is published to node-2", Repairs: []string{"code"},
		IDs: map[string]string{"volume_id": "vol-0123456789abcdef0123456789abcdef", "node_id": "node-1"}, Backend: "a-long-backend-name",
	},
	{
		Time: time.Date(2026, 3, 1, 12, 30, 47, 0, time.UTC), Method: "NodeGetInfo",
		FullMethod: "/csi.v1.Node/NodeGetInfo", Code: codes.Unavailable, CodeName: "Unavailable", DurationMS: 1,
	},
	{
		Time: time.Date(2026, 3, 1, 23, 59, 59, 999000000, time.FixedZone("", 2*3600)), Method: "ModifyVolumeGroupMembership",
		FullMethod: "/volumegroup.Controller/ModifyVolumeGroupMembership", Code: codes.DeadlineExceeded, CodeName: "DeadlineExceeded",
		DurationMS: 30000, IDs: map[string]string{"volume_group_id": "vg-1", "name": "ignored"}, Backend: "array2",
		TraceID: "00f067aa0ba902b700f067aa0ba902b7",
	},
}

const tapTestTable = `TIME          METHOD                       CODE                                  MS  VOLUME/ID                         BACKEND       TRACE
12:30:45.123  CreateVolume                 OK                                  12.3  pvc-?[2J                          array1        4bf92f35
12:30:46.005  ControllerPublishVolume      FailedPrecondition←Aborted           0.0  vol-0123456789abcdef0123456789a…  a-long-back…  -
23:59:59.999  ModifyVolumeGroupMembership  DeadlineExceeded                 30000.0  vg-1                              array2        00f067aa
`

const tapTestJSON = `{"time":"2026-03-01T12:30:45.123456789Z","method":"CreateVolume","full_method":"/csi.v1.Controller/CreateVolume","code":"OK","duration_ms":12.345,"ids":{"name":"pvc-\u001b[2J"},"backend":"array1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}
{"time":"2026-03-01T12:30:46.005Z","method":"ControllerPublishVolume","full_method":"/csi.v1.Controller/ControllerPublishVolume","code":"FailedPrecondition","message":"volume is published to node-2","duration_ms":0.04,"ids":{"node_id":"node-1","volume_id":"vol-0123456789abcdef0123456789abcdef"},"backend":"a-long-backend-name","backend_code":"Aborted","backend_message":"volume is published to node-2","repairs":["code"]}
{"time":"2026-03-01T23:59:59.999+02:00","method":"ModifyVolumeGroupMembership","full_method":"/volumegroup.Controller/ModifyVolumeGroupMembership","code":"DeadlineExceeded","duration_ms":30000,"ids":{"name":"ignored","volume_group_id":"vg-1"},"backend":"array2","trace_id":"00f067aa0ba902b700f067aa0ba902b7"}
`

func TestTapOutputs(t *testing.T) {
	for _, tc := range []struct {
		output, want string
	}{
		{"table", tapTestTable},
		{"json", tapTestJSON},
	} {
		t.Run(tc.output, func(t *testing.T) {
			tap, addr := startGatewayTap(t)
			done := startTapCommand(t, "--admin", addr, "--count", "3", "--code", "!Unavailable", "--output", tc.output)
			waitTapSubscribers(t, tap, 1, done)
			for _, r := range tapTestRecords {
				tap.Observe(r)
			}
			tap.Observe(tapTestRecords[0]) // a fourth record: tap has stopped at 3
			r := <-done
			if r.err != nil {
				t.Fatalf("tap: %v\nstderr: %s", r.err, r.stderr)
			}
			if r.stdout != tc.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tc.want)
			}
			if want := "csi-gateway tap: streaming the calls of the gateway at " + addr + "\n"; r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
		})
	}
}

// TestTapDropNotices plays a stream with drop notices, and checks the filters reach the
// gateway's query.
func TestTapDropNotices(t *testing.T) {
	stream := `{"dropped":1}
{"time":"2026-03-01T12:30:45.123Z","method":"Probe","full_method":"/csi.v1.Identity/Probe","code":"OK","duration_ms":0.2}
{"dropped":1500}
{"time":"2026-03-01T12:30:46Z","method":"NodeGetInfo","full_method":"/csi.v1.Node/NodeGetInfo","code":"OK","duration_ms":1}
`
	queries := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprint(w, stream)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream does not end by itself
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	for _, tc := range []struct{ output, want string }{
		{"table", `TIME          METHOD                       CODE                                  MS  VOLUME/ID                         BACKEND       TRACE
-- 1 record dropped (tap too slow) --
12:30:45.123  Probe                        OK                                   0.2  -                                 -             -
-- 1500 records dropped (tap too slow) --
12:30:46.000  NodeGetInfo                  OK                                   1.0  -                                 -             -
`},
		{"json", stream},
	} {
		t.Run(tc.output, func(t *testing.T) {
			r := runTap(t, "--admin", addr, "--count", "2", "--output", tc.output,
				"--method", "Node*", "--code", "!OK", "--volume", "pvc 1", "--backend", "array1")
			if r.err != nil {
				t.Fatalf("tap: %v\nstderr: %s", r.err, r.stderr)
			}
			if r.stdout != tc.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, tc.want)
			}
			if q, want := <-queries, "/debug/tap?backend=array1&code=%21OK&method=Node%2A&volume=pvc+1"; q != want {
				t.Errorf("request %s, want %s", q, want)
			}
		})
	}
}

// TestTapAdminFromEnvironment checks CSIGW_ADMIN_LISTEN, serve's variable for admin.listen,
// is where tap looks without --admin.
func TestTapAdminFromEnvironment(t *testing.T) {
	tap, addr := startGatewayTap(t)
	t.Setenv("CSIGW_ADMIN_LISTEN", addr)
	done := startTapCommand(t, "--count", "1", "--output", "json")
	waitTapSubscribers(t, tap, 1, done)
	tap.Observe(tapTestRecords[2])
	if r := <-done; r.err != nil || !strings.Contains(r.stdout, `"method":"NodeGetInfo"`) {
		t.Errorf("tap: %v; stdout %q; stderr %q", r.err, r.stdout, r.stderr)
	}
}

func TestTapErrors(t *testing.T) {
	closed := closedAddr(t)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html></html>")
	}))
	t.Cleanup(html.Close)
	shortStream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"time":"2026-03-01T12:30:46Z","method":"Probe","code":"OK"}`)
	}))
	t.Cleanup(shortStream.Close)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `<<not json>>`)
	}))
	t.Cleanup(garbage.Close)
	_, tapAddr := startGatewayTap(t)
	host := func(s *httptest.Server) string { return s.Listener.Addr().String() }

	for _, tc := range []struct {
		name      string
		args      []string
		status    int
		err       string // the error run returns, printed by main; or, for a usage error, stderr
		connected bool   // the header was printed
	}{
		{"unreachable", []string{"--admin", closed}, 1,
			"cannot reach the gateway's admin endpoint at " + closed + ": dial tcp " + closed + ": connect: connection refused; is serve running with admin.listen set?", false},
		{"no tap", []string{"--admin", host(notFound)}, 1, "this gateway serves no tap at " + host(notFound), false},
		{"not a tap", []string{"--admin", host(html)}, 1,
			host(html) + ` answered /debug/tap with "text/html", not a tap stream; is it the gateway's admin endpoint?`, false},
		{"stream ends", []string{"--admin", host(shortStream), "--count", "2"}, 1,
			"the gateway at " + host(shortStream) + " ended the tap after 1 record (is it shutting down?)", true},
		{"garbage", []string{"--admin", host(garbage)}, 1,
			"the tap at " + host(garbage) + " sent a line that is not a call record: invalid character '<' looking for beginning of value", true},
		{"bad code", []string{"--admin", tapAddr, "--code", "Missing"}, exitUsage,
			"csi-gateway tap: code \"Missing\" is not a gRPC code such as NotFound, or one excluded such as !OK\n", false},
		{"bad output", []string{"--admin", tapAddr, "--output", "yaml"}, exitUsage,
			"csi-gateway tap: --output \"yaml\": want table or json\n", false},
		{"bad count", []string{"--admin", tapAddr, "--count", "-1"}, exitUsage,
			"csi-gateway tap: --count -1: want 0 (no limit) or more\n", false},
		{"bad flag", []string{"--admin", tapAddr, "--colour"}, exitUsage,
			"csi-gateway tap: unknown flag: --colour\n", false},
		{"bad address", []string{"--admin", "ftp://x"}, exitUsage,
			"csi-gateway tap: admin address \"ftp://x\": want host:port, e.g. 127.0.0.1:9808\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runTap(t, tc.args...)
			if got := exitStatus(r.err); got != tc.status {
				t.Errorf("exit status %d (%v), want %d", got, r.err, tc.status)
			}
			got := r.stderr
			if tc.status != exitUsage {
				got = fmt.Sprint(r.err)
			}
			if got != tc.err {
				t.Errorf("error:\n%s\nwant:\n%s", got, tc.err)
			}
			if (r.stdout != "") != tc.connected {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
