package proxy

import "testing"

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Endpoint
		wantStr string // Endpoint.String() of a parsed endpoint
		wantErr string
	}{
		{name: "unix absolute", in: "unix:///var/run/csi/csi.sock",
			want: Endpoint{Scheme: "unix", Address: "/var/run/csi/csi.sock"}, wantStr: "unix:///var/run/csi/csi.sock"},
		{name: "unix legacy single slash", in: "unix:/var/run/csi.sock",
			want: Endpoint{Scheme: "unix", Address: "/var/run/csi.sock"}, wantStr: "unix:///var/run/csi.sock"},
		{name: "unix path is cleaned", in: "unix:///var/run//csi/../csi.sock",
			want: Endpoint{Scheme: "unix", Address: "/var/run/csi.sock"}, wantStr: "unix:///var/run/csi.sock"},
		{name: "scheme is case-insensitive", in: "UNIX:///csi.sock",
			want: Endpoint{Scheme: "unix", Address: "/csi.sock"}, wantStr: "unix:///csi.sock"},
		{name: "tcp ipv4", in: "tcp://127.0.0.1:9000",
			want: Endpoint{Scheme: "tcp", Address: "127.0.0.1:9000"}, wantStr: "tcp://127.0.0.1:9000"},
		{name: "tcp ipv6", in: "tcp://[::1]:9000",
			want: Endpoint{Scheme: "tcp", Address: "[::1]:9000"}, wantStr: "tcp://[::1]:9000"},
		{name: "tcp host name", in: "tcp://gateway.example:9443",
			want: Endpoint{Scheme: "tcp", Address: "gateway.example:9443"}, wantStr: "tcp://gateway.example:9443"},

		{name: "unix relative", in: "unix://relative/csi.sock",
			wantErr: `endpoint "unix://relative/csi.sock": a unix socket path must be absolute (unix:///path)`},
		{name: "unix opaque relative", in: "unix:csi.sock",
			wantErr: `endpoint "unix:csi.sock": a unix socket path must be absolute (unix:///path)`},
		{name: "unix empty", in: "unix://",
			wantErr: `endpoint "unix://": a unix socket path must be absolute (unix:///path)`},
		{name: "unix path with a fragment", in: "unix:///tmp/a#b/csi.sock",
			wantErr: `endpoint "unix:///tmp/a#b/csi.sock": '?' and '#' cannot appear in an endpoint (a URL ends its path there); rename the socket's path`},
		{name: "unix path with a query", in: "unix:///tmp/a?b/csi.sock",
			wantErr: `endpoint "unix:///tmp/a?b/csi.sock": '?' and '#' cannot appear in an endpoint (a URL ends its path there); rename the socket's path`},
		{name: "unix path ending in an empty fragment", in: "unix:///tmp/csi.sock#",
			wantErr: `endpoint "unix:///tmp/csi.sock#": '?' and '#' cannot appear in an endpoint (a URL ends its path there); rename the socket's path`},
		{name: "tcp without port", in: "tcp://host",
			wantErr: `endpoint "tcp://host": want tcp://host:port`},
		{name: "tcp with empty port", in: "tcp://host:",
			wantErr: `endpoint "tcp://host:": want tcp://host:port`},
		{name: "tcp with a path", in: "tcp://host:9000/csi",
			wantErr: `endpoint "tcp://host:9000/csi": want tcp://host:port`},
		{name: "http", in: "http://x",
			wantErr: `endpoint "http://x": scheme "http" is not supported; use unix:// or tcp://`},
		{name: "dns target is not a listener", in: "dns:///host:9000",
			wantErr: `endpoint "dns:///host:9000": scheme "dns" is not supported; use unix:// or tcp://`},
		{name: "garbage", in: "garbage",
			wantErr: `endpoint "garbage": want unix:///absolute/path.sock or tcp://host:port`},
		{name: "bare path", in: "/var/run/csi.sock",
			wantErr: `endpoint "/var/run/csi.sock": want unix:///absolute/path.sock or tcp://host:port`},
		{name: "empty", in: "",
			wantErr: `endpoint "": want unix:///absolute/path.sock or tcp://host:port`},
		{name: "unparsable", in: "::",
			wantErr: `endpoint "::": want unix:///absolute/path.sock or tcp://host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEndpoint(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseEndpoint(%q) = %+v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				if got != (Endpoint{}) {
					t.Errorf("ParseEndpoint(%q) returned %+v with its error, want the zero Endpoint", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEndpoint(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseEndpoint(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.wantStr {
				t.Errorf("String() = %q, want %q", s, tt.wantStr)
			}
			// What String prints parses back to the same endpoint.
			if again, err := ParseEndpoint(got.String()); err != nil || again != got {
				t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}
