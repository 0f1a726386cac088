package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
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
	"github.com/csi-gateway/csi-gateway/backends/translate"
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
CSIGW_* environment variables override the file (CSIGW_LOGGING_LEVEL=debug), flags override both.

--check-config reads and checks the configuration as serve would, creating nothing, prints
"configuration OK" or every problem found (one per line, each with its key path), and exits
0 or 1, like nginx -t.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags(), os.Getenv, os.Environ())
			if check, _ := cmd.Flags().GetBool("check-config"); check {
				return reportConfigCheck(err, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
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
	log := newLogger(stderr, slog.Level(cfg.Logging.Level), string(cfg.Logging.Format))
	log.LogAttrs(ctx, slog.LevelInfo, "memory limit", gc.LogAttrs()...)
	tp, prop, stopTracing, err := startTracing(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	metrics := proxy.NewMetrics(cfg.Admin.DriverName, prometheus.NewRegistry())
	// The listeners' TLS material, then the etcd store's and the backends', is loaded before
	// any backend or ledger is opened: a certificate that does not parse stops the start
	// before anything is created on disk (Validate has read every file already).
	policies, tlsServers, err := listenerPolicies(cfg.Listeners, metrics, log)
	defer func() {
		for _, ts := range tlsServers {
			ts.Close()
		}
	}()
	if err != nil {
		return err
	}
	etcdTLS, err := cfg.Tenancy.etcdTLS(log)
	if err != nil {
		return err
	}
	defer func() {
		if etcdTLS != nil { // not handed to the store
			etcdTLS.Close()
		}
	}()
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
	metrics.WatchBackends(bes)
	tap := proxy.NewTap()
	timeouts, err := proxy.NewTimeouts(cfg.Timeouts)
	if err != nil {
		return err
	}
	readyOpts := []proxy.ReadinessOption{proxy.WithReadyMetrics(metrics)}
	var ledger *tenancy.Ledger
	if cfg.Tenancy.enabled() {
		opts, err := cfg.Tenancy.ledgerOptions()
		if err != nil {
			return err
		}
		store, where, err := cfg.Tenancy.openStore(etcdTLS)
		etcdTLS = nil // the store's now, closed by it
		if err != nil {
			return err
		}
		if ledger, err = tenancy.New(store, cfg.Tenancy.quotas(), opts...); err != nil {
			store.Close()
			return err
		}
		defer ledger.Close()
		metrics.WatchTenancy(ledger)
		readyOpts = append(readyOpts, proxy.WithReadyCheck("the tenancy ledger in "+where, ledger.Ready))
		log.Info("tenancy on", "ledger", where, "tenants", len(cfg.Tenancy.Tenants))
		if cfg.Tenancy.TokenKeyFile == "" {
			log.Warn("tenancy.tokenKeyFile is not set: tenants' listing tokens (next_token) are sealed with a random key of this process, so they do not survive a restart and other replicas refuse them (ABORTED: the caller restarts its listing)")
		}
	}
	readiness := proxy.NewReadiness(bes, readyOpts...)
	repairs := make(map[string]proxy.Repair, len(cfg.Backends))
	for name, b := range cfg.Backends {
		repairs[name] = cmp.Or(b.Repair, proxy.DefaultRepair(b.Type))
	}
	var sets []*proxy.DescriptorSet
	for i, d := range cfg.DescriptorSets {
		ds, err := d.load(fmt.Sprintf("descriptorSets[%d]", i))
		if err != nil {
			return err
		}
		sets = append(sets, ds)
	}
	srv, err := proxy.NewServer(proxy.Options{
		Routes: cfg.Routes, Backends: bes, Log: log, SafeContextKeys: cfg.Redaction.SafeContextKeys, Repairs: repairs,
		Metrics: metrics, Observers: []proxy.CallObserver{tap}, Timeouts: timeouts,
		Validation: cfg.Validation, Tenancy: ledger, Transport: cfg.Transport, Limits: cfg.Limits,
		Readiness: readiness, DescriptorSets: sets,
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
	for i, lc := range cfg.Listeners {
		l, err := listen(lc)
		if err != nil {
			srv.Shutdown(context.Background())
			return fmt.Errorf("listeners[%d]: %w", i, err)
		}
		go func() { errc <- srv.Serve(l, policies[i]) }()
		log.Info("listening", "endpoint", lc.Endpoint.String(), "socket_mode", lc.SocketMode.String(), "tls", lc.TLS != nil)
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

// listenerPolicies builds what each listener admits, loading the TLS listeners' files; the
// caller closes the tlsconf.Servers returned, also with an error.
func listenerPolicies(listeners []ListenerConfig, metrics *proxy.Metrics, log *slog.Logger) ([]proxy.ListenerPolicy, []*tlsconf.Server, error) {
	policies := make([]proxy.ListenerPolicy, len(listeners))
	var servers []*tlsconf.Server
	for i, lc := range listeners {
		policy, ts, err := listenerPolicy(fmt.Sprintf("listeners[%d]", i), lc, metrics, log)
		if err != nil {
			return nil, servers, err
		}
		if ts != nil {
			servers = append(servers, ts)
		}
		policies[i] = policy
	}
	return policies, servers, nil
}

// listenerPolicy builds what listener key admits. A TLS listener gets its tlsconf.Server
// (the caller closes it), whose certificate expiry goes to metrics; a plaintext TCP listener,
// and a Unix socket whose name does not end in .sock, are logged as warnings, at every start.
func listenerPolicy(key string, lc ListenerConfig, metrics *proxy.Metrics, log *slog.Logger) (proxy.ListenerPolicy, *tlsconf.Server, error) {
	p := proxy.ListenerPolicy{AllowUIDs: lc.AllowUIDs, AllowGIDs: lc.AllowGIDs, Tenant: lc.Tenant,
		Methods: auth.MethodAllowList{Key: key + ".methods", Patterns: lc.Methods}}
	ep := lc.Endpoint
	if ep.Scheme == "unix" {
		warnSocketName(key, ep, log)
		return p, nil, nil
	}
	if lc.Insecure {
		log.Warn(fmt.Sprintf("%s: plaintext TCP: anyone who can reach %s can call the gateway", key, ep.Address))
		p.Creds = insecure.NewCredentials()
		return p, nil, nil
	}
	ts, err := tlsconf.NewServer(tlsconf.ServerFiles{Cert: lc.TLS.Cert, Key: lc.TLS.Key, ClientCA: lc.TLS.ClientCA},
		tlsconf.WithMinVersion(lc.TLS.MinVersion.version()), tlsconf.WithName(key), tlsconf.WithLogger(log),
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
	return proxy.Listen(lc.Endpoint, lc.SocketMode.Perm())
}

// openBackends builds every configured backend, and the TLS configurations they dial with
// (for SIGHUP to reload), all TLS files first, then the backends in name order. On error it returns those already open, for the caller to close.
func openBackends(cfg Config, log *slog.Logger, tp trace.TracerProvider, prop propagation.TextMapPropagator) (map[string]backends.Backend, []*tlsconf.Client, error) {
	bes := map[string]backends.Backend{}
	var clients []*tlsconf.Client
	byName := map[string]*tlsconf.Client{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Backends)) {
		tc, err := backendTLS(name, cfg.Backends[name], log)
		if err != nil {
			return bes, clients, err
		}
		if tc != nil {
			clients = append(clients, tc)
			byName[name] = tc
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Backends)) {
		be, err := openBackend(name, cfg.Backends[name], byName[name], cfg.Transport, log.With("backend", name), backends.ClientTracing{Provider: tp, Propagator: prop})
		if err != nil {
			return bes, clients, err
		}
		bes[name] = translate.New(name, be, cfg.Backends[name].csiVersion())
	}
	return bes, clients, nil
}

// csiVersion is the CSI version the backend speaks: a grpc driver's configured csiVersion
// (auto when unset), v1 for every other backend.
func (b BackendConfig) csiVersion() translate.Version {
	if b.Type != "grpc" {
		return translate.V1
	}
	return cmp.Or(b.CSIVersion, translate.Auto)
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
	opts := []tlsconf.Option{tlsconf.WithMinVersion(t.MinVersion.version()), tlsconf.WithName(key), tlsconf.WithLogger(log)}
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
func openBackend(name string, b BackendConfig, tc *tlsconf.Client, transport proxy.Transport, log *slog.Logger, tracing backends.ClientTracing) (backends.Backend, error) {
	switch b.Type {
	case "embedded":
		be, err := embedded.OpenBackend(name, b.embeddedConfig(), log)
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		return be, nil
	case "grpc":
		opts := []grpcbackend.Option{grpcbackend.WithTracing(tracing), grpcbackend.WithLogger(log),
			grpcbackend.WithCircuitBreaker(b.CircuitBreaker), grpcbackend.WithUserAgent(gatewayUserAgent())}
		if tc != nil {
			opts = append(opts, grpcbackend.WithTransportCredentials(credentials.NewTLS(tc.Config())))
		}
		opts = append(opts, grpcbackend.WithFrames(transport == proxy.TransportFrames))
		return grpcbackend.New(name, grpcbackend.Config{Target: b.Target, Targets: b.Targets}, opts...)
	case "rest":
		opts := []rest.Option{rest.WithTracing(tracing)}
		if tc != nil {
			opts = append(opts, rest.WithTLSConfig(tc.Config()))
		}
		if b.Protocol == "csp" {
			return openCSP(name, b, log, opts)
		}
		cfg := b.restConfig()
		if w := cfg.PlaintextWarning(name); w != "" {
			log.Warn(w)
		}
		return rest.New(name, cfg, opts...)
	}
	return nil, fmt.Errorf("backends.%s.type: %q is not one of grpc, rest, embedded", name, b.Type)
}

// embeddedConfig is the embedded package's configuration of an embedded backend.
func (b BackendConfig) embeddedConfig() embedded.Config {
	return embedded.Config{
		DataDir: b.DataDir, DriverName: b.DriverName, VendorVersion: buildVersion(), NodeID: b.NodeID,
		KnownNodes: b.KnownNodes, Zone: b.Zone, CapacityBytes: int64(b.Capacity), MaxVolumesPerNode: b.MaxVolumesPerNode,
	}
}

// restConfig is the rest package's configuration of a rest backend (protocol connect).
func (b BackendConfig) restConfig() rest.Config {
	return rest.Config{URLs: b.URLs, RequestTimeout: b.RequestTimeout,
		Breaker: b.CircuitBreaker, Budget: b.RetryBudget, Retry: rest.Retry{
			MaxAttempts: b.Retry.MaxAttempts, MinBackoff: b.Retry.MinBackoff, MaxBackoff: b.Retry.MaxBackoff,
		}, Auth: rest.Auth{BearerTokenFile: b.Auth.BearerTokenFile, UsernameFile: b.Auth.UsernameFile, PasswordFile: b.Auth.PasswordFile},
		AllowSecretsOverPlaintextHTTP: b.AllowSecretsOverPlaintextHTTP,
	}
}

func closeBackends(bes map[string]backends.Backend, log *slog.Logger) {
	for name, b := range bes {
		if err := b.Close(); err != nil {
			log.Warn("closing a backend failed", "backend", name, "error", err)
		}
	}
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
