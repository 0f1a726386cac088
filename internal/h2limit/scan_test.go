package h2limit

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/net/http2"
)

// TestFrameScanner passes the same frames cut at every possible place and checks that the
// scanner finds every header and collects every SETTINGS entry and WINDOW_UPDATE increment.
func TestFrameScanner(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 15}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 7})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82, 0x86}, EndHeaders: true})
	fr.WriteData(1, true, []byte("hello"))
	fr.WriteWindowUpdate(1, 300)
	fr.WriteSettings() // empty
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	wire := buf.Bytes()
	want := []string{"h4/12", "p4:0005", "p4:0004", "h1/2", "h0/5", "h8/4", "p8:0000", "h4/0", "h3/4"}
	for cut := 1; cut < len(wire); cut++ {
		var got []string
		s := frameScanner{
			onHeader: func(h frameHeader) int {
				got = append(got, fmt.Sprintf("h%d/%d", h.typ, h.length))
				switch h.typ {
				case frameSettings:
					return 6
				case frameWindowUpdate:
					return 4
				}
				return 0
			},
			onPayload: func(h frameHeader, p []byte) {
				got = append(got, fmt.Sprintf("p%d:%x", h.typ, p[:2]))
			},
		}
		s.skipPreface()
		for p := wire; len(p) > 0; {
			n := min(cut, len(p))
			s.scan(p[:n])
			p = p[n:]
		}
		if !slices.Equal(got, want) || !s.atBoundary() {
			t.Fatalf("cut every %d bytes: got %v (at a boundary: %v), want %v", cut, got, s.atBoundary(), want)
		}
	}
}
