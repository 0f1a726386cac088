package h2limit

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// nopConn is a net.Conn whose reads fill the whole buffer with what it already holds (the
// benchmark passes the wire bytes as the buffer, so nothing is copied) and whose writes are
// dropped.
type nopConn struct{ net.Conn }

func (c *nopConn) Read(p []byte) (int, error)  { return len(p), nil }
func (c *nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *nopConn) Close() error                { return nil }

// BenchmarkConnUnaryCall is what the watcher costs a unary call on grpc-go: the client's
// HEADERS and DATA read, the server's HEADERS, DATA and trailers written, each in one piece
// as grpc-go's buffered reader and writer pass them.
func BenchmarkConnUnaryCall(b *testing.B) {
	var in, out bytes.Buffer
	cfr, sfr := http2.NewFramer(&in, nil), http2.NewFramer(&out, nil)
	const calls = 1024
	block := bytes.Repeat([]byte{0x82}, 120)
	for i := uint32(0); i < calls; i++ {
		id := 2*i + 1
		cfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		cfr.WriteData(id, true, make([]byte, 200))
		sfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:20], EndHeaders: true})
		sfr.WriteData(id, false, make([]byte, 300))
		sfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:30], EndStream: true, EndHeaders: true})
	}
	perCallIn, perCallOut := in.Len()/calls, out.Len()/calls
	preface, read, written := []byte(http2.ClientPreface), in.Bytes(), out.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += calls {
		c := NewConn(&nopConn{}, Config{ResetsPerSecond: 200, WriteTimeout: 30 * time.Second, MaxStreams: 400})
		c.Read(preface)
		for j := 0; j < calls; j++ {
			c.Read(read[j*perCallIn : (j+1)*perCallIn])
			c.Write(written[j*perCallOut : (j+1)*perCallOut])
			if j%64 == 63 { // the client's WINDOW_UPDATE for the connection, as grpc-go sends
				c.connWin = 65535
			}
		}
		c.Close()
	}
}
