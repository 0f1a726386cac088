package rest

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{URLs: []string{"https://array1.example:8443"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Retry{MaxAttempts: 5, MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
	if c.Retry != want || c.RequestTimeout != 30*time.Second {
		t.Errorf("defaults %+v, %v; want %+v, 30s", c.Retry, c.RequestTimeout, want)
	}
	c, err = Config{URLs: []string{"http://a"}, Retry: Retry{MaxAttempts: 1, MinBackoff: time.Second, MaxBackoff: time.Second},
		RequestTimeout: time.Minute}.withDefaults()
	if err != nil || c.Retry.MaxAttempts != 1 || c.Retry.MinBackoff != time.Second || c.RequestTimeout != time.Minute {
		t.Errorf("set values changed: %+v, %v", c, err)
	}
}

func TestConfigURLs(t *testing.T) {
	tests := []struct {
		url     string
		want    string // "" for a valid URL, else a fragment of the error
		display string // of a valid URL
		path    string // of a valid URL's endpoint for CreateVolume
	}{
		{"https://array1.example:8443", "", "https://array1.example:8443", "/csi.v1.Controller/CreateVolume"},
		{"http://10.0.0.9", "", "http://10.0.0.9", "/csi.v1.Controller/CreateVolume"},
		{"https://[fd00::9]:8443/api/csi/", "", "https://[fd00::9]:8443", "/api/csi/csi.v1.Controller/CreateVolume"},
		{"https://array1.example/api", "", "https://array1.example", "/api/csi.v1.Controller/CreateVolume"},
		{"ftp://array1.example", `urls[0]: scheme "ftp" is not supported; write the URL as https://host`, "", ""},
		{"array1.example:8443", `scheme "array1.example" is not supported`, "", ""},
		{"//array1.example", `scheme "" is not supported`, "", ""},
		{"https://", "https://: the URL has no host", "", ""},
		{"https://:8443", "the URL has no host", "", ""},
		{"https://array1.example?token=abc", "https://array1.example: the URL has a query", "", ""},
		{"https://array1.example/#s3cr3t", "the URL has a fragment", "", ""},
		{"http://[::1", "not a valid URL: missing ']' in host", "", ""},
		{"https://array1.example:port", `not a valid URL: invalid port ":port" after host`, "", ""},
		{"https://admin:s3cr3t@array1.example:8443/api", "urls[0]: https://array1.example:8443: credentials do not belong in the URL", "", ""},
		{"https://s3cr3t@array1.example", "https://array1.example: credentials", "", ""},
		{"https://admin:s3cr3t%zz@array1.example", "urls[0]: not a valid URL; write it as https://host[:port][/path]", "", ""},
		{"admin:s3cr3t@array1.example", `scheme "admin" is not supported`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := Config{URLs: []string{tt.url}}.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				u, _ := parseBaseURL(tt.url)
				if u.display != tt.display || u.endpoint(createPath).Path != tt.path {
					t.Errorf("display %q, endpoint path %q; want %q, %q", u.display, u.endpoint(createPath).Path, tt.display, tt.path)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v; want an error containing %q", err, tt.want)
			}
			for _, secret := range []string{"s3cr3t", "abc"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q repeats %q", err, secret)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no URLs", Config{}, []string{"urls: at least one URL is required"}},
		{"negative attempts", Config{URLs: []string{"http://a"}, Retry: Retry{MaxAttempts: -1}},
			[]string{"retry.maxAttempts: -1 is negative; use 1 for no retries"}},
		{"negative backoff", Config{URLs: []string{"http://a"}, Retry: Retry{MinBackoff: -time.Second}},
			[]string{"retry.minBackoff: -1s is negative"}},
		{"min above max", Config{URLs: []string{"http://a"}, Retry: Retry{MinBackoff: 10 * time.Second}},
			[]string{"retry.maxBackoff: 5s is shorter than retry.minBackoff (10s)"}},
		{"negative timeout", Config{URLs: []string{"http://a"}, RequestTimeout: -time.Second},
			[]string{"requestTimeout: -1s is negative"}},
		{"every problem at once", Config{URLs: []string{"http://a", "gopher://b"}, Retry: Retry{MaxAttempts: -2}},
			[]string{"urls[1]: scheme \"gopher\"", "retry.maxAttempts: -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestNewNamesKeyPaths: New's errors carry the full key path, one line per problem, and
// never the URL's credentials.
func TestNewNamesKeyPaths(t *testing.T) {
	_, err := New("array1", Config{URLs: []string{"https://admin:s3cr3t@array1.example"}, Retry: Retry{MaxAttempts: -1}})
	if err == nil {
		t.Fatal("New accepted the config")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "backends.array1.urls[0]: https://array1.example: credentials") ||
		!strings.HasPrefix(lines[1], "backends.array1.retry.maxAttempts: ") {
		t.Errorf("error:\n%s\nwant one line each for backends.array1.urls[0] and backends.array1.retry.maxAttempts", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "admin") {
		t.Errorf("error %q repeats the credentials", err)
	}
	if _, err := New("", Config{URLs: []string{"http://a"}}); err == nil {
		t.Error("New accepted an empty name")
	}
}
