package testutil

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// RawH2 is an HTTP/2 client made of x/net's Framer, for sending what a well-behaved gRPC
// client would not (oversize frames, streams without a message, windows never opened) and
// reading the server's answer frame by frame. Every read is bounded by a 20 s deadline, so a
// limit that does not hold fails the test instead of hanging it.
type RawH2 struct {
	T      testing.TB
	Conn   net.Conn
	Framer *http2.Framer
	enc    *hpack.Encoder
	hb     bytes.Buffer
}

// DialRawH2 connects to addr on network ("unix" or "tcp"), closed at the end of the test,
// sends the client preface and settings, and reads frames until the server's SETTINGS,
// which it returns.
func DialRawH2(t testing.TB, network, addr string, settings ...http2.Setting) (*RawH2, *http2.SettingsFrame) {
	t.Helper()
	nc, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &RawH2{T: t, Conn: nc, Framer: http2.NewFramer(nc, nc)}
	c.Framer.SetMaxReadFrameSize(1 << 20)
	c.enc = hpack.NewEncoder(&c.hb)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.Framer.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	sf := c.Until("the server's SETTINGS", func(f http2.Frame) bool {
		sf, ok := f.(*http2.SettingsFrame)
		return ok && !sf.IsAck()
	})
	return c, sf.(*http2.SettingsFrame)
}

// RequestBlock is the hpack block of a gRPC request for path, with extra fields after the
// usual ones.
func (c *RawH2) RequestBlock(path string, extra ...hpack.HeaderField) []byte {
	c.hb.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: path}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}, extra...) {
		_ = c.enc.WriteField(f)
	}
	return bytes.Clone(c.hb.Bytes())
}

// WriteHeaders sends one HEADERS frame on stream id holding exactly fields (END_STREAM when
// end): trailers, or a request missing what a request needs.
func (c *RawH2) WriteHeaders(id uint32, end bool, fields ...hpack.HeaderField) {
	c.T.Helper()
	c.hb.Reset()
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	if err := c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		c.T.Fatal(err)
	}
}

// Open starts stream id, a request for path, without ending it.
func (c *RawH2) Open(id uint32, path string, extra ...hpack.HeaderField) {
	c.T.Helper()
	if err := c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.RequestBlock(path, extra...), EndHeaders: true}); err != nil {
		c.T.Fatal(err)
	}
}

// SendMessage sends msg as the stream's one gRPC message and ends the client's side.
func (c *RawH2) SendMessage(id uint32, msg []byte) {
	c.T.Helper()
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	copy(b[5:], msg)
	if err := c.Framer.WriteData(id, true, b); err != nil {
		c.T.Fatal(err)
	}
}

// Until reads frames until one satisfies match, and returns it; it fails the test when the
// connection ends first.
func (c *RawH2) Until(what string, match func(http2.Frame) bool) http2.Frame {
	c.T.Helper()
	for {
		f, err := c.Framer.ReadFrame()
		if err != nil {
			c.T.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

// UntilGoAway reads frames until a GOAWAY.
func (c *RawH2) UntilGoAway() *http2.GoAwayFrame {
	c.T.Helper()
	return c.Until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
}

// UntilRST reads frames until a RST_STREAM of stream id.
func (c *RawH2) UntilRST(id uint32) *http2.RSTStreamFrame {
	c.T.Helper()
	return c.Until("RST_STREAM", func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id
	}).(*http2.RSTStreamFrame)
}

// UntilEnd reads frames until stream id ends on the server's side: HEADERS with END_STREAM
// (the trailers) or RST_STREAM. It returns that frame.
func (c *RawH2) UntilEnd(id uint32) http2.Frame {
	c.T.Helper()
	return c.Until("the end of the stream", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.HeadersFrame:
			return f.StreamID == id && f.StreamEnded()
		case *http2.RSTStreamFrame:
			return f.StreamID == id
		}
		return false
	})
}

// Ended reads frames until the server closes the connection, and returns the GOAWAY it sent
// before, or nil (none, or one lost to the reset of data the server had not read); it fails
// the test when the connection stays open.
func (c *RawH2) Ended(what string) *http2.GoAwayFrame {
	c.T.Helper()
	var ga *http2.GoAwayFrame
	for {
		f, err := c.Framer.ReadFrame()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.T.Fatalf("%s: the connection stays open", what)
		}
		if err != nil {
			return ga
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			ga = g
		}
	}
}

// Closed checks that the server closes the connection (after whatever it still sends).
func (c *RawH2) Closed() {
	c.T.Helper()
	for {
		if _, err := c.Framer.ReadFrame(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.T.Fatalf("the server did not close the connection: %v", err)
			}
			return
		}
	}
}
