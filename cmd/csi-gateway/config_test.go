package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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
	return loadConfig(flags, func(k string) string { return env[k] })
}

func TestConfigDefaults(t *testing.T) {
	c, err := loadFrom(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Listeners) != 1 || c.Listeners[0].Endpoint != defaultEndpoint || c.Listeners[0].SocketMode != "0660" {
		t.Errorf("listeners: %+v", c.Listeners)
	}
	if b := c.Backends[defaultBackendName]; b.Type != "embedded" || b.DataDir != defaultDataDir {
		t.Errorf("backends: %+v", c.Backends)
	}
	if len(c.Routes) != 1 || c.Routes[0].Backend != defaultBackendName {
		t.Errorf("routes: %+v", c.Routes)
	}
	if c.Logging.Level != "info" || c.Logging.Format != "json" || c.Shutdown.Grace != 30*time.Second {
		t.Errorf("logging %+v, shutdown %+v", c.Logging, c.Shutdown)
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
	if c.Listeners[0].Endpoint != "unix:///tmp/from-file.sock" || c.Listeners[0].SocketMode != "0600" || len(c.Listeners[0].AllowUIDs) != 2 {
		t.Errorf("listener from the file: %+v", c.Listeners[0])
	}
	if b := c.Backends["array1"]; b.Retry.MaxAttempts != 3 || b.Retry.MinBackoff != 10*time.Millisecond {
		t.Errorf("backend from the file: %+v", b)
	}
	if c.Logging.Level != "warn" {
		t.Errorf("logging.level = %q, want warn from the file", c.Logging.Level)
	}
	// CSIGW_* beats the file; CSI_ENDPOINT sets the first listener; flags beat both.
	c, err = loadFrom(t, yaml, nil, map[string]string{"CSIGW_LOGGING_LEVEL": "debug", "CSI_ENDPOINT": "unix:///tmp/from-env.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Logging.Level != "debug" || c.Listeners[0].Endpoint != "unix:///tmp/from-env.sock" {
		t.Errorf("environment: level %q endpoint %q", c.Logging.Level, c.Listeners[0].Endpoint)
	}
	c, err = loadFrom(t, yaml, []string{"--log-level", "error", "--endpoint", "unix:///tmp/from-flag.sock"},
		map[string]string{"CSIGW_LOGGING_LEVEL": "debug", "CSI_ENDPOINT": "unix:///tmp/from-env.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Logging.Level != "error" || c.Listeners[0].Endpoint != "unix:///tmp/from-flag.sock" {
		t.Errorf("flags: level %q endpoint %q", c.Logging.Level, c.Listeners[0].Endpoint)
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
		{"tcp without TLS", "listeners: [{endpoint: tcp://127.0.0.1:9000}]", nil, "mTLS"},
		{"bad socket mode", "listeners: [{endpoint: unix:///tmp/a.sock, socketMode: rw}]", nil, "listeners[0].socketMode"},
		{"backend without type", "backends: {a: {target: unix:///x.sock}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.type"},
		{"bad backend type", "backends: {a: {type: nfs}}\nroutes: [{methods: ['*'], backend: a}]", nil, `"nfs"`},
		{"grpc without target", "backends: {a: {type: grpc}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.target"},
		{"rest without urls", "backends: {a: {type: rest}}\nroutes: [{methods: ['*'], backend: a}]", nil, "backends.a.urls"},
		{"no routes", "backends: {a: {type: grpc, target: unix:///x.sock}}", nil, "routes"},
		{"bad log level", "logging: {level: loud}", nil, "logging.level"},
		{"bad log level from env", "", map[string]string{"CSIGW_LOGGING_LEVEL": "loud"}, "logging.level"},
		{"bad CSI_ENDPOINT", "", map[string]string{"CSI_ENDPOINT": "/no/scheme.sock"}, "listeners[0].endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFrom(t, tc.yaml, nil, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
