package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/csi-gateway/csi-gateway/proxy"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// loadFrom loads a configuration from a YAML text (none when empty), flags and environment.
func loadFrom(t *testing.T, yaml string, args []string, env map[string]string) (Config, error) {
	t.Helper()
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	bindServeFlags(flags)
	if yaml != "" {
		file := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", file)
	}
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if strings.HasPrefix(k, "CSIGW_") {
			t.Setenv(k, v) // viper reads these from the process environment
		}
	}
	return loadConfig(flags, func(k string) string { return env[k] }, os.Environ())
}

// underRoot creates an empty file at each of paths under a new temporary directory and
// returns yaml with every "/tls/" and "/secrets/" rewritten to that directory's: Validate reads
// the files a configuration names.
func underRoot(t *testing.T, yaml string, paths ...string) (string, string) {
	t.Helper()
	root := t.TempDir()
	for _, p := range paths {
		writePlaceholder(t, filepath.Join(root, p))
	}
	r := strings.NewReplacer("/tls/", root+"/tls/", "/secrets/", root+"/secrets/")
	return r.Replace(yaml), root
}

// writePlaceholder creates path, and its directories, holding a line of text.
func writePlaceholder(t *testing.T, path string) { writeFileAt(t, path, "placeholder\n") }

// writeFileAt creates path, and its directories, holding content.
func writeFileAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := loadFrom(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Listeners) != 1 || c.Listeners[0].Endpoint.String() != defaultEndpoint || c.Listeners[0].SocketMode.String() != "0660" {
		t.Errorf("listeners: %+v", c.Listeners)
	}
	if b := c.Backends[defaultBackendName]; b.Type != "embedded" || b.DataDir != defaultDataDir {
		t.Errorf("backends: %+v", c.Backends)
	}
	if len(c.Routes) != 1 || c.Routes[0].Backend != defaultBackendName {
		t.Errorf("routes: %+v", c.Routes)
	}
	if c.Logging.Level != logLevel(slog.LevelInfo) || c.Logging.Format != "json" || c.Shutdown.Grace != 30*time.Second {
		t.Errorf("logging %+v, shutdown %+v", c.Logging, c.Shutdown)
	}
	if c.Limits != proxy.DefaultTransportLimits {
		t.Errorf("limits %+v, want the defaults %+v", c.Limits, proxy.DefaultTransportLimits)
	}
}

// TestConfigLimits: the limits keys are read from the file and from CSIGW_LIMITS_*, the
// others keep their defaults.
func TestConfigLimits(t *testing.T) {
	c, err := loadFrom(t, "limits: {maxConcurrentStreams: 50, firstMessageTimeout: 2s, maxStreamResetsPerSecond: 30}", nil,
		map[string]string{"CSIGW_LIMITS_MAXCONNECTIONS": "16"})
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.DefaultTransportLimits
	want.MaxConcurrentStreams, want.FirstMessageTimeout, want.MaxConnections = 50, 2*time.Second, 16
	want.MaxStreamResetsPerSecond = 30
	if c.Limits != want {
		t.Errorf("limits %+v, want %+v", c.Limits, want)
	}
}

// TestConfigAdminRemoteTap: the tap is loopback-only unless admin.remoteTap is set, in the file
// or as CSIGW_ADMIN_REMOTETAP.
func TestConfigAdminRemoteTap(t *testing.T) {
	for _, c := range []struct {
		yaml string
		env  map[string]string
		want bool
	}{
		{"admin: {listen: '127.0.0.1:9808'}", nil, false},
		{"admin: {listen: '127.0.0.1:9808', remoteTap: true}", nil, true},
		{"admin: {listen: '127.0.0.1:9808'}", map[string]string{"CSIGW_ADMIN_REMOTETAP": "true"}, true},
	} {
		cfg, err := loadFrom(t, c.yaml, nil, c.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Admin.RemoteTap != c.want {
			t.Errorf("%s %v: admin.remoteTap = %v, want %v", c.yaml, c.env, cfg.Admin.RemoteTap, c.want)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	yaml := `
listeners:
  - endpoint: unix:///tmp/from-file.sock
    socketMode: "0600"
    allowUIDs: [0, 1000]
backends:
  array1: {type: rest, urls: ["http://127.0.0.1:8080"], retry: {maxAttempts: 3, minBackoff: 10ms, maxBackoff: 1s}}
routes:
  - {methods: ["*"], backend: array1}
logging: {level: warn}
`
	// The file alone.
	c, err := loadFrom(t, yaml, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].Endpoint.String() != "unix:///tmp/from-file.sock" || c.Listeners[0].SocketMode.String() != "0600" || len(c.Listeners[0].AllowUIDs) != 2 {
		t.Errorf("listener from the file: %+v", c.Listeners[0])
	}
	if b := c.Backends["array1"]; b.Retry.MaxAttempts != 3 || b.Retry.MinBackoff != 10*time.Millisecond {
		t.Errorf("backend from the file: %+v", b)
	}
	if c.Logging.Level != logLevel(slog.LevelWarn) {
		t.Errorf("logging.level = %v, want warn from the file", c.Logging.Level)
	}
	// CSIGW_* beats the file; CSI_ENDPOINT sets the first listener; flags beat both.
	c, err = loadFrom(t, yaml, nil, map[string]string{"CSIGW_LOGGING_LEVEL": "debug", "CSI_ENDPOINT": "unix:///tmp/from-env.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Logging.Level != logLevel(slog.LevelDebug) || c.Listeners[0].Endpoint.String() != "unix:///tmp/from-env.sock" {
		t.Errorf("environment: level %v endpoint %v", c.Logging.Level, c.Listeners[0].Endpoint)
	}
	c, err = loadFrom(t, yaml, []string{"--log-level", "error", "--endpoint", "unix:///tmp/from-flag.sock"},
		map[string]string{"CSIGW_LOGGING_LEVEL": "debug", "CSI_ENDPOINT": "unix:///tmp/from-env.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Logging.Level != logLevel(slog.LevelError) || c.Listeners[0].Endpoint.String() != "unix:///tmp/from-flag.sock" {
		t.Errorf("flags: level %v endpoint %v", c.Logging.Level, c.Listeners[0].Endpoint)
	}
}

func TestConfigTLSListener(t *testing.T) {
	yaml, root := underRoot(t, `
listeners:
  - endpoint: tcp://0.0.0.0:9443
    tls: {cert: /tls/tls.crt, key: /tls/tls.key, clientCA: /tls/ca.crt, minVersion: "1.2"}
    clients:
      - uri: spiffe://example.org/ns/kube-system/sa/csi-provisioner
      - dns: node1.example.org
      - cn: csi-attacher
  - endpoint: tcp://127.0.0.1:9000
    insecure: true
`, "/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt")
	c, err := loadFrom(t, yaml, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Listeners[0]
	if l.TLS == nil || *l.TLS != (ListenerTLSConfig{Cert: root + "/tls/tls.crt", Key: root + "/tls/tls.key", ClientCA: root + "/tls/ca.crt", MinVersion: tls.VersionTLS12}) {
		t.Errorf("tls: %+v", l.TLS)
	}
	if len(l.Clients) != 3 || l.Clients[0].URI != "spiffe://example.org/ns/kube-system/sa/csi-provisioner" ||
		l.Clients[1].DNS != "node1.example.org" || l.Clients[2].CN != "csi-attacher" {
		t.Errorf("clients: %+v", l.Clients)
	}
	if v := l.TLS.MinVersion.version(); v != tls.VersionTLS12 {
		t.Errorf("minVersion %#x", v)
	}
	if !c.Listeners[1].Insecure || c.Listeners[1].TLS != nil {
		t.Errorf("insecure listener: %+v", c.Listeners[1])
	}
}

func TestConfigBackendTLSAndAuth(t *testing.T) {
	yaml, root := underRoot(t, `
backends:
  array1:
    type: rest
    urls: [https://array1.example:8443]
    tls: {ca: /tls/ca.crt, cert: /tls/tls.crt, key: /tls/tls.key, serverName: array1.example, minVersion: "1.2"}
    auth: {bearerTokenFile: /secrets/token}
routes: [{methods: ["*"], backend: array1}]
`, "/tls/ca.crt", "/tls/tls.crt", "/tls/tls.key", "/secrets/token")
	c, err := loadFrom(t, yaml, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Backends["array1"]
	want := BackendTLSConfig{CA: root + "/tls/ca.crt", Cert: root + "/tls/tls.crt", Key: root + "/tls/tls.key", ServerName: "array1.example", MinVersion: tls.VersionTLS12}
	if b.TLS == nil || *b.TLS != want {
		t.Errorf("tls: %+v, want %+v", b.TLS, want)
	}
	if b.Auth != (BackendAuthConfig{BearerTokenFile: root + "/secrets/token"}) {
		t.Errorf("auth: %+v", b.Auth)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unknown key", "listners: []", nil, "listners"},
		{"relative socket", "listeners: [{endpoint: unix://csi.sock}]", nil, "listeners[0].endpoint"},
		{"tcp without TLS", "listeners: [{endpoint: tcp://127.0.0.1:9000}]", nil, "listeners[0].tls: required on tcp://127.0.0.1:9000 (cert, key, clientCA); plaintext TCP needs insecure: true"},
		{"tls without clients", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}}]", nil, "listeners[0].clients: required with tls"},
		{"tls without key", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c.pem, clientCA: /ca.pem}, clients: [{cn: a}]}]", nil, "listeners[0].tls.key: required"},
		{"bad minVersion", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c, key: /k, clientCA: /ca, minVersion: '1.1'}, clients: [{cn: a}]}]", nil, `listeners[0].tls.minVersion: "1.1" is not 1.3 or 1.2`},
		{"client rule with two names", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}, clients: [{cn: a}, {cn: b, dns: b.example.org}]}]", nil, "listeners[0].clients[1]: set exactly one of uri, dns or cn"},
		{"client uri not spiffe", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}, clients: [{uri: 'https://x'}]}]", nil, "listeners[0].clients[0]: uri"},
		{"unknown client key", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}, clients: [{spiffe: x}]}]", nil, "spiffe"},
		{"insecure with tls", "listeners: [{endpoint: tcp://127.0.0.1:9000, insecure: true, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}}]", nil, "listeners[0].insecure: true turns TLS off"},
		{"tls on a unix socket", "listeners: [{endpoint: unix:///tmp/a.sock, tls: {cert: /c.pem, key: /k.pem, clientCA: /ca.pem}}]", nil, "listeners[0].tls: only for tcp://"},
		{"allowUIDs on tcp", "listeners: [{endpoint: tcp://127.0.0.1:9000, insecure: true, allowUIDs: [0]}]", nil, "listeners[0].allowUIDs: only for unix://"},
		{"bad socket mode", "listeners: [{endpoint: unix:///tmp/a.sock, socketMode: rw}]", nil, "listeners[0].socketMode"},
		{"backend without type", "backends: {a: {target: unix:///x.sock}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.type"},
		{"bad backend type", "backends: {a: {type: nfs}}\nroutes: [{methods: ['*'], backend: a}]", nil, `"nfs"`},
		{"grpc without target", "backends: {a: {type: grpc}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.target"},
		{"rest without urls", "backends: {a: {type: rest}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.urls"},
		{"backend tls without ca", "backends: {a: {type: grpc, target: 'dns:///h:1', tls: {cert: /c, key: /k}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.tls.ca: required"},
		{"backend tls cert without key", "backends: {a: {type: rest, urls: ['https://h'], tls: {ca: /ca, cert: /c}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.tls.cert: cert and key go together"},
		{"backend tls bad minVersion", "backends: {a: {type: rest, urls: ['https://h'], tls: {ca: /ca, minVersion: '1.0'}}}\nroutes: [{methods: ['*'], backend: a}]", nil, `backends.a.tls.minVersion: "1.0"`},
		{"auth on grpc", "backends: {a: {type: grpc, target: 'unix:///x.sock', auth: {bearerTokenFile: /t}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.auth: only for rest"},
		{"no routes", "backends: {a: {type: grpc, target: unix:///x.sock}}", nil, "routes"},
		{"bad log level", "logging: {level: loud}", nil, "logging.level"},
		{"bad transport", "transport: http2", nil, `transport: "http2" is not frames or grpc`},
		{"frame size below HTTP/2's", "limits: {maxFrameSize: 1024}", nil, "limits.maxFrameSize: 1024 is not between 16384 and 16777215"},
		{"frame size grpc-go cannot read", "transport: grpc\nlimits: {maxFrameSize: 65536}", nil, "limits.maxFrameSize: grpc-go's server reads frames of 16384 bytes at most"},
		{"tiny header list", "limits: {maxHeaderListSize: 512}", nil, "limits.maxHeaderListSize: 512 is below 4096"},
		{"negative connections", "limits: {maxConnections: -1}", nil, "limits.maxConnections: -1 is negative"},
		{"negative reset rate", "limits: {maxStreamResetsPerSecond: -5}", nil, "limits.maxStreamResetsPerSecond: -5 is negative"},
		{"negative write timeout from env", "", map[string]string{"CSIGW_LIMITS_WRITETIMEOUT": "-1s"}, "limits.writeTimeout: -1s is negative"},
		{"unknown limit", "limits: {maxStreams: 5}", nil, "limits.maxStreams: unknown key"},
		{"bad log level from env", "", map[string]string{"CSIGW_LOGGING_LEVEL": "loud"}, "logging.level"},
		{"bad CSI_ENDPOINT", "", map[string]string{"CSI_ENDPOINT": "/no/scheme.sock"}, "listeners[0].endpoint"},
		{"tenant not declared", "listeners: [{endpoint: unix:///tmp/a.sock, tenant: blue}]\ntenancy: {ledger: /t.db, tenants: [{name: green}]}", nil, `listeners[0].tenant: tenant "blue" is not in tenancy.tenants`},
		{"bad tenant name", "tenancy: {ledger: /t.db, tenants: [{name: Blue.Team}]}", nil, "tenancy.tenants[0].name: tenant name \"Blue.Team\""},
		{"tenant listed twice", "tenancy: {ledger: /t.db, tenants: [{name: blue}, {name: blue}]}", nil, "tenancy.tenants[1].name: tenant blue is listed twice"},
		{"negative quota", "tenancy: {ledger: /t.db, tenants: [{name: blue, maxVolumes: -1}]}", nil, "tenancy.tenants[0]: maxVolumes and maxBytes must not be negative"},
		{"tenants without ledger", "tenancy: {tenants: [{name: blue}]}", nil, "tenancy.store: required with tenants"},
		{"ledger and store", "tenancy: {ledger: /t.db, store: {bbolt: {path: /u.db}}}", nil, "tenancy.ledger: is the shorthand of tenancy.store.bbolt.path"},
		{"bbolt and etcd", "tenancy: {store: {bbolt: {path: /t.db}, etcd: {endpoints: ['127.0.0.1:2379']}}}", nil, "tenancy.store: give one of bbolt and etcd"},
		{"bbolt without path", "tenancy: {store: {bbolt: {path: ''}}}", nil, "tenancy.store.bbolt.path: required"},
		{"etcd without endpoints", "tenancy: {store: {etcd: {prefix: /a/}}}", nil, "tenancy.store.etcd.endpoints: required"},
		{"etcd endpoint without port", "tenancy: {store: {etcd: {endpoints: ['etcd-0']}}}", nil, `tenancy.store.etcd.endpoints[0]: "etcd-0" is not host:port`},
		{"etcd https without tls", "tenancy: {store: {etcd: {endpoints: ['https://etcd-0:2379']}}}", nil, "tenancy.store.etcd.endpoints[0]: \"https://etcd-0:2379\": https:// needs tenancy.store.etcd.tls"},
		{"etcd http with tls", "tenancy: {store: {etcd: {endpoints: ['http://etcd-0:2379'], tls: {ca: /ca}}}}", nil, "tenancy.store.etcd.endpoints[0]: \"http://etcd-0:2379\": http:// with tls set"},
		{"etcd tls without ca", "tenancy: {store: {etcd: {endpoints: ['https://etcd-0:2379'], tls: {cert: /c, key: /k}}}}", nil, "tenancy.store.etcd.tls.ca: required"},
		{"etcd tls cert without key", "tenancy: {store: {etcd: {endpoints: ['https://etcd-0:2379'], tls: {ca: /ca, cert: /c}}}}", nil, "tenancy.store.etcd.tls.cert: cert and key go together"},
		{"etcd prefix", "tenancy: {store: {etcd: {endpoints: ['etcd-0:2379'], prefix: /gw}}}", nil, `tenancy.store.etcd.prefix: "/gw" must end in /`},
		{"etcd leaseTTL", "tenancy: {store: {etcd: {endpoints: ['etcd-0:2379'], leaseTTL: 500ms}}}", nil, "tenancy.store.etcd.leaseTTL: 500ms is not a duration of 1s or more"},
		{"etcd requestTimeout", "tenancy: {store: {etcd: {endpoints: ['etcd-0:2379'], requestTimeout: -1s}}}", nil, "tenancy.store.etcd.requestTimeout: -1s is negative"},
		{"etcd unknown key", "tenancy: {store: {etcd: {endpoints: ['etcd-0:2379'], ttl: 5s}}}", nil, "ttl"},
		{"client without tenant among tenants", "listeners: [{endpoint: tcp://127.0.0.1:9000, tls: {cert: /c, key: /k, clientCA: /ca}, clients: [{cn: a, tenant: blue}, {cn: b}]}]\ntenancy: {ledger: /t.db, tenants: [{name: blue}]}", nil, "listeners[0].clients[1].tenant: required: other clients of listeners[0] have tenants"},
		{"csp over http", "backends: {a: {type: rest, protocol: csp, urls: ['http://csp:8080'], auth: {usernameFile: /u, passwordFile: /p}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.urls[0]: http:// would send the CSP's password and token in the clear"},
		{"csp with a token", "backends: {a: {type: rest, protocol: csp, urls: ['https://csp'], auth: {bearerTokenFile: /t}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.auth: a CSP logs in with a user"},
		{"csp with two urls", "backends: {a: {type: rest, protocol: csp, urls: ['https://a', 'https://b'], auth: {usernameFile: /u, passwordFile: /p}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.urls: a csp backend has one URL"},
		{"csp node twice", "backends: {a: {type: rest, protocol: csp, urls: ['https://a'], auth: {usernameFile: /u, passwordFile: /p}, csp: {nodes: [{id: n1, iqns: [x]}, {id: n1, iqns: [y]}]}}}\nroutes: [{methods: ['*'], backend: a}]", nil, `backends.a.csp.nodes[1].id: "n1" is listed twice`},
		{"plaintext opt-in on grpc", "backends: {a: {type: grpc, target: 'unix:///x.sock', allowSecretsOverPlaintextHTTP: true}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.allowSecretsOverPlaintextHTTP: only for rest backends"},
		{"plaintext opt-in on csp", "backends: {a: {type: rest, protocol: csp, urls: ['http://csp:8080'], allowSecretsOverPlaintextHTTP: true, auth: {usernameFile: /u, passwordFile: /p}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.allowSecretsOverPlaintextHTTP: only with protocol: connect; a csp backend has csp.plaintextHTTP"},
		{"csp keys on connect", "backends: {a: {type: rest, urls: ['https://a'], csp: {profile: hpe}}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.csp: only with protocol: csp"},
		{"unknown protocol", "backends: {a: {type: rest, protocol: swordfish, urls: ['https://a']}}\nroutes: [{methods: ['*'], backend: a}]", nil, `backends.a.protocol: "swordfish" is not connect or csp`},
		{"bad CSI_ENDPOINT", "", map[string]string{"CSI_ENDPOINT": "unix://relative.sock"}, `CSI_ENDPOINT: endpoint "unix://relative.sock": a unix socket path must be absolute`},
		{"listener without endpoint", "listeners: [{socketMode: '0660'}]", nil, "listeners[0].endpoint: required"},
		{"unknown repair", "backends: {a: {type: grpc, target: 'unix:///d.sock', repair: always}}\nroutes: [{methods: ['*'], backend: a}]", nil, `backends.a.repair: unknown repair setting "always"; use plugin, spec or none`},
		{"unknown csiVersion", "backends: {a: {type: grpc, target: 'unix:///d.sock', csiVersion: v2}}\nroutes: [{methods: ['*'], backend: a}]", nil, `backends.a.csiVersion: unknown CSI version "v2"; use v1, v0 or auto`},
		{"csiVersion on rest", "backends: {a: {type: rest, urls: ['https://a'], csiVersion: v0}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.csiVersion: only for grpc backends"},
		{"capacity without a whole number", "backends: {e: {type: embedded, capacityBytes: 1.5Ti}}\nroutes: [{methods: ['*'], backend: e}]", nil, "backends.e.capacityBytes: want a positive whole number of bytes"},
		{"bad method pattern", "listeners: [{endpoint: unix:///tmp/a.sock, methods: ['csi.v1.Controller/*']}]", nil, `listeners[0].methods: "csi.v1.Controller/*" is not a full method pattern`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFrom(t, tc.yaml, nil, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestConfigTenancy(t *testing.T) {
	yaml, _ := underRoot(t, `listeners:
  - endpoint: tcp://127.0.0.1:9000
    tls: {cert: /tls/c, key: /tls/k, clientCA: /tls/ca}
    clients: [{uri: "spiffe://example.org/cluster/a", tenant: cluster-a}, {cn: b, tenant: cluster-b}]
    methods: ["/csi.v1.Identity/*", "/csi.v1.Controller/*"]
  - endpoint: unix:///tmp/ops.sock
    tenant: cluster-b
tenancy:
  ledger: /var/lib/csi-gateway/tenancy.db
  tenants:
    - {name: cluster-a, maxVolumes: 100, maxBytes: 1099511627776}
    - name: cluster-b
`, "/tls/c", "/tls/k", "/tls/ca")
	c, err := loadFrom(t, yaml, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tenancy.quotas(); len(got) != 2 || got["cluster-a"].MaxVolumes != 100 || got["cluster-a"].MaxBytes != 1<<40 || got["cluster-b"] != (tenancy.Quota{}) {
		t.Errorf("quotas: %+v", got)
	}
	if l := c.Listeners[0]; l.Clients[0].Tenant != "cluster-a" || l.Clients[1].Tenant != "cluster-b" || len(l.Methods) != 2 {
		t.Errorf("listeners[0]: %+v", l)
	}
	if c.Listeners[1].Tenant != "cluster-b" {
		t.Errorf("listeners[1].tenant: %q", c.Listeners[1].Tenant)
	}
}

// TestConfigDocLimits keeps the limits table of docs/configuration.md and the code together:
// every key of proxy.TransportLimits is documented, with its default.
func TestConfigDocLimits(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## `limits`")
	section, _, _ = strings.Cut(section, "\n## ")
	if !ok {
		t.Fatal("docs/configuration.md has no limits section")
	}
	documented := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) > 3 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			documented[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
		}
	}
	d := reflect.ValueOf(proxy.DefaultTransportLimits)
	for i := range d.NumField() {
		key := d.Type().Field(i).Tag.Get("mapstructure")
		text, ok := documented[key]
		if !ok {
			t.Errorf("limits.%s is not in docs/configuration.md", key)
			continue
		}
		want := fmt.Sprint(d.Field(i).Interface())
		if v, ok := d.Field(i).Interface().(time.Duration); ok {
			if got, err := time.ParseDuration(text); err == nil && got == v {
				want = text // the doc's spelling of the same duration
			}
		}
		if text != want {
			t.Errorf("limits.%s: documented default %q, the code's %s", key, text, want)
		}
	}
	if len(documented) != d.NumField() {
		t.Errorf("documented keys %v, the code has %d", documented, d.NumField())
	}
}

// TestConfigTokenKeyFile: tenancy.tokenKeyFile holds 32 random bytes, raw or in hex; a file
// that cannot be read or holds anything else is an error naming the key, at load.
func TestConfigTokenKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, want string // want: a fragment of the error; "" for a key
	}{
		{"hex", write("hex", strings.Repeat("0f", 32)+"\n"), ""},
		{"raw", write("raw", strings.Repeat("\xf0", 32)), ""},
		{"missing", filepath.Join(dir, "missing"), "tenancy.tokenKeyFile: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"short", write("short", strings.Repeat("0f", 16)), "tenancy.tokenKeyFile: " + filepath.Join(dir, "short") + " holds 32 hex digits; want 32 random bytes, raw or as 64 hex digits"},
		{"empty", write("empty", ""), "tenancy.tokenKeyFile: " + filepath.Join(dir, "empty") + " holds 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadFrom(t, "tenancy: {ledger: /t.db, tokenKeyFile: "+tc.file+", tenants: [{name: blue}]}", nil, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				opts, err := c.Tenancy.ledgerOptions()
				if err != nil || len(opts) != 1 {
					t.Fatalf("options %v, %v; want the key", opts, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestConfigCapacityUnits: capacityBytes takes bytes or a size with a unit, as --capacity does.
func TestConfigCapacityUnits(t *testing.T) {
	for written, want := range map[string]int64{"1099511627776": 1 << 40, `"1Ti"`: 1 << 40, "500Gi": 500 << 30, "10G": 10e9} {
		c, err := loadFrom(t, "backends: {e: {type: embedded, capacityBytes: "+written+"}}\nroutes: [{methods: ['*'], backend: e}]", nil, nil)
		if err != nil {
			t.Fatalf("capacityBytes: %s: %v", written, err)
		}
		if got := int64(c.Backends["e"].Capacity); got != want {
			t.Errorf("capacityBytes: %s = %d, want %d", written, got, want)
		}
	}
}

// TestConfigSizeUnits: the sizes of limits and of tenants' quotas take bytes or a size with a
// unit, as capacityBytes does; a 32-bit limit refuses a size past 32 bits with its key.
func TestConfigSizeUnits(t *testing.T) {
	const base = "backends: {e: {type: embedded}}\nroutes: [{methods: ['*'], backend: e}]\n"
	for _, tc := range []struct {
		limits                    string
		frameSize, headerListSize uint32
	}{
		{"{maxHeaderListSize: 131072}", 16384, 128 << 10},
		{"{maxFrameSize: 16KiB, maxHeaderListSize: 64Ki}", 16 << 10, 64 << 10},
		{"{maxFrameSize: '16384', maxHeaderListSize: 1MiB}", 16384, 1 << 20},
	} {
		c, err := loadFrom(t, base+"limits: "+tc.limits, nil, nil)
		if err != nil {
			t.Fatalf("limits: %s: %v", tc.limits, err)
		}
		if got := c.Limits; uint32(got.MaxFrameSize) != tc.frameSize || uint32(got.MaxHeaderListSize) != tc.headerListSize {
			t.Errorf("limits: %s = %d, %d; want %d, %d", tc.limits, got.MaxFrameSize, got.MaxHeaderListSize, tc.frameSize, tc.headerListSize)
		}
	}
	for written, want := range map[string]int64{"1099511627776": 1 << 40, "1Ti": 1 << 40, "500GiB": 500 << 30, "10G": 10e9} {
		c, err := loadFrom(t, base+"tenancy: {ledger: /t.db, tenants: [{name: blue, maxBytes: "+written+"}]}", nil, nil)
		if err != nil {
			t.Fatalf("maxBytes: %s: %v", written, err)
		}
		if got := int64(c.Tenancy.quotas()["blue"].MaxBytes); got != want {
			t.Errorf("maxBytes: %s = %d, want %d", written, got, want)
		}
	}
	for written, want := range map[string]string{
		"limits: {maxHeaderListSize: 4Gi}":                                   "limits.maxHeaderListSize: ",
		"limits: {maxFrameSize: 16Kx}":                                       "limits.maxFrameSize: ",
		"tenancy: {ledger: /t.db, tenants: [{name: blue, maxBytes: 1.5Ti}]}": "tenancy.tenants[0].maxBytes: ",
	} {
		if _, err := loadFrom(t, base+written, nil, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", written, err, want)
		}
	}
}
