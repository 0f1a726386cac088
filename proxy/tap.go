package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// TapPath is where the admin listener serves the tap.
const TapPath = "/debug/tap"

const (
	defaultTapBuffer      = 1024
	defaultTapSubscribers = 16
)

// Tap is the live view of the gateway's calls: a CallObserver that hands the record of every
// finished call to the clients streaming its Handler, each through a buffer of its own.
//
// A call never waits for the tap. When a subscriber's buffer is full its record is dropped
// for that subscriber alone, counted, and the stream says so (a {"dropped":N} line) before
// the next record it carries. With nobody subscribed, Observe is one atomic load.
//
// Records carry no payload and no secret (see CallRecord), but they show every call's
// method, caller, IDs and backend: serve the tap on the admin listener only, never on a
// listener CSI callers or the network at large can reach.
//
// A Tap is safe for concurrent use. Close ends every stream; the owner of the admin
// listener calls it on shutdown, as a stream never ends on its own.
type Tap struct {
	buffer  int
	maxSubs int

	// subs is the current subscribers, replaced whole under mu (copy on write) and nil when
	// there are none, so that Observe reads it with one atomic load and no lock.
	subs    atomic.Pointer[[]*tapSub]
	dropped atomic.Uint64 // records dropped for any subscriber since the tap was made

	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed by Close
}

// TapOption changes a default of NewTap.
type TapOption func(*Tap)

// WithTapBuffer sets how many records each subscriber's buffer holds (default 1024). A value
// below 1 keeps the default.
func WithTapBuffer(n int) TapOption {
	return func(t *Tap) {
		if n > 0 {
			t.buffer = n
		}
	}
}

// WithTapMaxSubscribers sets how many streams may be open at once (default 16); the next
// gets 503 Service Unavailable. A value below 1 keeps the default.
func WithTapMaxSubscribers(n int) TapOption {
	return func(t *Tap) {
		if n > 0 {
			t.maxSubs = n
		}
	}
}

// NewTap returns a tap with no subscribers. Pass it in Options.Observers and route TapPath
// on the admin listener to its Handler.
func NewTap(opts ...TapOption) *Tap {
	t := &Tap{buffer: defaultTapBuffer, maxSubs: defaultTapSubscribers, done: make(chan struct{})}
	for _, o := range opts {
		o(t)
	}
	return t
}

// tapSub is one stream's subscription.
type tapSub struct {
	filter tapFilter
	ch     chan tapItem // never closed: Observe may still hold a subscriber that just left
	// pending counts the records dropped since the last one that got into ch, not yet
	// reported; dropped counts them all.
	pending atomic.Uint64
	dropped atomic.Uint64
}

// tapItem is a record in a subscriber's buffer, with the number of records dropped just
// before it.
type tapItem struct {
	rec     CallRecord
	dropped uint64
}

// Observe offers rec to every subscriber whose filter it passes. It never blocks and does
// not allocate. The tap keeps rec (and its IDs map) until it is written: observers must not
// modify a record.
func (t *Tap) Observe(rec CallRecord) {
	subs := t.subs.Load()
	if subs == nil {
		return
	}
	for _, s := range *subs {
		if s.filter.match(&rec) {
			t.offer(s, &rec)
		}
	}
}

// offer puts rec in s's buffer, or drops and counts it when the buffer is full. The drops
// not yet reported ride along with the record that gets through, so each is reported at the
// place in the stream where records went missing.
func (t *Tap) offer(s *tapSub, rec *CallRecord) {
	d := s.pending.Swap(0)
	select {
	case s.ch <- tapItem{rec: *rec, dropped: d}:
	default:
		s.pending.Add(d + 1)
		s.dropped.Add(1)
		t.dropped.Add(1)
	}
}

// Observing reports whether anyone watches: while nobody does, the gateway builds no call
// records for the tap (see CallObserver).
func (t *Tap) Observing() bool { return t.Subscribers() > 0 }

// Subscribers returns the number of open streams.
func (t *Tap) Subscribers() int {
	if subs := t.subs.Load(); subs != nil {
		return len(*subs)
	}
	return 0
}

// Dropped returns how many records were dropped, summed over every subscriber that has ever
// been, because a subscriber read too slowly.
func (t *Tap) Dropped() uint64 { return t.dropped.Load() }

// Close ends every stream, once each has written the records already in its buffer, and
// refuses new ones with 503. Observe keeps working and costs nothing. Close may be called
// more than once; it does not wait for the streams' handlers to return. Its signature suits
// http.Server.RegisterOnShutdown.
func (t *Tap) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	close(t.done)
	t.subs.Store(nil)
}

var (
	errTapClosed = errors.New("tap: the gateway is shutting down")
	errTapFull   = errors.New("tap: too many streams are open; close one or try again later")
)

func (t *Tap) subscribe(f tapFilter) (*tapSub, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errTapClosed
	}
	var cur []*tapSub
	if p := t.subs.Load(); p != nil {
		cur = *p
	}
	if len(cur) >= t.maxSubs {
		return nil, errTapFull
	}
	s := &tapSub{filter: f, ch: make(chan tapItem, t.buffer)}
	next := append(slices.Clip(cur), s) // a new array: Observe may be reading cur
	t.subs.Store(&next)
	return s, nil
}

func (t *Tap) unsubscribe(s *tapSub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.subs.Load()
	if p == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*p), func(o *tapSub) bool { return o == s })
	if len(next) == 0 {
		t.subs.Store(nil)
		return
	}
	t.subs.Store(&next)
}

// Handler serves GET TapPath: a stream of NDJSON (application/x-ndjson), one JSON CallRecord
// per line as calls end, with a {"dropped":N} line wherever N records were dropped because
// the client read too slowly. Query parameters filter the records (a parameter given more
// than once matches any of its values; different parameters must all match):
//
//	method   short or full name ("CreateVolume", "/csi.v1.Controller/CreateVolume"), or a
//	         glob of either ("Node*", "/csi.v1.Controller/*")
//	code     a gRPC code ("NotFound", "NOT_FOUND" or 5); "!OK" excludes one (failures only)
//	volume   ids.volume_id or ids.source_volume_id
//	backend  the backend's name
//
// An unknown parameter or a bad value gets 400 naming it; more streams than the cap, or a
// closed tap, get 503. The stream ends when the client goes away or the tap is closed.
// Everything written is flushed before the handler waits for the next record.
func (t *Tap) Handler() http.Handler { return http.HandlerFunc(t.serveHTTP) }

func (t *Tap) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "tap: use GET", http.StatusMethodNotAllowed)
		return
	}
	f, err := parseTapFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s, err := t.subscribe(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer t.unsubscribe(s)

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any WriteTimeout of the server
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil { // the client must know it is subscribed before any record comes
		return
	}
	st := tapStream{enc: json.NewEncoder(w), sub: s}
	st.enc.SetEscapeHTML(false)
	for {
		select {
		case it := <-s.ch:
			if st.write(it) != nil {
				return
			}
			continue
		default:
		}
		// The buffer is empty: report drops nothing has carried yet, push out what was
		// written, then wait.
		if st.idle() != nil || rc.Flush() != nil {
			return
		}
		select {
		case it := <-s.ch:
			if st.write(it) != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-t.done:
			st.drain()
			rc.Flush()
			return
		}
	}
}

// tapStream writes one subscriber's stream.
type tapStream struct {
	enc *json.Encoder
	sub *tapSub
}

// tapDropped is the line that reports records dropped for a slow client.
type tapDropped struct {
	Dropped uint64 `json:"dropped"`
}

func (st tapStream) write(it tapItem) error {
	if it.dropped > 0 {
		if err := st.enc.Encode(tapDropped{it.dropped}); err != nil {
			return err
		}
	}
	return st.enc.Encode(it.rec)
}

func (st tapStream) idle() error {
	if d := st.sub.pending.Swap(0); d > 0 {
		return st.enc.Encode(tapDropped{d})
	}
	return nil
}

// drain writes what is left in the buffer once the tap is closed.
func (st tapStream) drain() {
	for {
		select {
		case it := <-st.sub.ch:
			if st.write(it) != nil {
				return
			}
		default:
			st.idle()
			return
		}
	}
}
