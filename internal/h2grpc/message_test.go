package h2grpc

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func msgBytes(flag byte, p []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	return append(b, p...)
}

// TestReadMsg feeds DATA payloads cut at every kind of boundary and reads messages back.
func TestReadMsg(t *testing.T) {
	m1, m2, m3 := payload(10), payload(0), payload(40000)
	wire := append(append(msgBytes(0, m1), msgBytes(0, m2)...), msgBytes(1, m3)...)
	for _, cut := range []int{1, 3, 5, 7, 15, 16384, len(wire)} {
		c := newTestConn(t)
		s := &streamCore{id: 1}
		s.rb.init()
		for off := 0; off < len(wire); off += cut {
			end := min(off+cut, len(wire))
			if code := s.rb.push(wire[off:end], end-off, end == len(wire)); code != http2.ErrCodeNo {
				t.Fatalf("push: %v", code)
			}
		}
		for i, want := range [][]byte{m1, m2, m3} {
			got, compressed, err := c.readMsg(s, 1<<20, nil)
			if err != nil || !bytes.Equal(got, want) || compressed != (i == 2) {
				t.Fatalf("cut %d, message %d: %d bytes, compressed %v, %v", cut, i, len(got), compressed, err)
			}
		}
		if _, _, err := c.readMsg(s, 1<<20, nil); err != io.EOF {
			t.Fatalf("cut %d: end %v, want io.EOF", cut, err)
		}
	}
}

func TestReadMsgErrors(t *testing.T) {
	cases := []struct {
		name string
		wire []byte
		max  int
		want error
		code codes.Code
	}{
		{"truncated", msgBytes(0, payload(10))[:8], 100, io.ErrUnexpectedEOF, 0},
		{"too large", msgBytes(0, payload(101)), 100, nil, codes.ResourceExhausted},
		{"bad flag", msgBytes(2, payload(1)), 100, nil, codes.Internal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := newTestConn(t)
			s := &streamCore{id: 1}
			s.rb.init()
			s.rb.push(c.wire, len(c.wire), true)
			_, _, err := conn.readMsg(s, c.max, nil)
			if c.want != nil && err != c.want || c.want == nil && status.Code(err) != c.code {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// TestReadMsgWaits: readMsg waits for the rest of a message and ends with done or abort.
func TestReadMsgWaits(t *testing.T) {
	c := newTestConn(t)
	s := &streamCore{id: 1}
	s.rb.init()
	wire := msgBytes(0, payload(100))
	s.rb.push(wire[:50], 50, false)
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.rb.push(wire[50:], len(wire)-50, false)
	}()
	if got, _, err := c.readMsg(s, 1000, nil); err != nil || len(got) != 100 {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	done := make(chan struct{})
	close(done)
	if _, _, err := c.readMsg(s, 1000, done); err != errDone {
		t.Errorf("done: %v", err)
	}
	s.rb.abort(errStreamDone)
	if _, _, err := c.readMsg(s, 1000, nil); err != errStreamDone {
		t.Errorf("abort: %v", err)
	}
}

// TestRecvFlowControl: a peer overrunning the stream window is caught; a waited-for message
// larger than the window opens it (one WINDOW_UPDATE), consumed data is credited in batches.
func TestRecvFlowControl(t *testing.T) {
	var r recvBuf
	r.init()
	if code := r.push(make([]byte, streamRecvWindow+1), streamRecvWindow+1, false); code != http2.ErrCodeFlowControl {
		t.Errorf("overrun: %v", code)
	}
	r = recvBuf{}
	r.init()
	r.consumed = 1000
	if inc := r.windowIncrementLocked(0); inc != 0 {
		t.Errorf("small consumption credited at once: %d", inc)
	}
	r.consumed = streamRecvWindow / 2
	if inc := r.windowIncrementLocked(0); inc != streamRecvWindow/2 {
		t.Errorf("half window consumed: increment %d", inc)
	}
	msgEnd := int64(5 << 20)
	if inc := r.windowIncrementLocked(msgEnd); r.credited != msgEnd || inc <= 0 {
		t.Errorf("large message: credited %d (inc %d), want %d", r.credited, inc, msgEnd)
	}
	r.eof = true
	r.consumed = 100 << 20
	if inc := r.windowIncrementLocked(0); inc != 0 {
		t.Errorf("after END_STREAM: %d", inc)
	}
	if code := r.push(nil, 0, false); code != http2.ErrCodeStreamClosed {
		t.Errorf("DATA after END_STREAM: %v", code)
	}
}
