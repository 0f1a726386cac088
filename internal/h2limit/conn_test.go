package h2limit

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// pair is a watched server connection on loopback TCP and its client, a Framer. The server
// side's reads run on a goroutine that keeps reading until the Conn fails them.
type pair struct {
	srv      *Conn
	client   net.Conn
	fr       *http2.Framer
	srvFr    *http2.Framer // writes through srv, as grpc-go's writer would
	readDone chan error
	mu       sync.Mutex
	reason   string
}

func newPair(t *testing.T, cfg Config, settings ...http2.Setting) *pair {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{client: client, readDone: make(chan error, 1)}
	cfg.Ended = func(reason string) { p.mu.Lock(); p.reason = reason; p.mu.Unlock() }
	p.srv = NewConn(nc, cfg)
	t.Cleanup(func() { client.Close(); p.srv.Close() })
	_ = client.SetDeadline(time.Now().Add(20 * time.Second))
	p.fr = http2.NewFramer(client, client)
	p.srvFr = http2.NewFramer(p.srv, nil)
	if _, err := client.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := p.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := p.srv.Read(buf); err != nil {
				p.readDone <- err
				return
			}
		}
	}()
	return p
}

// goAway reads the client's frames until a GOAWAY and returns it, failing the test on EOF.
func (p *pair) goAway(t *testing.T) *http2.GoAwayFrame {
	t.Helper()
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			t.Fatalf("the client read %v before a GOAWAY", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// serverReadErr waits for the server's reads to fail and returns why.
func (p *pair) serverReadErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.readDone:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the server's reads still succeed")
		return nil
	}
}

// TestConnResets: resets within the budget leave the connection up; the first one past it
// ends the connection with GOAWAY(ENHANCE_YOUR_CALM, too_many_resets), and the server's reads
// fail.
func TestConnResets(t *testing.T) {
	p := newPair(t, Config{ResetsPerSecond: 50})
	for i := uint32(0); i < 200; i++ {
		id := 2*i + 1
		if err := p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x83}, EndHeaders: true}); err != nil {
			break // the server closed: it has ended the connection
		}
		if err := p.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			break
		}
	}
	g := p.goAway(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != ReasonTooManyResets {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM %q", g.ErrCode, g.DebugData(), ReasonTooManyResets)
	}
	if g.LastStreamID < 101 {
		t.Errorf("GOAWAY's last stream %d: want at least the 51st stream, 101", g.LastStreamID)
	}
	if err := p.serverReadErr(t); !errors.Is(err, errEnded) && !errors.Is(err, net.ErrClosed) {
		t.Errorf("the server's read failed with %v, want the Conn's end", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != ReasonTooManyResets {
		t.Errorf("Ended learned %q, want %q", p.reason, ReasonTooManyResets)
	}
}

// TestConnResetsWithinBudget: 50 resets at once on a budget of 50 are allowed.
func TestConnResetsWithinBudget(t *testing.T) {
	p := newPair(t, Config{ResetsPerSecond: 50})
	for i := uint32(0); i < 50; i++ {
		id := 2*i + 1
		p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x83}, EndHeaders: true})
		p.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 999, BlockFragment: []byte{0x83}, EndHeaders: true})
	p.waitFor(t, "stream 999 opened", func(c *Conn) bool { return c.maxID == 999 })
	if p.srv.ended.Load() {
		t.Fatal("50 resets on a budget of 50 ended the connection")
	}
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	if len(p.srv.streams) != 1 {
		t.Errorf("%d streams watched, want 1 (999; the 50 others were reset)", len(p.srv.streams))
	}
}

// waitFor waits until cond holds over the server Conn's state (read under its lock).
func (p *pair) waitFor(t *testing.T, what string, cond func(*Conn) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.srv.mu.Lock()
		ok := cond(p.srv)
		p.srv.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not seen within 20s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnWriteTimeout: a client whose streams have no window (SETTINGS_INITIAL_WINDOW_SIZE
// 0) gets a started answer held back; after WriteTimeout the connection ends with
// GOAWAY(ENHANCE_YOUR_CALM, write_timeout).
func TestConnWriteTimeout(t *testing.T) {
	p := newPair(t, Config{ResetsPerSecond: 100, WriteTimeout: 50 * time.Millisecond},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	p.waitFor(t, "stream 1 opened with no window", func(c *Conn) bool { return c.maxID == 1 && c.initWin == 0 })
	if err := p.srvFr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	g := p.goAway(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != ReasonWriteTimeout || g.LastStreamID != 1 {
		t.Errorf("GOAWAY %v %q last stream %d, want ENHANCE_YOUR_CALM %q 1", g.ErrCode, g.DebugData(), g.LastStreamID, ReasonWriteTimeout)
	}
	p.serverReadErr(t)
	if _, err := p.fr.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Errorf("after the GOAWAY the client read %v, want EOF", err)
	}
}

// TestConnWindowFollowed: answers that fit their windows, or whose window the client opens
// again, are never held: the timer is not running once they are written or opened.
func TestConnWindowFollowed(t *testing.T) {
	p := newPair(t, Config{ResetsPerSecond: 100, WriteTimeout: time.Hour},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	// Stream 1: HEADERS, 10 bytes of DATA (its whole window), trailers.
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
	p.waitFor(t, "stream 1 opened", func(c *Conn) bool { return c.maxID == 1 && c.initWin == 10 })
	p.srvFr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true})
	p.srvFr.WriteData(1, false, make([]byte, 10))
	p.waitFor(t, "stream 1's window used up, held", func(c *Conn) bool { return c.armed && !c.streams[1].held.IsZero() })
	p.srvFr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndStream: true, EndHeaders: true})
	p.waitFor(t, "stream 1 forgotten", func(c *Conn) bool { return len(c.streams) == 0 && c.answering == 0 })
	// Stream 3: held, then its window opened by a WINDOW_UPDATE.
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x83}, EndHeaders: true})
	p.waitFor(t, "stream 3 opened", func(c *Conn) bool { return c.maxID == 3 })
	p.srvFr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x88}, EndHeaders: true})
	p.srvFr.WriteData(3, false, make([]byte, 10))
	p.waitFor(t, "stream 3 held", func(c *Conn) bool { return !c.streams[3].held.IsZero() })
	p.fr.WriteWindowUpdate(3, 1)
	p.waitFor(t, "stream 3 released by its WINDOW_UPDATE", func(c *Conn) bool { return c.streams[3].held.IsZero() })
	// The connection's window: 65535 used up by stream 3 (whose own window is opened wide).
	p.fr.WriteWindowUpdate(3, 1<<20)
	p.waitFor(t, "stream 3's window opened", func(c *Conn) bool { return c.initWin+c.streams[3].credit > 1<<19 })
	p.srvFr.WriteData(3, false, make([]byte, 65535-10))
	p.waitFor(t, "the connection's window used up, held", func(c *Conn) bool { return !c.connHeld.IsZero() })
	p.fr.WriteWindowUpdate(0, 100)
	p.waitFor(t, "the connection released by its WINDOW_UPDATE", func(c *Conn) bool { return c.connHeld.IsZero() })
	if p.srv.ended.Load() {
		t.Fatal("the connection ended")
	}
}
