package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/proxy"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/tlsconf"
)

func newServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "Serve CSI on the configured sockets and forward every call to its backend",
		Long: `Serve CSI on the configured listeners and forward each call to the backend its route names.

With no configuration at all, serve listens on ` + defaultEndpoint + ` (or $CSI_ENDPOINT)
and answers every call from the embedded reference appliance, whose data lives in
` + defaultDataDir + ` (--data-dir). See docs/configuration.md for the file's keys;
CSIGW_* environment variables override the file (CSIGW_LOGGING_LEVEL=debug), flags override both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags(), os.Getenv)
			if err != nil {
				return err
			}
			gc := tuneGC(os.Getenv, memlimit.FromCgroup)
			return serve(cmd.Context(), cfg, gc, cmd.ErrOrStderr())
		},
	}
	bindServeFlags(cmd.Flags())
	return cmd
}

// serve runs the gateway until ctx ends, then drains for cfg.Shutdown.Grace; gc is what
// tuneGC applied, logged first.
func serve(ctx context.Context, cfg Config, gc gcTuning, stderr io.Writer) error {
	log, err := configLogger(cfg.Logging, stderr)
	if err != nil {
		return err
	}
	log.LogAttrs(ctx, slog.LevelInfo, "memory limit", gc.LogAttrs()...)
	tp, prop, stopTracing, err := startTracing(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	bes, backendClients, err := openBackends(cfg, log, tp, prop)
	defer closeBackends(bes, log)
	defer func() {
		for _, c := range backendClients {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	reloadables := make([]tlsReloader, 0, len(backendClients)+len(cfg.Listeners))
	for _, c := range backendClients {
		reloadables = append(reloadables, c)
	}
	metrics := proxy.NewMetrics(cfg.Admin.DriverName, prometheus.NewRegistry())
	metrics.WatchBackends(bes)
	readiness := proxy.NewReadiness(bes, proxy.WithReadyMetrics(metrics))
	tap := proxy.NewTap()
	timeouts, err := proxy.NewTimeouts(cfg.Timeouts)
	if err != nil {
		return err
	}
	validation, err := proxy.ParseValidationMode(cfg.Validation)
	if err != nil {
		return fmt.Errorf("validation: %w", err)
	}
	transport, err := proxy.ParseTransport(cfg.Transport)
	if err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	var ledger *tenancy.Ledger
	if cfg.Tenancy.enabled() {
		opts, err := cfg.Tenancy.ledgerOptions()
		if err != nil {
			return err
		}
		store, where, err := cfg.Tenancy.openStore(log)
		if err != nil {
			return err
		}
		if ledger, err = tenancy.New(store, cfg.Tenancy.quotas(), opts...); err != nil {
			store.Close()
			return err
		}
		defer ledger.Close()
		metrics.WatchTenancy(ledger)
		log.Info("tenancy on", "ledger", where, "tenants", len(cfg.Tenancy.Tenants))
		if cfg.Tenancy.TokenKeyFile == "" {
			log.Warn("tenancy.tokenKeyFile is not set: tenants' listing tokens (next_token) are sealed with a random key of this process, so they do not survive a restart and other replicas refuse them (ABORTED: the caller restarts its listing)")
		}
	}
	repairs := make(map[string]proxy.Repair, len(cfg.Backends))
	for name, b := range cfg.Backends {
		repairs[name], _ = proxy.ParseRepair(b.Repair, b.Type) // validated with the configuration
	}
	srv, err := proxy.NewServer(proxy.Options{
		Routes: cfg.Routes, Backends: bes, Log: log, SafeContextKeys: cfg.Redaction.SafeContextKeys, Repairs: repairs,
		Metrics: metrics, Observers: []proxy.CallObserver{tap}, Timeouts: timeouts,
		Validation: validation, Tenancy: ledger, Transport: transport, Limits: cfg.Limits,
		Readiness: readiness,
		// Always, even with tracing off: it carries callers' trace context through.
		StatsHandlers: []stats.Handler{proxy.TracingStatsHandler(tp, prop)},
	})
	if err != nil {
		return err
	}

	errc := make(chan error, len(cfg.Listeners)+1)
	if cfg.Admin.Listen != "" {
		admin, err := startAdmin(cfg.Admin.Listen, proxy.NewAdminHandler(proxy.AdminOptions{
			Metrics: metrics.Handler(), Readiness: readiness, Tap: tap.Handler(), RemoteTap: cfg.Admin.RemoteTap,
		}), errc)
		if err != nil {
			return err
		}
		// Stopped after the drain, so /metrics, /readyz and the tap see the last calls.
		defer stopAdmin(admin, tap)
		log.Info("admin listening", "address", cfg.Admin.Listen)
	}
	var tlsServers []*tlsconf.Server
	defer func() {
		for _, ts := range tlsServers {
			ts.Close()
		}
	}()
	for i, lc := range cfg.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		policy, ts, err := listenerPolicy(key, lc, metrics, log)
		if err != nil {
			srv.Shutdown(context.Background())
			return err
		}
		if ts != nil {
			tlsServers = append(tlsServers, ts)
		}
		l, err := listen(lc)
		if err != nil {
			srv.Shutdown(context.Background())
			return fmt.Errorf("%s: %w", key, err)
		}
		go func() { errc <- srv.Serve(l, policy) }()
		log.Info("listening", "endpoint", lc.Endpoint, "socket_mode", lc.SocketMode.String(), "tls", ts != nil)
	}
	readiness.SetListening(true)
	log.Info("gateway ready", "backends", len(bes), "routes", len(cfg.Routes))
	go debug.FreeOSMemory() // start-up's garbage: with gcPercent it would stay until the heap grew fivefold

	for _, ts := range tlsServers {
		reloadables = append(reloadables, ts)
	}
	serveErr := waitForStop(ctx, errc, log, cfg.Shutdown.Grace, reloadables)
	readiness.SetListening(false) // out of service before the listeners stop answering
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Grace)
	defer cancel()
	srv.Shutdown(drainCtx)
	if errors.Is(drainCtx.Err(), context.DeadlineExceeded) {
		log.Warn("grace period over: calls still running were cancelled")
	}
	return serveErr
}

// listenerPolicy builds what listener key admits. A TLS listener gets its tlsconf.Server
// (the caller closes it), whose certificate expiry goes to metrics; a plaintext TCP listener,
// and a Unix socket whose name does not end in .sock, are logged as warnings, at every start.
func listenerPolicy(key string, lc ListenerConfig, metrics *proxy.Metrics, log *slog.Logger) (proxy.ListenerPolicy, *tlsconf.Server, error) {
	p := proxy.ListenerPolicy{AllowUIDs: lc.AllowUIDs, AllowGIDs: lc.AllowGIDs, Tenant: lc.Tenant,
		Methods: auth.MethodAllowList{Key: key + ".methods", Patterns: lc.Methods}}
	ep, err := proxy.ParseEndpoint(lc.Endpoint)
	if err != nil {
		return p, nil, err
	}
	if ep.Scheme == "unix" {
		warnSocketName(key, ep, log)
		return p, nil, nil
	}
	if lc.Insecure {
		log.Warn(fmt.Sprintf("%s: plaintext TCP: anyone who can reach %s can call the gateway", key, ep.Address))
		p.Creds = insecure.NewCredentials()
		return p, nil, nil
	}
	minVersion, err := lc.TLS.minVersion()
	if err != nil {
		return p, nil, fmt.Errorf("%s.tls.minVersion: %w", key, err)
	}
	ts, err := tlsconf.NewServer(tlsconf.ServerFiles{Cert: lc.TLS.Cert, Key: lc.TLS.Key, ClientCA: lc.TLS.ClientCA},
		tlsconf.WithMinVersion(minVersion), tlsconf.WithName(key), tlsconf.WithLogger(log),
		tlsconf.WithExpiryHook(metrics.SetCertificateExpiry))
	if err != nil {
		return p, nil, fmt.Errorf("%s.tls: %w", key, err)
	}
	p.Creds = credentials.NewTLS(ts.Config())
	p.Clients = auth.ClientAllowList{Key: key + ".clients", Rules: lc.Clients}
	return p, ts, nil
}

// warnSocketName warns when listener key's Unix socket does not end in .sock: "All UNIX
// endpoints SHALL end with .sock" (spec, Configuration and Operation). The gateway serves it
// all the same: the path is the supervisor's choice (CSI_ENDPOINT, kubelet's registration),
// not the plugin's, and refusing it would take down a deployment that works today at its next
// restart.
func warnSocketName(key string, ep proxy.Endpoint, log *slog.Logger) {
	if !strings.HasSuffix(ep.Address, ".sock") {
		log.Warn(fmt.Sprintf("%s: the socket %s does not end in .sock, as CSI requires of every UNIX endpoint; serving it anyway: rename it where it is set (CSI_ENDPOINT, --endpoint or %s.endpoint) and in what connects to it", key, ep.Address, key))
	}
}

func listen(lc ListenerConfig) (net.Listener, error) {
	ep, err := proxy.ParseEndpoint(lc.Endpoint)
	if err != nil {
		return nil, err
	}
	return proxy.Listen(ep, lc.SocketMode.Perm())
}

// openBackends builds every configured backend, and the TLS configurations they dial with
// (for SIGHUP to reload). On error it returns those already open, for the caller to close.
func openBackends(cfg Config, log *slog.Logger, tp trace.TracerProvider, prop propagation.TextMapPropagator) (map[string]backends.Backend, []*tlsconf.Client, error) {
	bes := map[string]backends.Backend{}
	transport, err := proxy.ParseTransport(cfg.Transport)
	if err != nil {
		return bes, nil, fmt.Errorf("transport: %w", err)
	}
	var clients []*tlsconf.Client
	for name, b := range cfg.Backends {
		tc, err := backendTLS(name, b, log)
		if err != nil {
			return bes, clients, err
		}
		if tc != nil {
			clients = append(clients, tc)
		}
		be, err := openBackend(name, b, tc, transport, log.With("backend", name), tp, prop)
		if err != nil {
			return bes, clients, err
		}
		bes[name] = be
	}
	return bes, clients, nil
}

// backendTLS loads backend name's TLS files, or returns nil when it has none.
func backendTLS(name string, b BackendConfig, log *slog.Logger) (*tlsconf.Client, error) {
	if b.TLS == nil || b.Type == "embedded" {
		return nil, nil
	}
	return clientTLS("backends."+name+".tls", *b.TLS, log)
}

// clientTLS loads the TLS files of something the gateway dials (key names them in errors and
// logs).
func clientTLS(key string, t BackendTLSConfig, log *slog.Logger) (*tlsconf.Client, error) {
	minVersion, err := parseMinVersion(t.MinVersion)
	if err != nil {
		return nil, fmt.Errorf("%s.minVersion: %w", key, err)
	}
	opts := []tlsconf.Option{tlsconf.WithMinVersion(minVersion), tlsconf.WithName(key), tlsconf.WithLogger(log)}
	if t.ServerSPIFFEID != "" {
		opts = append(opts, tlsconf.WithServerSPIFFEID(t.ServerSPIFFEID))
	}
	c, err := tlsconf.NewClient(tlsconf.ClientFiles{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName}, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return c, nil
}

// openBackend builds one backend; tc (nil: none) is the TLS configuration it dials with.
func openBackend(name string, b BackendConfig, tc *tlsconf.Client, transport proxy.Transport, log *slog.Logger, tp trace.TracerProvider, prop propagation.TextMapPropagator) (backends.Backend, error) {
	switch b.Type {
	case "embedded":
		be, err := embedded.OpenBackend(name, embedded.Config{
			DataDir: b.DataDir, DriverName: b.DriverName, VendorVersion: buildVersion(), NodeID: b.NodeID,
			KnownNodes: b.KnownNodes, Zone: b.Zone, CapacityBytes: b.Capacity, MaxVolumesPerNode: b.MaxVolumesPerNode,
		}, log)
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		return be, nil
	case "grpc":
		opts := []grpcbackend.Option{grpcbackend.WithTracerProvider(tp), grpcbackend.WithPropagator(prop), grpcbackend.WithLogger(log),
			grpcbackend.WithCircuitBreaker(b.CircuitBreaker)}
		if tc != nil {
			opts = append(opts, grpcbackend.WithTransportCredentials(credentials.NewTLS(tc.Config())))
		}
		opts = append(opts, grpcbackend.WithFrames(transport == proxy.TransportFrames))
		return grpcbackend.New(name, grpcbackend.Config{Target: b.Target, Targets: b.Targets}, opts...)
	case "rest":
		opts := []rest.Option{rest.WithTracerProvider(tp), rest.WithPropagator(prop)}
		if tc != nil {
			opts = append(opts, rest.WithTLSConfig(tc.Config()))
		}
		if b.Protocol == "csp" {
			return openCSP(name, b, log, opts)
		}
		cfg := rest.Config{URLs: b.URLs, RequestTimeout: b.RequestTimeout,
			Breaker: b.CircuitBreaker, Budget: b.RetryBudget, Retry: rest.Retry{
				MaxAttempts: b.Retry.MaxAttempts, MinBackoff: b.Retry.MinBackoff, MaxBackoff: b.Retry.MaxBackoff,
			}, Auth: rest.Auth{BearerTokenFile: b.Auth.BearerTokenFile, UsernameFile: b.Auth.UsernameFile, PasswordFile: b.Auth.PasswordFile},
			AllowSecretsOverPlaintextHTTP: b.AllowSecretsOverPlaintextHTTP,
		}
		if w := cfg.PlaintextWarning(name); w != "" {
			log.Warn(w)
		}
		return rest.New(name, cfg, opts...)
	}
	return nil, fmt.Errorf("backends.%s.type: %q is not one of grpc, rest, embedded", name, b.Type)
}

func closeBackends(bes map[string]backends.Backend, log *slog.Logger) {
	for name, b := range bes {
		if err := b.Close(); err != nil {
			log.Warn("closing a backend failed", "backend", name, "error", err)
		}
	}
}

func configLogger(c LoggingConfig, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("logging.level: %w", err)
	}
	return newLogger(w, level, c.Format), nil
}

// tlsReloader is a TLS configuration SIGHUP reloads: a listener's tlsconf.Server or a
// backend's tlsconf.Client.
type tlsReloader interface {
	Reload() error
	Name() string
	NotAfter() time.Time
}

// waitForStop waits until ctx ends (SIGTERM, SIGINT) or a listener fails, and returns the
// listener's error. SIGHUP, the signal operators send to reload, reloads the TLS files of
// every listener and backend; a reload that fails is logged and keeps the old material, and
// never stops the gateway.
func waitForStop(ctx context.Context, errc <-chan error, log *slog.Logger, grace time.Duration, tlsConfigs []tlsReloader) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping: draining in-flight calls", "grace", grace)
			return nil
		case err := <-errc:
			log.Error("a listener failed; stopping", "error", err)
			return err
		case <-hup:
			if len(tlsConfigs) == 0 {
				log.Info("SIGHUP: nothing to reload")
			}
			for _, tc := range tlsConfigs {
				if err := tc.Reload(); err != nil {
					log.Error("SIGHUP: TLS reload failed; the previous certificate keeps serving", "tls", tc.Name(), "error", err)
					continue
				}
				log.Info("SIGHUP: TLS files reloaded", "tls", tc.Name(), "not_after", tc.NotAfter())
			}
		}
	}
}
