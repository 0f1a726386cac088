package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// startTap serves tap's Handler on TapPath of an httptest server, as the admin listener does.
func startTap(t *testing.T, tap *Tap) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(TapPath, tap.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		tap.Close() // a stream never ends on its own, and srv.Close waits for it
		srv.Close()
	})
	return srv.URL
}

// tapClient is one client's stream; its request gives up after 60 s.
type tapClient struct {
	resp   *http.Response
	lines  *bufio.Reader
	cancel context.CancelFunc
}

// openTap subscribes to the tap at base with the query and checks the answer is a stream.
func openTap(t *testing.T, base, query string) *tapClient {
	t.Helper()
	resp, cancel := getTap(t, base, query)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s?%s: %s: %s", TapPath, query, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q, want application/x-ndjson", ct)
	}
	return &tapClient{resp: resp, lines: bufio.NewReaderSize(resp.Body, 1<<16), cancel: cancel}
}

func getTap(t *testing.T, base, query string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+TapPath+"?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	return resp, cancel
}

// next reads the next line: a record or a drop notice. It returns io.EOF when the stream ends.
func (c *tapClient) next(t *testing.T) (tapLine, error) {
	t.Helper()
	b, err := c.lines.ReadBytes('\n')
	if err != nil {
		if len(b) > 0 {
			t.Fatalf("the stream ended inside a line: %q", b)
		}
		return tapLine{}, err
	}
	var l tapLine
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("line %q: %v", b, err)
	}
	l.raw = string(b)
	return l, nil
}

// rest reads the stream to its end.
func (c *tapClient) rest(t *testing.T) []tapLine {
	t.Helper()
	var out []tapLine
	for {
		l, err := c.next(t)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
}

// tapLine is one line of a stream, decoded.
type tapLine struct {
	Dropped *uint64 `json:"dropped"`
	Method  string  `json:"method"`
	Code    string  `json:"code"`
	raw     string
}

// waitSubscribers waits until the tap has n subscribers: a stream is left asynchronously.
func waitSubscribers(t *testing.T, tap *Tap, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tap.Subscribers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers after 10s, want %d", tap.Subscribers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTapStreamsRecords(t *testing.T) {
	tap := NewTap()
	if tap.Observing() {
		t.Fatal("a tap nobody watches is observing: every call would build a record for nothing")
	}
	base := startTap(t, tap)
	c := openTap(t, base, "")
	if n := tap.Subscribers(); n != 1 || !tap.Observing() {
		t.Fatalf("%d subscribers (observing: %v) once the stream answered, want 1", n, tap.Observing())
	}
	rec := CallRecord{
		Time: time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC), Method: "CreateVolume",
		FullMethod: "/csi.v1.Controller/CreateVolume", Code: codes.AlreadyExists, CodeName: "AlreadyExists",
		Message: "volume <pvc-1> exists & differs", Duration: 2500 * time.Microsecond, DurationMS: 2.5,
		Caller: "uid=0", IDs: map[string]string{"name": "pvc-1"}, Backend: "array1", Attempts: 2,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
	for range 3 {
		tap.Observe(rec)
	}
	want := `{"time":"2026-03-01T12:30:45.123456789Z","method":"CreateVolume","full_method":"/csi.v1.Controller/CreateVolume",` +
		`"code":"AlreadyExists","message":"volume <pvc-1> exists & differs","duration_ms":2.5,"caller":"uid=0",` +
		`"ids":{"name":"pvc-1"},"backend":"array1","attempts":2,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n"
	for i := range 3 {
		l, err := c.next(t)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if l.raw != want {
			t.Errorf("record %d:\n got %s\nwant %s", i, l.raw, want)
		}
	}
	c.cancel()
	waitSubscribers(t, tap, 0)
}

// TestTapFiltersOverHTTP checks the query reaches the filter; TestTapFilterMatch covers the
// matching itself.
func TestTapFiltersOverHTTP(t *testing.T) {
	tap := NewTap()
	base := startTap(t, tap)
	all := openTap(t, base, "")
	failed := openTap(t, base, "code=!OK&backend=array2")
	for _, r := range tapRecords {
		tap.Observe(r)
	}
	tap.Close()
	if got := methodsCodes(all.rest(t)); got != "CreateVolume/OK CreateVolume/AlreadyExists ControllerGetVolume/NotFound CreateSnapshot/OK NodeStageVolume/OK NodeGetInfo/Unavailable Probe/Canceled" {
		t.Errorf("unfiltered stream: %s", got)
	}
	if got := methodsCodes(failed.rest(t)); got != "CreateVolume/AlreadyExists NodeGetInfo/Unavailable" {
		t.Errorf("code=!OK&backend=array2: %s", got)
	}
}

func methodsCodes(lines []tapLine) string {
	var s []string
	for _, l := range lines {
		s = append(s, l.Method+"/"+l.Code)
	}
	return strings.Join(s, " ")
}

func TestTapRefusals(t *testing.T) {
	tap := NewTap()
	base := startTap(t, tap)
	for _, tc := range []struct {
		method, query string
		code          int
		body          string
	}{
		{http.MethodGet, "volume=v&colour=red", 400, `tap: unknown filter "colour"; the filters are method, code, volume and backend`},
		{http.MethodGet, "code=Bogus", 400, `tap: code "Bogus" is not a gRPC code such as NotFound, or one excluded such as !OK`},
		{http.MethodPost, "", 405, "tap: use GET"},
	} {
		req, err := http.NewRequest(tc.method, base+TapPath+"?"+tc.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || strings.TrimSpace(string(body)) != tc.body {
			t.Errorf("%s ?%s: %d %q, want %d %q", tc.method, tc.query, resp.StatusCode, body, tc.code, tc.body)
		}
	}
	if n := tap.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after refusals, want 0", n)
	}
}

// TestTapSlowClientDoesNotBlock opens a stream and does not read it while 100000 calls end:
// Observe must return promptly, the records that did not fit are dropped and counted, and
// once the client reads, the stream accounts for every record, sent or dropped.
func TestTapSlowClientDoesNotBlock(t *testing.T) {
	const calls = 100000
	tap := NewTap(WithTapBuffer(64))
	base := startTap(t, tap)
	c := openTap(t, base, "")
	sub := (*tap.subs.Load())[0]
	// 1 KiB per record: far more than the socket buffers hold, so the handler blocks writing.
	rec := tapRecord("/csi.v1.Controller/CreateVolume", codes.OK, map[string]string{"name": "pvc-1"}, "array1")
	rec.Message = strings.Repeat("m", 1024)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range calls {
			tap.Observe(rec)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Observe blocked behind a client that does not read")
	}
	dropped := tap.Dropped()
	if dropped == 0 {
		t.Fatal("no record was dropped for a client that does not read")
	}
	if got := sub.dropped.Load(); got != dropped {
		t.Errorf("the subscriber counted %d drops, the tap %d", got, dropped)
	}

	var records, reported uint64
	for records+reported < calls {
		l, err := c.next(t)
		if err != nil {
			t.Fatalf("after %d records and %d reported drops: %v", records, reported, err)
		}
		if l.Dropped != nil {
			if *l.Dropped == 0 {
				t.Errorf("a drop notice of 0: %s", l.raw)
			}
			reported += *l.Dropped
			continue
		}
		records++
	}
	if reported != dropped {
		t.Errorf("the stream reported %d drops, the tap counted %d", reported, dropped)
	}
	t.Logf("%d records streamed, %d dropped", records, reported)
}

// TestTapDropsReportedInPlace checks a drop notice comes where records went missing: after
// the records buffered before them, before the first one buffered after them.
func TestTapDropsReportedInPlace(t *testing.T) {
	tap := NewTap(WithTapBuffer(2))
	sub, err := tap.subscribe(tapFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // 0 and 1 fit; 2, 3 and 4 are dropped
		tap.Observe(CallRecord{Attempts: i})
	}
	if got := (<-sub.ch); got.rec.Attempts != 0 || got.dropped != 0 {
		t.Errorf("first item %+v", got)
	}
	tap.Observe(CallRecord{Attempts: 5})
	for _, want := range []tapItem{{rec: CallRecord{Attempts: 1}}, {rec: CallRecord{Attempts: 5}, dropped: 3}} {
		if got := <-sub.ch; got.rec.Attempts != want.rec.Attempts || got.dropped != want.dropped {
			t.Errorf("item %+v, want %+v", got, want)
		}
	}
	if got := sub.dropped.Load(); got != 3 {
		t.Errorf("the subscriber counted %d drops, want 3", got)
	}
	if got := sub.pending.Load(); got != 0 {
		t.Errorf("%d drops still pending, want 0", got)
	}
}

func TestTapSubscriberCap(t *testing.T) {
	tap := NewTap(WithTapMaxSubscribers(2))
	base := startTap(t, tap)
	first := openTap(t, base, "")
	openTap(t, base, "method=Probe")
	resp, _ := getTap(t, base, "")
	body, _ := io.ReadAll(resp.Body)
	want := "tap: too many streams are open; close one or try again later"
	if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(string(body)) != want {
		t.Errorf("third stream: %s %q, want 503 %q", resp.Status, body, want)
	}
	first.cancel()
	waitSubscribers(t, tap, 1)
	openTap(t, base, "")
	if n := tap.Subscribers(); n != 2 {
		t.Errorf("%d subscribers, want 2", n)
	}
}

// TestTapClose checks Close ends every stream once it has written what it had, and refuses
// new ones.
func TestTapClose(t *testing.T) {
	tap := NewTap()
	base := startTap(t, tap)
	a, b := openTap(t, base, ""), openTap(t, base, "code=!OK")
	tap.Observe(tapRecords[2]) // NotFound: both get it
	tap.Close()
	tap.Close()
	tap.Observe(tapRecords[2]) // after Close: no one gets it
	for name, c := range map[string]*tapClient{"a": a, "b": b} {
		if got := methodsCodes(c.rest(t)); got != "ControllerGetVolume/NotFound" {
			t.Errorf("stream %s: %q before its end, want ControllerGetVolume/NotFound", name, got)
		}
	}
	waitSubscribers(t, tap, 0)
	resp, _ := getTap(t, base, "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(string(body)) != "tap: the gateway is shutting down" {
		t.Errorf("after Close: %s %q", resp.Status, body)
	}
}

// TestTapObserveAllocs checks Observe allocates nothing: with no subscriber, with one whose
// filter rejects the record, one that takes it, and one whose buffer is full.
func TestTapObserveAllocs(t *testing.T) {
	rec := tapRecords[3]
	tap := NewTap(WithTapBuffer(200))
	if n := testing.AllocsPerRun(1000, func() { tap.Observe(rec) }); n != 0 {
		t.Errorf("no subscriber: %v allocations per Observe, want 0", n)
	}
	q := map[string][]string{"method": {"Node*", "/csi.v1.Controller/Create*"}, "code": {"!Unavailable"}, "volume": {"vol-1"}, "backend": {"array1"}}
	f, err := parseTapFilter(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tap.subscribe(f); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { tap.Observe(tapRecords[0]) }); n != 0 {
		t.Errorf("filtered out: %v allocations per Observe, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { tap.Observe(rec) }); n != 0 {
		t.Errorf("buffered: %v allocations per Observe, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { tap.Observe(rec) }); n != 0 {
		t.Errorf("dropped: %v allocations per Observe, want 0", n)
	}
	if tap.Dropped() == 0 {
		t.Error("the buffer of 200 never filled")
	}
}

func BenchmarkTapObserve(b *testing.B) {
	rec := tapRecords[0]
	b.Run("no subscriber", func(b *testing.B) {
		tap := NewTap()
		for b.Loop() {
			tap.Observe(rec)
		}
	})
	b.Run("full buffer", func(b *testing.B) {
		tap := NewTap(WithTapBuffer(1))
		if _, err := tap.subscribe(tapFilter{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			tap.Observe(rec)
		}
	})
}
