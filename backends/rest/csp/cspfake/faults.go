package cspfake

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Fault overrides how the fake answers matching requests.
type Fault struct {
	// Method matches the request method; "" matches any.
	Method string
	// Path matches the path relative to /containers/v1, with "*" for one segment:
	// "/volumes", "/volumes/*", "/volumes/*/actions/publish", "/tokens"; "" matches any.
	Path string
	// Times is how many matching requests the fault applies to: 0 means 1, a negative
	// number means every one until ClearFaults.
	Times int
	// Status, when set, is answered with Body instead of handling the request.
	Status int
	// Body is the raw body of that answer; "" means a CSP-shaped
	// {"errors":[{"code","message"}]} body (none for 204 and 304).
	Body string
	// EmptyBody answers Status with no body at all.
	EmptyBody bool
	// ContentType of that answer; "" means application/json.
	ContentType string
	// RetryAfter is sent as the Retry-After header of that answer.
	RetryAfter string
	// Latency is waited before handling or answering; the request is neither handled nor
	// answered if its context ends first.
	Latency time.Duration
	// DropReply handles the request (the write is applied), then closes the connection
	// without any answer.
	DropReply bool
	// CutReply sends the status line, headers and half of the body, then closes the
	// connection.
	CutReply bool
}

// pendingFault is an injected fault and how many more requests it applies to.
type pendingFault struct {
	Fault
	left int // < 0: unlimited
}

// Inject queues faults. Each request takes the first queued fault that matches it.
func (f *Fake) Inject(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range faults {
		left := ft.Times
		if left == 0 {
			left = 1
		}
		f.faults = append(f.faults, &pendingFault{Fault: ft, left: left})
	}
}

// ClearFaults drops every queued fault.
func (f *Fake) ClearFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// takeFault returns the first queued fault matching the request and uses it up once.
func (f *Fake) takeFault(method, rel string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.faults {
		if p.Method != "" && !strings.EqualFold(p.Method, method) || p.Path != "" && !pathMatches(p.Path, rel) {
			continue
		}
		if p.left > 0 {
			p.left--
			if p.left == 0 {
				f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
			}
		}
		ft := p.Fault
		return &ft
	}
	return nil
}

// pathMatches matches rel against pattern segment by segment, "*" matching one segment.
func pathMatches(pattern, rel string) bool {
	ps, rs := strings.Split(pattern, "/"), strings.Split(rel, "/")
	if len(ps) != len(rs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != rs[i] {
			return false
		}
	}
	return true
}

// reply is the fault's own answer (Status set).
func (ft *Fault) reply() reply {
	rep := reply{status: ft.Status, contentType: ft.ContentType, retryAfter: ft.RetryAfter}
	switch {
	case ft.EmptyBody || ft.Status == http.StatusNoContent || ft.Status == http.StatusNotModified:
	case ft.Body != "":
		rep.body = []byte(ft.Body)
	default:
		rep.body = cspError(ft.Status, http.StatusText(ft.Status), "injected fault").body
	}
	return rep
}

// dropConnection closes the client's connection: at once when partial is nil, else
// after the status line, the headers (with the full Content-Length) and half the body.
// Where the connection cannot be taken over (HTTP/2), the handler aborts instead.
func dropConnection(w http.ResponseWriter, partial *reply) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	if partial != nil {
		writePartial(buf.Writer, partial)
	}
}

func writePartial(w *bufio.Writer, rep *reply) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		rep.status, http.StatusText(rep.status), rep.mediaType(), len(rep.body))
	_, _ = w.Write(rep.body[:len(rep.body)/2])
	_ = w.Flush()
}
