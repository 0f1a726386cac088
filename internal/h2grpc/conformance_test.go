package h2grpc

import (
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestStreamStateErrors: frames a stream's state does not allow end the connection with the
// code RFC 9113 gives (h2spec 5.1, 5.1.1, 8.1, 8.1.2.1), or reset the stream (5.3.1).
func TestStreamStateErrors(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	// Unary echoes; Block reads its message and waits, so its stream stays half-closed
	// (remote) on the server.
	handler := func(_ any, ss grpc.ServerStream) error {
		if m, _ := grpc.MethodFromServerStream(ss); m == mBlock {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				return err
			}
			select {
			case <-release:
			case <-ss.Context().Done():
			}
			return nil
		}
		return echoHandler(nil, ss)
	}
	trailers := func(c *testutil.RawH2, id uint32, end bool) {
		c.WriteHeaders(id, end, hpack.HeaderField{Name: "x-t", Value: "1"})
	}
	echoed := func(c *testutil.RawH2, id uint32) { c.UntilEnd(id) }
	for _, tc := range []struct {
		name string
		do   func(c *testutil.RawH2)
		code http2.ErrCode
	}{
		{"HEADERS on a half-closed (remote) stream", func(c *testutil.RawH2) {
			c.Open(1, mBlock)
			c.SendMessage(1, nil)
			trailers(c, 1, true)
		}, http2.ErrCodeStreamClosed},
		{"HEADERS on a closed stream", func(c *testutil.RawH2) {
			c.Open(1, mUnary)
			c.SendMessage(1, nil)
			echoed(c, 1)
			c.Open(1, mUnary)
		}, http2.ErrCodeStreamClosed},
		{"a second HEADERS without END_STREAM", func(c *testutil.RawH2) {
			c.Open(1, mBlock)
			trailers(c, 1, false)
		}, http2.ErrCodeProtocol},
		{"a pseudo-header in trailers", func(c *testutil.RawH2) {
			c.Open(1, mBlock)
			c.WriteHeaders(1, true, hpack.HeaderField{Name: ":path", Value: "/x"})
		}, http2.ErrCodeProtocol},
		{"a stream id below one already used", func(c *testutil.RawH2) {
			c.Open(5, mUnary)
			c.SendMessage(5, nil)
			echoed(c, 5)
			c.Open(3, mUnary)
		}, http2.ErrCodeProtocol},
		{"DATA after the client's RST_STREAM", func(c *testutil.RawH2) {
			c.Open(1, mBlock)
			if err := c.Framer.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
			c.SendMessage(1, nil)
		}, http2.ErrCodeStreamClosed},
		{"WINDOW_UPDATE on an idle stream", func(c *testutil.RawH2) {
			if err := c.Framer.WriteWindowUpdate(1, 100); err != nil {
				t.Fatal(err)
			}
		}, http2.ErrCodeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, ServerConfig{Handler: handler})
			c, _ := dialRaw(t, addr)
			tc.do(c)
			if ga := c.UntilGoAway(); ga.ErrCode != tc.code {
				t.Errorf("GOAWAY %v, want %v", ga.ErrCode, tc.code)
			}
		})
	}
}

// TestMalformedRequests: a request whose headers HTTP/2 calls malformed, or a stream that
// depends on itself, gets RST_STREAM(PROTOCOL_ERROR) and never reaches the handler (h2spec
// 5.3.1, 8.1.2.2, 8.1.2.3); the connection goes on.
func TestMalformedRequests(t *testing.T) {
	var calls int
	_, addr := startServer(t, ServerConfig{Handler: func(_ any, ss grpc.ServerStream) error { calls++; return echoHandler(nil, ss) }})
	c, _ := dialRaw(t, addr)
	method, scheme, path := hpack.HeaderField{Name: ":method", Value: "POST"}, hpack.HeaderField{Name: ":scheme", Value: "http"}, hpack.HeaderField{Name: ":path", Value: mUnary}
	rest := []hpack.HeaderField{{Name: ":authority", Value: "localhost"}, {Name: "content-type", Value: "application/grpc"}}
	id := uint32(1)
	for name, fields := range map[string][]hpack.HeaderField{
		"no :method":  append([]hpack.HeaderField{scheme, path}, rest...),
		"no :scheme":  append([]hpack.HeaderField{method, path}, rest...),
		"no :path":    append([]hpack.HeaderField{method, scheme}, rest...),
		"empty :path": append([]hpack.HeaderField{method, scheme, {Name: ":path", Value: ""}}, rest...),
		"TE gzip":     append([]hpack.HeaderField{method, scheme, path}, append(rest, hpack.HeaderField{Name: "te", Value: "gzip"})...),
	} {
		c.WriteHeaders(id, true, fields...)
		if rst := c.UntilRST(id); rst.ErrCode != http2.ErrCodeProtocol {
			t.Errorf("%s: RST_STREAM %v, want PROTOCOL_ERROR", name, rst.ErrCode)
		}
		id += 2
	}
	if err := c.Framer.WritePriority(id, http2.PriorityParam{StreamDep: id, Weight: 15}); err != nil {
		t.Fatal(err)
	}
	if rst := c.UntilRST(id); rst.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("PRIORITY on itself: RST_STREAM %v, want PROTOCOL_ERROR", rst.ErrCode)
	}
	id += 2
	c.Open(id, mUnary)
	c.SendMessage(id, []byte("still served"))
	c.UntilEnd(id)
	if calls != 1 {
		t.Errorf("%d handler calls, want 1 (the last, well-formed request)", calls)
	}
}

// TestDataOnClosedStream: DATA on a stream both sides ended is STREAM_CLOSED: a connection
// error once the server has closed the stream, a stream error while its handler is still
// finishing (half-closed, remote).
func TestDataOnClosedStream(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler})
	c, _ := dialRaw(t, addr)
	c.Open(1, mUnary)
	c.SendMessage(1, nil)
	c.UntilEnd(1)
	c.SendMessage(1, nil)
	f := c.Until("STREAM_CLOSED", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return true
		case *http2.RSTStreamFrame:
			return f.StreamID == 1
		}
		return false
	})
	switch f := f.(type) {
	case *http2.GoAwayFrame:
		if f.ErrCode != http2.ErrCodeStreamClosed {
			t.Errorf("GOAWAY %v, want STREAM_CLOSED", f.ErrCode)
		}
	case *http2.RSTStreamFrame:
		if f.ErrCode != http2.ErrCodeStreamClosed {
			t.Errorf("RST_STREAM %v, want STREAM_CLOSED", f.ErrCode)
		}
	}
}

// TestDataAfterServerReset: DATA the client sent on a stream before it learned the server
// reset it is dropped, and the connection goes on.
func TestDataAfterServerReset(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler})
	c, _ := dialRaw(t, addr)
	c.Open(1, mUnary)
	if err := c.Framer.WriteData(1, false, []byte{0, 0, 0, 0, 0}); err != nil { // not ending its side
		t.Fatal(err)
	}
	c.UntilRST(1) // the handler answered the one message and the server reset the stream
	if err := c.Framer.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	c.Open(3, mUnary)
	c.SendMessage(3, []byte("next"))
	if end, ok := c.UntilEnd(3).(*http2.HeadersFrame); !ok {
		t.Errorf("the next call: %v, want its trailers", end)
	}
}

// TestInvalidHeaderFieldClosesItsStream: a request with an invalid header field is reset,
// and its DATA, which the client sent before it learned, does not end the connection.
func TestInvalidHeaderFieldClosesItsStream(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler})
	c, _ := dialRaw(t, addr)
	c.Open(1, mUnary, hpack.HeaderField{Name: "x-bad", Value: "a\x00b"})
	c.SendMessage(1, []byte("late"))
	if rst := c.UntilRST(1); rst.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("RST_STREAM %v, want PROTOCOL_ERROR", rst.ErrCode)
	}
	c.Open(3, mUnary)
	c.SendMessage(3, []byte("next"))
	if end, ok := c.UntilEnd(3).(*http2.HeadersFrame); !ok {
		t.Errorf("the next call: %v, want its trailers", end)
	}
}

// TestContinuationFlood: a header block that goes on in empty CONTINUATION frames ends the
// connection once its frames pass twice the header list limit, however little they carry
// (CVE-2024-27316's pattern); without the bound the server would read them for ever.
func TestContinuationFlood(t *testing.T) {
	_, addr := startServer(t, ServerConfig{Handler: echoHandler, MaxHeaderListSize: 4096})
	c, _ := dialRaw(t, addr)
	if err := c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.RequestBlock(mUnary)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1 << 20 { // 9 MiB of frame headers; the server stops reading long before
			if c.Framer.WriteContinuation(1, false, nil) != nil {
				return
			}
		}
	}()
	if ga := c.UntilGoAway(); ga.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", ga.ErrCode)
	}
	c.Conn.Close()
	<-done
}
