package grpcbackend

import "testing"

// TestFrameAddress: where the frame client dials each kind of target, and the :authority
// (for TLS, the name verified) its calls carry — grpc-go's.
func TestFrameAddress(t *testing.T) {
	tests := []struct {
		addr                        string
		kind                        targetKind
		network, address, authority string
	}{
		{"unix:///run/csi/driver.sock", unixTarget, "unix", "/run/csi/driver.sock", "localhost"},
		{"unix:/run/csi/driver.sock", unixTarget, "unix", "/run/csi/driver.sock", "localhost"},
		{"dns:///array.example.org:9443", tcpTarget, "tcp", "array.example.org:9443", "array.example.org:9443"},
	}
	for _, tt := range tests {
		network, address, authority := frameAddress(tt.addr, tt.kind)
		if network != tt.network || address != tt.address || authority != tt.authority {
			t.Errorf("frameAddress(%q) = %s %s %s; want %s %s %s", tt.addr, network, address, authority, tt.network, tt.address, tt.authority)
		}
	}
}
