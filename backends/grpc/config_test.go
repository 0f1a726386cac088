package grpcbackend

import (
	"crypto/tls"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

func TestNewTargets(t *testing.T) {
	tlsCreds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13})
	tests := []struct {
		name    string
		target  string
		opts    []Option
		wantErr string // exact; "" for success
	}{
		{"unix absolute", "unix:///run/csi/driver.sock", nil, ""},
		{"unix single slash", "unix:/run/csi/driver.sock", nil, ""},
		{"unix relative as host", "unix://driver.sock", nil,
			`backends.drv.target: "unix://driver.sock": the socket path must be absolute: write unix:///abs/path.sock`},
		{"unix relative opaque", "unix:driver.sock", nil,
			`backends.drv.target: "unix:driver.sock": the socket path must be absolute: write unix:///abs/path.sock`},
		{"unix no path", "unix://", nil,
			`backends.drv.target: "unix://": the socket path must be absolute: write unix:///abs/path.sock`},
		{"unix directory", "unix:///run/csi/", nil,
			`backends.drv.target: "unix:///run/csi/": the socket path names a directory`},
		{"unix query", "unix:///run/csi.sock?x=1", nil,
			`backends.drv.target: "unix:///run/csi.sock?x=1": a target takes no query or fragment`},
		{"empty", "", nil,
			`backends.drv.target: required (unix:///abs/path.sock or dns:///host:port)`},
		{"tcp scheme", "tcp://10.0.0.1:9000", nil,
			`backends.drv.target: "tcp://10.0.0.1:9000": unsupported target: use unix:///abs/path.sock or dns:///host:port`},
		{"bare host port", "driver:9000", nil,
			`backends.drv.target: "driver:9000": unsupported target: use unix:///abs/path.sock or dns:///host:port`},
		{"dns without port", "dns:///driver", []Option{WithTransportCredentials(tlsCreds)},
			`backends.drv.target: "dns:///driver": a TCP target is dns:///host:port`},
		{"dns without credentials", "dns:///driver.example:9443", nil,
			`backends.drv.target: "dns:///driver.example:9443": TLS is required for TCP targets; configure TLS for this backend (backends.drv.tls)`},
		{"dns with dial options only", "dns:///driver.example:9443", []Option{WithDialOptions()},
			`backends.drv.target: "dns:///driver.example:9443": TLS is required for TCP targets; configure TLS for this backend (backends.drv.tls)`},
		{"dns with plaintext credentials", "dns:///driver.example:9443", []Option{WithTransportCredentials(insecure.NewCredentials())},
			`backends.drv.target: "dns:///driver.example:9443": TLS is required for TCP targets, got "insecure" credentials; configure TLS for this backend (backends.drv.tls)`},
		{"dns with TLS", "dns:///driver.example:9443", []Option{WithTransportCredentials(tlsCreds)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New("drv", Config{Target: tt.target}, tt.opts...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if b.Target() != tt.target || b.Name() != "drv" {
					t.Errorf("got name %q target %q", b.Name(), b.Target())
				}
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				return
			}
			if err == nil {
				b.Close()
				t.Fatalf("New accepted %q", tt.target)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error %q\nwant      %q", err, tt.wantErr)
			}
		})
	}
}
