package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestBrokenConfigs runs the real binary on broken configurations. `serve --check-config`
// exits 1 and prints every problem of the file, each on a line that starts with its key
// path, in a fixed order; `serve` itself refuses to start with the same problems, and creates
// nothing: ROOT, where the configuration puts the socket, the embedded appliance's data and
// the tenancy ledger, stays empty. FILES holds the files a configuration may read.
func TestBrokenConfigs(t *testing.T) {
	const embedded = "\n  e: {type: embedded, dataDir: ROOT/data}"
	const unixListener = "listeners: [{endpoint: unix://ROOT/csi.sock}]\n"
	const tlsFiles = "{cert: FILES/tls.crt, key: FILES/tls.key, clientCA: FILES/ca.crt}"
	for _, tc := range []struct {
		name, yaml string
		want       []string // the start of each line printed, in order
	}{
		{"unknown key with an empty map", unixListener + "backendz: {}\nbackends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]",
			[]string{"backendz: unknown key (did you mean backends?)"}},
		{"unknown keys at every depth", unixListener + "loging: {level: info}\nbackends:" + embedded + "\n  r: {type: rest, urls: ['https://a:1'], retry: {maxAtempts: 3}}\nroutes: [{methods: ['*'], backend: e, backends: x}]\ntenancy: {tenants: [{name: a, maxVolume: 1}]}",
			[]string{"loging: unknown key (did you mean logging?)", "backends.r.retry.maxAtempts: unknown key (did you mean maxAttempts?)", "routes[0].backends: unknown key (did you mean backend?)", "tenancy.tenants[0].maxVolume: unknown key (did you mean maxVolumes?)", "tenancy.store: required with tenants"}},
		{"missing backend TLS files", unixListener + "backends:" + embedded + "\n  array1: {type: rest, urls: ['https://a:8443'], tls: {ca: FILES/none/ca.pem, cert: FILES/none/c.pem, key: FILES/none/k.pem}}\nroutes: [{methods: ['*'], backend: array1}]",
			[]string{"backends.array1.tls.ca: open FILES/none/ca.pem: no such file or directory", "backends.array1.tls.cert: open FILES/none/c.pem", "backends.array1.tls.key: open FILES/none/k.pem"}},
		{"missing listener TLS files", "listeners: [{endpoint: 'tcp://127.0.0.1:0', tls: {cert: FILES/x.crt, key: FILES/x.key, clientCA: FILES/x.ca}, clients: [{cn: a}]}]\nbackends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]",
			[]string{"listeners[0].tls.cert: open FILES/x.crt", "listeners[0].tls.key: open FILES/x.key", "listeners[0].tls.clientCA: open FILES/x.ca"}},
		{"TCP listener without TLS", "listeners: [{endpoint: 'tcp://127.0.0.1:0'}, {endpoint: 'unix://ROOT/b.sock', insecure: true}]\nbackends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]",
			[]string{"listeners[0].tls: required on tcp://127.0.0.1:0", "listeners[0].clients: required with tls", "listeners[1].insecure: only for tcp:// endpoints"}},
		{"TLS on a Unix socket and UIDs on TCP", "listeners: [{endpoint: 'unix://ROOT/a.sock', tls: " + tlsFiles + "}, {endpoint: 'tcp://127.0.0.1:0', allowUIDs: [0], insecure: true}]\nbackends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]",
			[]string{"listeners[0].tls: only for tcp:// endpoints", "listeners[1].allowUIDs: only for unix:// endpoints"}},
		{"bad minVersion", "listeners: [{endpoint: 'tcp://127.0.0.1:0', tls: {cert: FILES/tls.crt, key: FILES/tls.key, clientCA: FILES/ca.crt, minVersion: '1.1'}, clients: [{cn: a}]}]\nbackends:" + embedded + "\n  r: {type: rest, urls: ['https://a:1'], tls: {ca: FILES/ca.crt, minVersion: '1.0'}}\nroutes: [{methods: ['*'], backend: e}]",
			[]string{`backends.r.tls.minVersion: "1.0" is not 1.3 or 1.2`, `listeners[0].tls.minVersion: "1.1" is not 1.3 or 1.2`}},
		{"routes against backends", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['/csi.v1.Node/['], backend: e}, {methods: [], backend: nope}]",
			[]string{`routes[0].methods: bad pattern "/csi.v1.Node/["`, "routes[1].methods: empty", `routes[1].backend: no backend named "nope"`}},
		{"no routes", unixListener + "backends:" + embedded,
			[]string{"routes: empty"}},
		{"rest URLs and retries and breaker", unixListener + "backends:" + embedded + "\n  r: {type: rest, urls: ['ftp://a', 'https://b:1'], retry: {maxAttempts: -1, minBackoff: 2s, maxBackoff: 1s}, circuitBreaker: {failures: -1}, retryBudget: {ratio: -1}}\nroutes: [{methods: ['*'], backend: r}]",
			[]string{"backends.r.urls[0]: ", "backends.r.retry.maxAttempts: -1 is negative", "backends.r.retry.maxBackoff: 1s is shorter", "backends.r.circuitBreaker.failures: ", "backends.r.retryBudget.ratio: "}},
		{"grpc targets", unixListener + "backends:" + embedded + "\n  g: {type: grpc, targets: ['dns:///h:1', 'unix://relative.sock'], circuitBreaker: {coolDown: -1s}}\n  h: {type: grpc}\nroutes: [{methods: ['*'], backend: g}]",
			[]string{`backends.g.targets[0]: "dns:///h:1": TLS is required`, `backends.g.targets[1]: "unix://relative.sock": the socket path must be absolute`, "backends.g.circuitBreaker.coolDown: ", "backends.h.target: required for a grpc backend"}},
		{"backend types", unixListener + "backends:" + embedded + "\n  a: {urls: ['https://a:1']}\n  b: {type: nfs}\n  c: {type: embedded, dataDir: ROOT/c, tls: {ca: FILES/ca.crt}, auth: {bearerTokenFile: FILES/token}}\n  d: {type: embedded, dataDir: ROOT/d, capacityBytes: -1}\nroutes: [{methods: ['*'], backend: e}]",
			[]string{"backends.a.type: required", `backends.b.type: "nfs" is not one of grpc, rest, embedded`, "backends.c.tls: only for grpc and rest backends", "backends.c.auth: only for rest backends", "backends.d: sizes and limits must not be negative"}},
		{"credentials files", unixListener + "backends:" + embedded + "\n  r: {type: rest, urls: ['https://a:1'], auth: {bearerTokenFile: FILES/none/token}}\n  c: {type: rest, protocol: csp, urls: ['https://csp:1'], auth: {usernameFile: FILES/none/user, passwordFile: FILES/none/pass}}\nroutes: [{methods: ['*'], backend: r}]",
			[]string{"backends.c.auth.usernameFile: open FILES/none/user", "backends.c.auth.passwordFile: open FILES/none/pass", "backends.r.auth.bearerTokenFile: open FILES/none/token"}},
		{"csp backend", unixListener + "backends:" + embedded + "\n  c: {type: rest, protocol: csp, urls: ['http://csp:8080'], auth: {bearerTokenFile: FILES/token}, csp: {nodes: [{id: n1}, {id: n1}], accessProtocol: smb}}\n  d: {type: rest, protocol: soap, urls: ['https://a:1']}\nroutes: [{methods: ['*'], backend: c}]",
			[]string{"backends.c.urls[0]: http:// would send", "backends.c.auth: a CSP logs in with a user", `backends.c.csp.nodes[1].id: "n1" is listed twice`, "backends.c.auth: usernameFile and passwordFile are required", `backends.c.csp.accessProtocol: "smb" is not iscsi, fc or nvmetcp`, "backends.c.csp.nodes.n1: no initiators", `backends.d.protocol: "soap" is not connect or csp`}},
		{"tenants named by clients", "listeners: [{endpoint: 'tcp://127.0.0.1:0', tls: " + tlsFiles + ", clients: [{cn: a, tenant: blue}, {cn: b}]}, {endpoint: 'unix://ROOT/b.sock', tenant: green}]\nbackends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\ntenancy: {ledger: ROOT/tenancy.db, tenants: [{name: red}]}",
			[]string{`listeners[0].clients[0].tenant: tenant "blue" is not in tenancy.tenants`, "listeners[0].clients[1].tenant: required: other clients", `listeners[1].tenant: tenant "green" is not in tenancy.tenants`}},
		{"tenants and their store", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\ntenancy: {tenants: [{name: red}, {name: red}, {name: 'Not A Name', maxBytes: -1}]}",
			[]string{"tenancy.tenants[1].name: tenant red is listed twice", "tenancy.tenants[2].name: ", "tenancy.tenants[2]: maxVolumes and maxBytes must not be negative", "tenancy.store: required with tenants"}},
		{"etcd store and token key", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\ntenancy: {tokenKeyFile: FILES/none/token.key, store: {etcd: {endpoints: ['https://etcd:2379', 'etcd-1'], prefix: /gw, leaseTTL: 500ms, tls: {ca: FILES/none/etcd-ca.crt}}}, tenants: [{name: red}]}",
			[]string{`tenancy.store.etcd.endpoints[1]: "etcd-1" is not host:port`, "tenancy.store.etcd.tls.ca: open FILES/none/etcd-ca.crt", `tenancy.store.etcd.prefix: "/gw" must end in /`, "tenancy.store.etcd.leaseTTL: 500ms is not a duration of 1s or more", "tenancy.tokenKeyFile: open FILES/none/token.key"}},
		{"descriptor sets", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\ndescriptorSets: [{file: FILES/none/set.pb}, {secretFields: [a.B.c]}, {file: FILES/tls.crt}]",
			[]string{"descriptorSets[0]: open FILES/none/set.pb: no such file or directory", "descriptorSets[1].file: empty", "descriptorSets[2]: FILES/tls.crt is not a protobuf descriptor set"}},
		{"limits and timeouts", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\ntimeouts: {default: 2m, max: 1m}\nlimits: {maxFrameSize: 32768}",
			[]string{"timeouts.default: 2m0s is longer than timeouts.max", "limits.maxFrameSize: grpc-go's server reads frames of 16384 bytes at most"}},
		{"values of the wrong form", "backends:" + embedded + "\n  g: {type: grpc, target: 'unix:///d.sock', repair: always}\nroutes: [{methods: ['*'], backend: e}]\nvalidation: strict\ntransport: quic\nshutdown: {grace: soon}\nlisteners: [{endpoint: 'unix://ROOT/a.sock', socketMode: 0660}, {endpoint: 'udp://x'}]",
			[]string{`backends.g.repair: unknown repair setting "always"`, "listeners[0].socketMode: ", `listeners[1].endpoint: endpoint "udp://x": scheme "udp" is not supported`, "shutdown.grace: ", `transport: "quic" is not frames or grpc`, `validation: unknown validation mode "strict"`}},
		{"tracing and shutdown and admin and methods", "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\nshutdown: {grace: -1s}\nadmin: {listen: '9808'}\ntracing: {exporter: jaeger, sampleRatio: 2}\nlisteners: [{endpoint: 'unix://ROOT/a.sock', methods: ['Controller/*']}]",
			[]string{"listeners[0].methods: ", "shutdown.grace: must not be negative", `admin.listen: "9808" is not host:port`, `tracing.exporter: "jaeger"`, "tracing.sampleRatio: 2 is not between 0 and 1"}},
		{"logging", unixListener + "backends:" + embedded + "\nroutes: [{methods: ['*'], backend: e}]\nlogging: {level: loud, format: xml}",
			[]string{`logging.format: "xml" is not json or text`, `logging.level: "loud" is not debug, info, warn or error`}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkBroken(t, tc.yaml, nil, tc.want) })
	}
	// A certificate that can be read but does not parse passes --check-config, which reads
	// files but does not parse them; serve loads it with the other TLS material, before the
	// embedded backend creates its data directory or the ledger anything.
	t.Run("etcd certificate that does not parse", func(t *testing.T) {
		file, root, _ := brokenFile(t, "listeners: [{endpoint: unix://ROOT/csi.sock, tenant: red}]\nbackends:"+embedded+"\nroutes: [{methods: ['*'], backend: e}]\n"+
			"tenancy: {store: {etcd: {endpoints: ['https://127.0.0.1:2379'], tls: {ca: FILES/ca.crt, cert: FILES/tls.crt, key: FILES/tls.key}}}, tenants: [{name: red}]}")
		if out, err := runGateway(t, testutil.Binary(t), nil, "serve", "--check-config", "--config", file); err != nil || strings.TrimSpace(out) != "configuration OK" {
			t.Fatalf("serve --check-config: %v\n%s", err, out)
		}
		failsToStart(t, nil, file, root, "tenancy.store.etcd.tls: ")
	})
}

// TestBrokenEnvironment: a CSIGW_* variable that sets no key is refused like an unknown key,
// with the nearest variable that does; the test harness's own variables (CSIGWTEST_ETCD) are not
// configuration and pass. Values are never repeated.
func TestBrokenEnvironment(t *testing.T) {
	const yaml = "listeners: [{endpoint: unix://ROOT/csi.sock}]\nbackends: {e: {type: embedded, dataDir: ROOT/data}}\nroutes: [{methods: ['*'], backend: e}]"
	checkBroken(t, yaml, []string{"CSIGW_SOCKETMDOE=0600", "CSIGW_LOGGING_LEVLE=canary-value", "CSIGW_LOGGING_LEVEL=debug", "CSIGW_FROBNICATE=1", "CSIGWTEST_ETCD=/usr/bin/etcd"},
		[]string{"CSIGW_FROBNICATE: unknown environment variable", "CSIGW_LOGGING_LEVLE: unknown environment variable (did you mean CSIGW_LOGGING_LEVEL?)", "CSIGW_SOCKETMDOE: unknown environment variable (did you mean CSIGW_SOCKET_MODE?)"})
}

// checkBroken runs `serve --check-config` on yaml with env (ROOT and FILES replaced as
// TestBrokenConfigs says) and wants exit 1 with lines starting with want, in order, and none
// repeating a value of env; then `serve`, which must fail the same way and create nothing.
func checkBroken(t *testing.T, yaml string, env, want []string) {
	t.Helper()
	file, root, paths := brokenFile(t, yaml)
	out, err := runGateway(t, testutil.Binary(t), env, "serve", "--check-config", "--config", file)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if err == nil || len(lines) != len(want) {
		t.Fatalf("serve --check-config: %v, %d lines, want exit 1 and %d:\n%s", err, len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], paths.Replace(w)) {
			t.Errorf("line %d: %s\nwant it to start with %s", i+1, lines[i], paths.Replace(w))
		}
	}
	for _, kv := range env {
		if _, value, _ := strings.Cut(kv, "="); strings.Contains(out, value) {
			t.Errorf("the output repeats the value of %s:\n%s", kv, out)
		}
	}
	failsToStart(t, env, file, root, lines[0])
}

// brokenFile writes yaml, with ROOT and FILES replaced, to a configuration file: ROOT is an
// empty directory, FILES one with placeholder (readable, not PEM) tls.crt, tls.key, ca.crt
// and token.
func brokenFile(t *testing.T, yaml string) (file, root string, paths *strings.Replacer) {
	t.Helper()
	root, files := filepath.Join(t.TempDir(), "root"), t.TempDir()
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt", "token"} {
		writePlaceholder(t, filepath.Join(files, f))
	}
	paths = strings.NewReplacer("ROOT", root, "FILES", files)
	file = filepath.Join(t.TempDir(), "config.yaml")
	writeFileAt(t, file, paths.Replace(yaml))
	return file, root, paths
}

// failsToStart runs `serve` on file with env and wants exit 1 with an output that says want,
// and nothing created in root.
func failsToStart(t *testing.T, env []string, file, root, want string) {
	t.Helper()
	out, err := runGateway(t, testutil.Binary(t), env, "serve", "--config", file, "--data-dir", filepath.Join(root, "default-data"))
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("serve: %v\n%s\nwant exit 1 and %s", err, out, want)
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("a start that failed created %v in %s", entries, root)
	}
}
