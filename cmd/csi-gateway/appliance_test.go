package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// applianceLog is the appliance's log, written by its goroutines while the test reads it.
type applianceLog struct{ testutil.SyncBuffer }

// calls returns the "call" lines of the log.
func (l *applianceLog) calls() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "call" {
			out = append(out, rec)
		}
	}
	return out
}

// TestApplianceLogsCallerTraceID: the appliance's call lines, gRPC and HTTP, carry the trace
// ID of the caller's traceparent, and none when the caller sent none.
func TestApplianceLogsCallerTraceID(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	o := applianceOptions{endpoint: "unix://" + sock, httpAddr: httpAddr, grace: time.Second,
		cfg: embedded.Config{DataDir: filepath.Join(dir, "data")}}
	var logBuf applianceLog
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveAppliance(ctx, o, slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveAppliance = %v", err)
		}
	})

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const (
		grpcTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		httpTrace = "0af7651916cd43dd8448eb211c80319c"
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		cctx = metadata.AppendToOutgoingContext(cctx, "traceparent", "00-"+grpcTrace+"-00f067aa0ba902b7-01")
		_, err := csi.NewIdentityClient(conn).Probe(cctx, &csi.ProbeRequest{})
		ccancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Probe: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	post := func(traceparent string) {
		t.Helper()
		var resp *http.Response
		for {
			req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/csi.v1.Identity/GetPluginInfo", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			if traceparent != "" {
				req.Header.Set("traceparent", traceparent)
			}
			resp, err = http.DefaultClient.Do(req)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // the HTTP listener opens just after the gRPC one
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GetPluginInfo over HTTP: %s", resp.Status)
		}
	}
	post("00-" + httpTrace + "-b7ad6b7169203331-01")
	post("")

	want := []struct{ method, protocol, traceID string }{
		{"/csi.v1.Identity/Probe", "", grpcTrace},
		{"/csi.v1.Identity/GetPluginInfo", "http", httpTrace},
		{"/csi.v1.Identity/GetPluginInfo", "http", ""},
	}
	var got []map[string]any
	for len(got) < len(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = logBuf.calls()
	}
	// Probe may have been tried (and logged without the trace ID) before the socket was ready:
	// only the last Probe line counts.
	for len(got) > len(want) && got[1]["method"] == "/csi.v1.Identity/Probe" {
		got = got[1:]
	}
	if len(got) != len(want) {
		t.Fatalf("call lines %v, want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		id, _ := g["trace_id"].(string)
		protocol, _ := g["protocol"].(string)
		if g["method"] != w.method || protocol != w.protocol || id != w.traceID {
			t.Errorf("call line %d = %v, want method %s protocol %q trace_id %q", i, g, w.method, w.protocol, w.traceID)
		}
	}
	if s, _ := got[1]["http_status"].(float64); s != http.StatusOK {
		t.Errorf("HTTP call line %v, want http_status 200", got[1])
	}
}

func TestTraceIDHandlerKeepsAttrsAndGroups(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(traceIDHandler{slog.NewJSONHandler(&buf, nil)}).With("component", "x").WithGroup("g")
	log.InfoContext(context.Background(), "no trace", "k", 1)
	if strings.Contains(buf.String(), "trace_id") || !strings.Contains(buf.String(), `"component":"x","g":{"k":1}`) {
		t.Errorf("log = %s", buf.String())
	}
}
