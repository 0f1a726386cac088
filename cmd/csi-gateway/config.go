package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/translate"
	"github.com/csi-gateway/csi-gateway/internal/bytesize"
	"github.com/csi-gateway/csi-gateway/proxy"
)

// Config is the whole configuration of `csi-gateway serve`, read once at start: defaults,
// then the YAML file (--config), then CSIGW_* environment variables, then flags. Keys are
// those of the YAML file (see docs/configuration.md); viper folds them to lower case, so
// backend names are lower case too. A value with a form of its own has a type that parses it
// as it is decoded (UnmarshalText: modes, transports, TLS versions, log levels; durations),
// so nothing parses a configuration string twice. loadConfig refuses unknown keys
// (checkKeys) and runs Validate, which reports every problem before anything is opened.
type Config struct {
	Listeners []ListenerConfig         `mapstructure:"listeners"`
	Backends  map[string]BackendConfig `mapstructure:"backends"`
	Routes    []proxy.Route            `mapstructure:"routes"`
	Logging   LoggingConfig            `mapstructure:"logging"`
	Redaction RedactionConfig          `mapstructure:"redaction"`
	Shutdown  ShutdownConfig           `mapstructure:"shutdown"`
	Admin     AdminConfig              `mapstructure:"admin"`
	Tracing   TracingConfig            `mapstructure:"tracing"`
	Timeouts  proxy.TimeoutConfig      `mapstructure:"timeouts"`
	Limits    proxy.TransportLimits    `mapstructure:"limits"`
	Tenancy   TenancyConfig            `mapstructure:"tenancy"`
	// Validation is enforce, warn or off (docs/validation.md).
	Validation proxy.ValidationMode `mapstructure:"validation"`
	// Transport is how the gateway reads and writes gRPC, on its listeners and to grpc
	// backends: grpc (the default: grpc-go's) or frames (its own HTTP/2 frame relay, an
	// opt-in that saves CPU per call).
	Transport proxy.Transport `mapstructure:"transport"`
	// DescriptorSets are services the gateway does not compile in (csi-addons replication,
	// fencing, a vendor's extension) whose calls it decodes, redacts and scrubs.
	DescriptorSets []DescriptorSetConfig `mapstructure:"descriptorSets"`
}

// DescriptorSetConfig is one protobuf descriptor set (protoc --include_imports
// --descriptor_set_out) and the secret fields of its messages that carry no csi_secret option.
type DescriptorSetConfig struct {
	File         string   `mapstructure:"file"`
	SecretFields []string `mapstructure:"secretFields"`
}

// load reads the set; key names it in errors.
func (d DescriptorSetConfig) load(key string) (*proxy.DescriptorSet, error) {
	if d.File == "" {
		return nil, fmt.Errorf("%s.file: empty; the path of a descriptor set (protoc --include_imports --descriptor_set_out)", key)
	}
	ds, err := proxy.LoadDescriptorSet(d.File, d.SecretFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	return ds, nil
}

// AdminConfig is the HTTP listener for /metrics, /healthz, /readyz and the live tap.
type AdminConfig struct {
	// Listen is host:port; empty turns the admin listener off. Keep it on loopback or a
	// network only operators reach: the tap shows every call (redacted).
	Listen string `mapstructure:"listen"`
	// DriverName is the driver_name label of csigw_operations_seconds. Empty: the name each
	// backend's driver answered GetPluginInfo with ("unknown-driver" until it has).
	DriverName string `mapstructure:"driverName"`
	// RemoteTap serves the tap to peers on any address; false (the default): to loopback
	// peers only, while /metrics, /healthz and /readyz answer every peer.
	RemoteTap bool `mapstructure:"remoteTap"`
}

// TracingConfig selects where OpenTelemetry spans go. The standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER_ARG, OTEL_SERVICE_NAME, ...) apply too.
type TracingConfig struct {
	// Exporter is none, otlp, otlphttp, stdout or console; empty leaves it to
	// OTEL_TRACES_EXPORTER, then to an endpoint (otlp when one is given), then none. See
	// tracing.Config.Exporter.
	Exporter string `mapstructure:"exporter"`
	// Endpoint is the collector's host:port (otlp) or URL (otlphttp); empty leaves it to
	// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT.
	Endpoint string `mapstructure:"endpoint"`
	Insecure bool   `mapstructure:"insecure"` // plaintext to the collector
	// SampleRatio is the fraction of new traces recorded, 0 to 1; negative (the default)
	// leaves it to OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (whose default is all).
	SampleRatio float64 `mapstructure:"sampleRatio"`
}

// ListenerConfig is one socket the gateway serves CSI on.
type ListenerConfig struct {
	Endpoint proxy.Endpoint `mapstructure:"endpoint"`
	// SocketMode is a Unix socket's permission: a quoted octal string; a bare number is refused.
	SocketMode proxy.SocketMode `mapstructure:"socketMode"`
	AllowUIDs  []uint32         `mapstructure:"allowUIDs"`
	AllowGIDs  []uint32         `mapstructure:"allowGIDs"`
	// TLS is required on a tcp:// listener unless Insecure; Clients lists who may call it.
	TLS      *ListenerTLSConfig `mapstructure:"tls"`
	Clients  []auth.ClientRule  `mapstructure:"clients"`
	Insecure bool               `mapstructure:"insecure"` // plaintext TCP: anyone who reaches it may call
	// Methods are the full-method globs its callers may call ("/csi.v1.Controller/*"); empty: all.
	Methods []string `mapstructure:"methods"`
	// Tenant confines every caller whose client rule names no tenant (see TenancyConfig).
	Tenant string `mapstructure:"tenant"`
}

// ListenerTLSConfig are a TCP listener's PEM files, reloaded when they change and on SIGHUP.
type ListenerTLSConfig struct {
	Cert       string        `mapstructure:"cert"`
	Key        string        `mapstructure:"key"`
	ClientCA   string        `mapstructure:"clientCA"`
	MinVersion tlsMinVersion `mapstructure:"minVersion"` // "1.3" (default) or "1.2"
}

// tlsMinVersion is a minVersion key: "1.3" (the default, also when empty) or "1.2".
type tlsMinVersion uint16

// UnmarshalText parses "1.3", "1.2" or "" (1.3).
func (v *tlsMinVersion) UnmarshalText(text []byte) error {
	switch string(text) {
	case "", "1.3":
		*v = tls.VersionTLS13
	case "1.2":
		*v = tls.VersionTLS12
	default:
		return fmt.Errorf("%q is not 1.3 or 1.2", text)
	}
	return nil
}

// version returns the tls.VersionTLS* constant; the zero value (key not set) is TLS 1.3.
func (v tlsMinVersion) version() uint16 {
	if v == 0 {
		return tls.VersionTLS13
	}
	return uint16(v)
}

// BackendTLSConfig are the PEM files a grpc or rest backend is dialled with, reloaded when
// they change and on SIGHUP.
type BackendTLSConfig struct {
	CA         string        `mapstructure:"ca"`         // the CA bundle the backend's certificate must chain to (pinned)
	Cert       string        `mapstructure:"cert"`       // the gateway's client certificate (with key; optional)
	Key        string        `mapstructure:"key"`        //
	ServerName string        `mapstructure:"serverName"` // the name the backend's certificate must carry; default: the host dialled
	MinVersion tlsMinVersion `mapstructure:"minVersion"` // "1.3" (default) or "1.2"
	// ServerSPIFFEID, when set, is the URI SAN the backend's certificate must carry instead
	// of a matching DNS name.
	ServerSPIFFEID string `mapstructure:"serverSPIFFEID"`
}

// BackendAuthConfig are a rest backend's credentials files, read again when they change.
type BackendAuthConfig struct {
	BearerTokenFile string `mapstructure:"bearerTokenFile"`
	UsernameFile    string `mapstructure:"usernameFile"`
	PasswordFile    string `mapstructure:"passwordFile"`
}

// BackendConfig is one backend; which fields apply depends on Type.
type BackendConfig struct {
	Type string `mapstructure:"type"` // grpc | rest | embedded
	// Repair is what the gateway may change in the backend's answers: plugin, spec or none
	// (proxy.Repair, docs/tap.md); "" is spec for grpc, plugin for the others.
	Repair proxy.Repair `mapstructure:"repair"`
	// grpc
	Target  string   `mapstructure:"target"`
	Targets []string `mapstructure:"targets"` // failover order; Target is the one-target shorthand
	// CSIVersion is the CSI version the driver speaks: v1, v0 or auto ("": auto, found out
	// from the driver); calls of the other version are translated (translate.Backend).
	CSIVersion translate.Version `mapstructure:"csiVersion"`
	// rest
	URLs     []string    `mapstructure:"urls"`
	Protocol string      `mapstructure:"protocol"`
	Retry    RetryConfig `mapstructure:"retry"`
	// RequestTimeout bounds one HTTP attempt when the caller sets no deadline.
	RequestTimeout time.Duration `mapstructure:"requestTimeout"`
	// RetryBudget (rest) bounds retries to a fraction of calls.
	RetryBudget backends.BudgetConfig `mapstructure:"retryBudget"`
	// Auth (rest) are the credentials files sent to the appliance; https:// URLs only.
	Auth BackendAuthConfig `mapstructure:"auth"`
	// CSP (rest with protocol csp) describes the Container Storage Provider.
	CSP CSPConfig `mapstructure:"csp"`
	// AllowSecretsOverPlaintextHTTP (rest with protocol connect) sends requests that carry
	// CSI secrets to http:// URLs, in the clear; without it they are refused.
	AllowSecretsOverPlaintextHTTP bool `mapstructure:"allowSecretsOverPlaintextHTTP"`
	// grpc and rest
	CircuitBreaker backends.BreakerConfig `mapstructure:"circuitBreaker"`
	// TLS is required for dns:/// targets and verifies https:// URLs against a pinned CA.
	TLS *BackendTLSConfig `mapstructure:"tls"`
	// embedded
	DataDir    string        `mapstructure:"dataDir"`
	DriverName string        `mapstructure:"driverName"`
	NodeID     string        `mapstructure:"nodeId"`
	KnownNodes []string      `mapstructure:"knownNodes"`
	Zone       string        `mapstructure:"zone"`
	Capacity   bytesize.Size `mapstructure:"capacityBytes"`
	// MaxVolumesPerNode caps publications per node (0 = no limit).
	MaxVolumesPerNode int64 `mapstructure:"maxVolumesPerNode"`
}

// RetryConfig bounds a REST backend's retries.
type RetryConfig struct {
	MaxAttempts int           `mapstructure:"maxAttempts"`
	MinBackoff  time.Duration `mapstructure:"minBackoff"`
	MaxBackoff  time.Duration `mapstructure:"maxBackoff"`
}

// LoggingConfig sets the log's level and format.
type LoggingConfig struct {
	Level  logLevel  `mapstructure:"level"`  // debug | info | warn | error
	Format logFormat `mapstructure:"format"` // json | text
}

// logLevel is logging.level: debug, info, warn or error.
type logLevel slog.Level

// UnmarshalText parses a level (parseLevel).
func (l *logLevel) UnmarshalText(text []byte) error {
	v, err := parseLevel(string(text))
	if err == nil {
		*l = logLevel(v)
	}
	return err
}

// logFormat is logging.format: json or text.
type logFormat string

// UnmarshalText accepts json and text.
func (f *logFormat) UnmarshalText(text []byte) error {
	if s := string(text); s != "json" && s != "text" {
		return fmt.Errorf("%q is not json or text", s)
	}
	*f = logFormat(text)
	return nil
}

// RedactionConfig lists what may be logged in clear.
type RedactionConfig struct {
	// SafeContextKeys are volume_context / publish_context keys whose values are not secret.
	SafeContextKeys []string `mapstructure:"safeContextKeys"`
}

// ShutdownConfig bounds the drain on SIGTERM.
type ShutdownConfig struct {
	Grace time.Duration `mapstructure:"grace"`
}

// Defaults when nothing else is configured: one Unix socket, the embedded appliance behind it.
const (
	defaultSocket      = "/run/csi-gateway/csi.sock"
	defaultEndpoint    = "unix://" + defaultSocket
	defaultDataDir     = "/var/lib/csi-gateway"
	defaultBackendName = "embedded"
)

// bindServeFlags declares serve's flags; each overrides one configuration key.
func bindServeFlags(f *pflag.FlagSet) {
	f.String("config", "", "YAML configuration file")
	f.Bool("check-config", false, "check the configuration, print every problem, and exit 0 (valid) or 1, creating nothing")
	f.String("endpoint", "", "endpoint of the first listener (overrides CSI_ENDPOINT and the file)")
	f.Var(new(proxy.SocketMode), "socket-mode", "permission bits of the first listener's Unix socket, in octal: 0660, 660 or 0o660 (overrides CSIGW_SOCKET_MODE and the file)")
	f.String("data-dir", "", "data directory of the default embedded backend (default "+defaultDataDir+")")
	f.String("log-level", "", "debug, info, warn or error (default info)")
	f.String("log-format", "", "json or text (default json)")
	f.String("admin", "", "listen address of the admin endpoints (/metrics, /healthz, /readyz, tap), e.g. 127.0.0.1:9808")
}

// loadConfig reads the configuration in rising precedence: defaults, file, CSIGW_* variables,
// CSI_ENDPOINT (for the first listener), flags. Every error names the key (or the variable)
// at fault; a CSIGW_* variable of environ that sets nothing is one (checkEnv).
func loadConfig(flags *pflag.FlagSet, getenv func(string) string, environ []string) (Config, error) {
	v := viper.New()
	v.SetDefault("logging.level", "info")
	v.SetDefault("logging.format", "json")
	v.SetDefault("shutdown.grace", "30s")
	v.SetDefault("redaction.safeContextKeys", []string{})
	v.SetDefault("validation", string(proxy.ValidationEnforce))
	v.SetDefault("transport", string(proxy.DefaultTransport))
	v.SetDefault("timeouts.default", "0s")
	v.SetDefault("timeouts.max", "0s")
	v.SetDefault("admin.listen", "")
	v.SetDefault("admin.driverName", "")
	v.SetDefault("admin.remoteTap", false)
	v.SetDefault("tracing.exporter", "")
	v.SetDefault("tracing.endpoint", "")
	v.SetDefault("tracing.insecure", false)
	v.SetDefault("tracing.sampleRatio", -1.0)
	setLimitDefaults(v)
	v.SetEnvPrefix("CSIGW")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	var errs configErrors
	if file, _ := flags.GetString("config"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", file, err)
		}
		if err := checkKeys(data, &errs); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", file, err)
		}
	}
	checkEnv(environ, v.AllKeys(), &errs)
	var c Config
	// checkKeys refused unknown keys with their paths: mapstructure's ErrorUnused would say
	// "'main.Config' has invalid keys" and miss those whose value is empty.
	if err := v.Unmarshal(&c, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		textHook, mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(","),
	))); err != nil {
		var decodeErrs configErrors
		addDecodeErrors(err, &decodeErrs)
		// mapstructure walks maps in random order: sorted, the same file gives the same lines.
		slices.SortStableFunc(decodeErrs.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		errs.errs = append(errs.errs, decodeErrs.errs...)
		// A value of the wrong type is not there to be checked: its key's error stands for it.
		return Config{}, errs.err()
	}
	if s, _ := flags.GetString("log-level"); s != "" {
		if err := c.Logging.Level.UnmarshalText([]byte(s)); err != nil {
			errs.addf("--log-level", "%v", err)
		}
	}
	if s, _ := flags.GetString("log-format"); s != "" {
		if err := c.Logging.Format.UnmarshalText([]byte(s)); err != nil {
			errs.addf("--log-format", "%v", err)
		}
	}
	if s, _ := flags.GetString("admin"); s != "" {
		c.Admin.Listen = s
	}
	endpoint, from := flags.Lookup("endpoint").Value.String(), "--endpoint"
	if endpoint == "" {
		endpoint, from = getenv("CSI_ENDPOINT"), "CSI_ENDPOINT"
	}
	if endpoint != "" {
		if len(c.Listeners) == 0 {
			c.Listeners = []ListenerConfig{{}}
		}
		if err := c.Listeners[0].Endpoint.UnmarshalText([]byte(endpoint)); err != nil {
			errs.addf(from, "%v", err)
		}
	}
	dataDir, _ := flags.GetString("data-dir")
	c.applyDefaults(dataDir)
	errs.add(c.overrideSocketMode(flags, getenv))
	c.check(&errs)
	return c, errs.err()
}

// applyDefaults fills what the configuration leaves out: a listener on the default socket,
// and the embedded appliance as the one backend for every method.
func (c *Config) applyDefaults(dataDir string) {
	if len(c.Listeners) == 0 {
		c.Listeners = []ListenerConfig{{Endpoint: proxy.Endpoint{Scheme: "unix", Address: defaultSocket}}}
	}
	if len(c.Backends) == 0 {
		c.Backends = map[string]BackendConfig{defaultBackendName: {Type: "embedded"}}
		if len(c.Routes) == 0 {
			c.Routes = []proxy.Route{{Methods: []string{"*"}, Backend: defaultBackendName}}
		}
	}
	for name, b := range c.Backends {
		if b.Type == "embedded" && b.DataDir == "" {
			b.DataDir = defaultDataDir
			if dataDir != "" {
				b.DataDir = dataDir
			}
			c.Backends[name] = b
		}
	}
}

// setLimitDefaults makes every limits key known to viper with its default, so that
// CSIGW_LIMITS_* variables set it too.
func setLimitDefaults(v *viper.Viper) {
	d := proxy.DefaultTransportLimits
	for key, val := range map[string]any{
		"maxFrameSize": d.MaxFrameSize, "maxHeaderListSize": d.MaxHeaderListSize,
		"maxConcurrentStreams": d.MaxConcurrentStreams, "maxConnections": d.MaxConnections,
		"firstMessageTimeout": d.FirstMessageTimeout, "writeTimeout": d.WriteTimeout, "keepaliveMinTime": d.KeepaliveMinTime,
		"maxStreamResetsPerSecond": d.MaxStreamResetsPerSecond,
	} {
		v.SetDefault("limits."+key, val)
	}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}
