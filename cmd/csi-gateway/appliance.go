package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
	"github.com/csi-gateway/csi-gateway/proxy"
	"github.com/csi-gateway/csi-gateway/tracing"
)

// applianceOptions are the flags of `csi-gateway appliance`.
type applianceOptions struct {
	endpoint   string
	httpAddr   string
	socketMode proxy.SocketMode
	grace      time.Duration
	logLevel   slog.Level
	cfg        embedded.Config
}

func newApplianceCommand() *cobra.Command {
	d := embedded.DefaultConfig()
	d.VendorVersion = buildVersion()
	o := applianceOptions{cfg: d}
	cmd := &cobra.Command{
		Use:   "appliance --data DIR --endpoint unix:///PATH.sock [--http 127.0.0.1:PORT]",
		Short: "Serve the reference appliance as a CSI driver (gRPC) and, with --http, over HTTP",
		Long: `Serve the reference appliance: a durable, file-backed CSI storage service.

Volumes are sparse image files under --data; the state is one file replaced atomically on
every change, so a crash loses nothing that was acknowledged. The CSI services (Identity,
Controller, GroupController, Node, csi-addons VolumeGroup) are served on --endpoint, and with
--http also in the Connect protocol's unary JSON form (see docs/rest-protocol.md).
Node calls mount for real and need root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveAppliance(cmd.Context(), o, newLogger(cmd.ErrOrStderr(), o.logLevel, "json"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cfg.DataDir, "data", "", "directory for the state file and the images (required)")
	f.StringVar(&o.endpoint, "endpoint", "", "gRPC endpoint: unix:///path.sock or tcp://host:port (required)")
	f.StringVar(&o.httpAddr, "http", "", "also serve the Connect JSON protocol on this host:port")
	f.Var(&o.socketMode, "socket-mode", "permission bits of the Unix socket, in octal: 0660, 660 or 0o660")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "how long in-flight calls may finish after SIGTERM")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	f.StringVar(&o.cfg.DriverName, "driver-name", d.DriverName, "plugin name reported by GetPluginInfo")
	f.StringVar(&o.cfg.NodeID, "node-id", d.NodeID, "node ID reported by NodeGetInfo")
	f.StringSliceVar(&o.cfg.KnownNodes, "known-node", nil, "further node IDs ControllerPublishVolume accepts (repeatable)")
	f.StringVar(&o.cfg.Zone, "zone", d.Zone, "topology zone of every volume and node")
	sizeVar(f, &o.cfg.CapacityBytes, "capacity", "total size the appliance may provision: bytes, or with a unit: 500Gi, 1Ti, 2T")
	sizeVar(f, &o.cfg.MaxVolumeBytes, "max-volume-size", "largest volume: bytes, or with a unit: 100Gi, 1Ti")
	f.Int64Var(&o.cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "volumes one node may have published (0 = no limit)")
	cmd.MarkFlagRequired("data")
	cmd.MarkFlagRequired("endpoint")
	return cmd
}

// serveAppliance runs the appliance until ctx ends, then drains: in-flight calls get o.grace
// to finish before they are cut off, and the socket is removed.
func serveAppliance(ctx context.Context, o applianceOptions, log *slog.Logger) error {
	ep, err := proxy.ParseEndpoint(o.endpoint)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	log = slog.New(traceIDHandler{log.Handler()})
	a, err := embedded.Open(o.cfg, log)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	defer a.Close()

	srv := grpc.NewServer(acceptTraceContext(), grpc.ChainUnaryInterceptor(logCalls(log)))
	a.Register(srv)
	lis, err := proxy.Listen(ep, o.socketMode.Perm())
	if err != nil {
		return fmt.Errorf("--endpoint %s: %w", ep, err)
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(lis) }()

	var httpSrv *http.Server
	if o.httpAddr != "" {
		hl, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			srv.Stop()
			return fmt.Errorf("--http %s: %w", o.httpAddr, err)
		}
		var services connect.Registrar
		a.Register(&services)
		httpSrv = &http.Server{Handler: logHTTPCalls(log, connect.NewHandler(services.Services())), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- httpSrv.Serve(hl) }()
		log.Info("serving HTTP (Connect JSON)", "address", hl.Addr().String())
	}
	cfg := a.Config()
	log.Info("appliance ready", "endpoint", ep.String(), "data", cfg.DataDir, "driver", cfg.DriverName, "node_id", cfg.NodeID)

	select {
	case <-ctx.Done():
		log.Info("stopping: draining in-flight calls", "grace", o.grace)
	case err := <-errc:
		srv.Stop()
		return fmt.Errorf("serve: %w", err)
	}
	drained := make(chan struct{})
	go func() {
		if httpSrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.grace)
			httpSrv.Shutdown(sctx)
			cancel()
		}
		srv.GracefulStop()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(o.grace):
		log.Warn("grace period over: cancelling the calls still running")
		srv.Stop()
		if httpSrv != nil {
			httpSrv.Close()
		}
		<-drained
	}
	return nil
}

// acceptTraceContext takes the caller's W3C trace context (traceparent, tracestate, baggage)
// from each call's metadata into its context, where the call's log lines find the trace ID
// (traceIDHandler). The appliance records no spans of its own: the provider is the no-op one,
// which carries the caller's span context and nothing else.
func acceptTraceContext() grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithPropagators(tracing.Propagator()),
	))
}

// logHTTPCalls writes one line per HTTP request, like logCalls for gRPC: method (the URL
// path, which names the CSI method), HTTP status and duration, and the caller's trace ID when
// the request carries a W3C traceparent header. The connect handler below it runs no
// interceptor, so this is the HTTP side's only call log. Bodies are never logged.
func logHTTPCalls(log *slog.Logger, next http.Handler) http.Handler {
	prop := tracing.Propagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		level := slog.LevelInfo
		if sw.status >= 400 {
			level = slog.LevelWarn
		}
		log.LogAttrs(ctx, level, "call", slog.String("method", r.URL.Path), slog.String("protocol", "http"),
			slog.Int("http_status", sw.status), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// traceIDHandler adds trace_id to every record logged with a context that carries a span
// context (the caller's, taken by acceptTraceContext or logHTTPCalls), so that the gateway's
// trace of a call can be followed into the appliance's log.
type traceIDHandler struct{ slog.Handler }

func (h traceIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceIDHandler) WithGroup(name string) slog.Handler {
	return traceIDHandler{h.Handler.WithGroup(name)}
}
