package h2grpc

import (
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestSendQuota: quota is the minimum of the windows; a writer waits for WINDOW_UPDATE and
// gives up when done fires or the stream ends.
func TestSendQuota(t *testing.T) {
	c := newTestConn(t)
	s := &streamCore{id: 1, sendWin: 10, winInit: true}
	c.streams[1] = &ServerStream{}
	c.sendWin = 100
	if n, err := c.sendQuota(s, 50, nil, true, nil); n != 10 || err != nil {
		t.Fatalf("quota %d, %v; want 10", n, err)
	}
	if n, err := c.sendQuota(s, 50, nil, false, nil); n != 0 || err != nil {
		t.Fatalf("closed window: %d, %v", n, err)
	}
	got := make(chan int, 1)
	go func() {
		n, _ := c.sendQuota(s, 50, nil, true, nil)
		got <- n
	}()
	time.Sleep(10 * time.Millisecond)
	c.mu.Lock()
	s.sendWin += 30
	c.kickLocked()
	c.mu.Unlock()
	if n := <-got; n != 30 {
		t.Errorf("after update: %d, want 30", n)
	}
	done := make(chan struct{})
	close(done)
	if _, err := c.sendQuota(s, 1, done, true, nil); err != errDone {
		t.Errorf("done: %v", err)
	}
	c.mu.Lock()
	s.sendDone = true
	c.mu.Unlock()
	if _, err := c.sendQuota(s, 1, nil, true, nil); err != errStreamDone {
		t.Errorf("stream done: %v", err)
	}
}

func TestConnRecvFlow(t *testing.T) {
	c := newTestConn(t)
	if err := c.onDataFlow(connRecvWindow/4 - 1); err != nil {
		t.Fatal(err)
	}
	if c.recvUnacked == 0 {
		t.Fatal("credited below a quarter")
	}
	if err := c.onDataFlow(1); err != nil || c.recvUnacked != 0 || c.recvAvail != connRecvWindow {
		t.Errorf("at a quarter: unacked %d avail %d %v", c.recvUnacked, c.recvAvail, err)
	}
	c.recvAvail = 10
	if err := c.onDataFlow(11); err != http2.ConnectionError(http2.ErrCodeFlowControl) {
		t.Errorf("overrun: %v", err)
	}
}
