package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
)

// relaySpec is one of the ways of reaching the driver that issue #8 compares.
type relaySpec struct {
	key         string // a to e, as the issue names them; f to h are the bench's own
	name        string
	description string
	// features is the csi-gateway relay's feature set (passthroughFeatures or fullFeatures);
	// empty for a relay that is not csi-gateway.
	features string
	// transport is the csi-gateway relay's `transport` key.
	transport string
}

// relaySpecs are every relay: the issue's, with the gateway on its other transport beside it.
var relaySpecs = []relaySpec{
	{key: "a", name: "direct", description: "the client calls the driver's socket itself"},
	{key: "b", name: "passthrough", description: "csi-gateway on grpc-go (`transport: grpc`, the default), validation off, logging at error, no tracing (admin listener on, for /metrics: it is off the call path)",
		features: passthroughFeatures, transport: "grpc"},
	{key: "c", name: "full", description: "csi-gateway on grpc-go (`transport: grpc`, the default), validation enforce, info log of every call to a file, tracing sampled at 1.0 (OTLP/gRPC to a collector on loopback), metrics",
		features: fullFeatures, transport: "grpc"},
	{key: "g", name: "passthrough-frames", description: "(b) on the gateway's own HTTP/2 transport (`transport: frames`, internal/h2grpc) on its listener and to the driver",
		features: passthroughFeatures, transport: "frames"},
	{key: "h", name: "full-frames", description: "(c) on the gateway's own HTTP/2 transport (`transport: frames`)",
		features: fullFeatures, transport: "frames"},
	{key: "d", name: "haproxy", description: "haproxy, mode http, proto h2 on the listening and the driver's socket"},
	{key: "e", name: "socat", description: "socat UNIX-LISTEN,fork to UNIX-CONNECT: a byte relay, one process per connection"},
	{key: "f", name: "floor", description: "csi-gateway's HTTP/2 server and client (internal/h2grpc) with nothing between them: the transport alone, in Go"},
}

// traced reports whether the relay is a csi-gateway that exports spans (the full features).
func (s relaySpec) traced() bool { return s.features == fullFeatures }

// relay is a running relay (or the direct path) and the client connection the load uses.
type relay struct {
	relaySpec
	socket string
	proc   *process // nil for direct, and for a relay not installed
	// missing says why the relay is not measured ("not installed"); empty when it is.
	missing string
	// admin is the gateway's admin listener (host:port), for csigw_go_memstats_mallocs_total.
	admin string
	// scrapeMallocs is what one /metrics scrape allocates in the gateway, taken off each window.
	scrapeMallocs float64
	// collector receives the full gateway's spans.
	collector *spanCollector
	// ready is how long after exec the relay answered its first Probe.
	ready   time.Duration
	rssIdle int64
	conn    *grpc.ClientConn
	clients clients
}

// readyTimeout bounds how long a relay may take to answer its first Probe.
const readyTimeout = 20 * time.Second

// gatewayConfig is the part of the gateway's configuration every gateway relay shares: one
// socket, the driver behind it for every method, the admin listener, a short drain, and the
// transport.
const gatewayConfig = `listeners:
  - endpoint: unix://%s
backends:
  driver:
    type: grpc
    target: unix://%s
routes:
  - {methods: ["*"], backend: driver}
admin: {listen: "%s"}
shutdown: {grace: 1s}
transport: %s
`

// passthroughFeatures turns every optional feature off.
const passthroughFeatures = `validation: "off"
logging: {level: error, format: json}
tracing: {exporter: none}
`

// fullFeatures turns every feature on; spans go over OTLP/gRPC to the collector at %s, as
// they would to an OpenTelemetry Collector in production.
const fullFeatures = `validation: enforce
logging: {level: info, format: json}
tracing: {exporter: otlp, endpoint: "%s", insecure: true, sampleRatio: 1.0}
`

// haproxyConfig relays HTTP/2 from the listening socket to the driver's.
const haproxyConfig = `global
    maxconn 1000
defaults
    mode http
    timeout connect 5s
    timeout client 1m
    timeout server 1m
frontend csi
    bind unix@%s proto h2
    default_backend driver
backend driver
    server driver unix@%s proto h2
`

// startRelay starts spec's relay in front of the driver on backendSocket, waits until it
// answers Probe, and connects the load's client to it. gateway is the csi-gateway binary;
// tools maps haproxy and socat to their paths ("" when not installed).
func startRelay(ctx context.Context, spec relaySpec, dir, backendSocket, gateway string, tools map[string]string) (*relay, error) {
	r := &relay{relaySpec: spec, socket: filepath.Join(dir, spec.name+".sock")}
	var err error
	switch {
	case spec.name == "direct":
		r.socket = backendSocket
	case spec.features != "":
		err = r.startGateway(dir, backendSocket, gateway)
	case spec.name == "haproxy":
		if tools["haproxy"] == "" {
			r.missing = "not installed"
			return r, nil
		}
		cfg := filepath.Join(dir, "haproxy.cfg")
		if err = os.WriteFile(cfg, fmt.Appendf(nil, haproxyConfig, r.socket, backendSocket), 0o600); err == nil {
			r.proc, err = startProcess(dir, spec.name, nil, tools["haproxy"], "-db", "-f", cfg)
		}
	case spec.name == "floor":
		var self string
		if self, err = os.Executable(); err == nil {
			// The gateway's own GC defaults (cmd/csi-gateway/gc.go), so that the two compare.
			env := []string{floorEnv + "=" + r.socket + " " + backendSocket, "GOGC=400", "GOMEMLIMIT=48MiB"}
			r.proc, err = startProcess(dir, spec.name, env, self)
		}
	case spec.name == "socat":
		if tools["socat"] == "" {
			r.missing = "not installed"
			return r, nil
		}
		r.proc, err = startProcess(dir, spec.name, nil, tools["socat"],
			"UNIX-LISTEN:"+r.socket+",fork", "UNIX-CONNECT:"+backendSocket)
	default:
		err = fmt.Errorf("no relay %q", spec.name)
	}
	if err != nil {
		return nil, err
	}
	if r.proc != nil {
		if r.ready, err = awaitProbe(ctx, r.proc, r.socket, readyTimeout); err != nil {
			r.stop()
			return nil, err
		}
	}
	if err := r.connect(ctx); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func (r *relay) startGateway(dir, backendSocket, gateway string) error {
	admin, err := freeLoopbackAddress()
	if err != nil {
		return err
	}
	r.admin = admin
	features := r.features
	if r.traced() {
		if r.collector, err = startSpanCollector(); err != nil {
			return err
		}
		features = fmt.Sprintf(r.features, r.collector.addr)
	}
	cfg := filepath.Join(dir, r.name+".yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, gatewayConfig+features, r.socket, backendSocket, admin, r.transport), 0o600); err != nil {
		return err
	}
	r.proc, err = startProcess(dir, r.name, nil, gateway, "serve", "--config", cfg)
	return err
}

// connect opens the load's connection, makes one call on it (so the relay's idle memory
// includes a connection), then records the relay's idle RSS and what a /metrics scrape costs.
func (r *relay) connect(ctx context.Context) error {
	conn, err := dial(r.socket)
	if err != nil {
		return err
	}
	r.conn, r.clients = conn, newClients(conn)
	if err := callProbe(ctx, r.clients, probeRequest(0)); err != nil {
		return fmt.Errorf("%s: Probe: %w", r.name, err)
	}
	if r.proc == nil {
		return nil
	}
	time.Sleep(100 * time.Millisecond) // let the start-up garbage be collected
	if r.rssIdle, _, err = treeMemory(r.proc.pid()); err != nil {
		return err
	}
	if r.admin != "" {
		r.scrapeMallocs, err = scrapeCost(ctx, r.admin)
	}
	return err
}

// stop closes the connection and stops the relay's process.
func (r *relay) stop() {
	if r.conn != nil {
		r.conn.Close()
	}
	if r.proc != nil {
		r.proc.stop()
	}
	if r.collector != nil {
		r.collector.stop()
	}
}

// freeLoopbackAddress returns a 127.0.0.1 port that was free a moment ago.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
