package attack

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// attackDeadline is how long a case waits for the gateway's answer to an attack (beyond the
// configured timeout the answer depends on, if any). It is generous: a refusal comes in
// milliseconds on an idle machine, and the wait ends as soon as it comes.
const attackDeadline = 15 * time.Second

// attackCase is one attack. run sends it, bounded in count and time, and returns what the
// attacker got; its error says how the gateway's answer falls short of a refusal.
type attackCase struct {
	name string
	// what describes the attack for the report (the table row it comes from).
	what   string
	limits limitsConfig
	run    func(t *testing.T, g *gateway) (got string, err error)
}

// transports are the values of the gateway's transport key; every case runs on each.
var transports = []string{"frames", "grpc"}

var attackCases = []attackCase{
	{
		name:   "big-data-frame",
		what:   "20 TLS connections, each announcing a 16 MiB DATA frame (the gateway advertises 16 KiB)",
		limits: defaultLimits,
		run:    bigDataFrame,
	},
	{
		name:   "header-list",
		what:   "50 streams on one TLS connection, each with a 4 KB -bin header indexed up to a 16 MiB header list, no body",
		limits: defaultLimits,
		run: func(t *testing.T, g *gateway) (string, error) {
			return headerList(g.tlsTarget(t, attackerID))
		},
	},
	{
		name:   "stream-flood",
		what:   "20,000 streams opened on one Unix connection, no body",
		limits: defaultLimits,
		run:    streamFlood,
	},
	{
		name:   "no-read",
		what:   "900 Probe calls on 9 Unix connections whose client never opens its receive window",
		limits: defaultLimits,
		run:    noRead,
	},
	{
		name:   "first-message",
		what:   "100 streams on one Unix connection whose request message never comes (firstMessageTimeout 2s)",
		limits: limitsConfig{firstMessageTimeout: 2 * time.Second, writeTimeout: 2 * time.Second},
		run:    firstMessage,
	},
	{
		name:   "continuation-flood",
		what:   "one TLS stream's HEADERS followed by up to 2,000 16 KiB CONTINUATION frames",
		limits: defaultLimits,
		run:    continuationFlood,
	},
	{
		name:   "rapid-reset",
		what:   "up to 20,000 Probe calls on one TLS connection, each reset as soon as it is sent (CVE-2023-44487)",
		limits: defaultLimits,
		run:    rapidReset,
	},
	{
		name:   "ping-flood",
		what:   "up to 10,000 PINGs on one Unix connection",
		limits: defaultLimits,
		run:    pingFlood,
	},
	{
		name:   "unlisted-identity",
		what:   "the header-list attack from a client certificate of the right CA whose identity is not in clients",
		limits: defaultLimits,
		run: func(t *testing.T, g *gateway) (string, error) {
			return refusedCaller(g.tlsTarget(t, unlistedID))
		},
	},
	{
		name:   "wrong-uid",
		what:   "the header-list attack from a Unix caller whose uid is not in allowUIDs",
		limits: defaultLimits,
		run: func(t *testing.T, g *gateway) (string, error) {
			return refusedCaller(attackerTarget{unix: g.lockedSock})
		},
	},
}

// TestAttacks runs every attack against the real binary on each transport, each case on a
// gateway of its own, and checks three things: the gateway's peak RSS stays under rssBound,
// the bystander's every Probe is answered, and the attacker gets a protocol error or a
// refused connection. It logs one line per case with the figures, and all of them at the end.
func TestAttacks(t *testing.T) {
	t.Parallel() // with TestH2spec, whose gateways are other processes
	var summary []string
	for _, transport := range transports {
		for _, c := range attackCases {
			name := transport + "/" + c.name
			t.Run(name, func(t *testing.T) {
				line := "FAIL before the attack (see its log)"
				defer func() { summary = append(summary, name+": "+line) }() // also after t.Fatal
				line = runAttack(t, transport, c)
			})
		}
	}
	t.Logf("summary (peak RSS bound %d MiB, GOMEMLIMIT %s):\n%s", rssBound>>20, goMemLimit, strings.Join(summary, "\n"))
}

// runAttack runs one case on a fresh gateway and returns its one-line summary.
func runAttack(t *testing.T, transport string, c attackCase) string {
	g := startGateway(t, transport, c.limits, "")
	_, idle, err := g.memory()
	if err != nil {
		t.Fatal(err)
	}
	b := startBystander(t, g.sock)
	start := time.Now()
	got, attackErr := c.run(t, g)
	took := time.Since(start)
	calls, failed, firstErr := b.finish()
	peak, _, memErr := g.memory()

	var problems []string
	if attackErr != nil {
		problems = append(problems, "attacker: "+attackErr.Error())
	}
	if memErr != nil {
		problems = append(problems, "memory: "+memErr.Error())
	} else if peak > rssBound {
		problems = append(problems, fmt.Sprintf("peak RSS %s is over the bound of %s", mib(peak), mib(rssBound)))
	}
	if failed > 0 {
		problems = append(problems, fmt.Sprintf("bystander: %d of %d Probe calls failed, the first with %v", failed, calls, firstErr))
	}
	if err := exitStatus(g.proc, 100*time.Millisecond); err != nil {
		problems = append(problems, "the gateway "+err.Error())
	}
	verdict := "PASS"
	if len(problems) > 0 {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("%s: peak RSS %s (idle %s); bystander %d calls, %d failed; attack took %v; attacker got: %s",
		verdict, mib(peak), mib(idle), calls, failed, took.Round(100*time.Millisecond), got)
	t.Logf("%s: %s", c.what, line)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 && exitStatus(g.proc, 100*time.Millisecond) != nil {
		t.Logf("gateway output:\n%s", tail(g.proc.Output(), 4000))
	}
	return line
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// dialAll opens n attacker connections to target, each sending settings. A connection the
// gateway refuses (the dial fails) is not an error: it is reported in refused.
func dialAll(t *testing.T, target attackerTarget, n int, settings ...http2.Setting) (conns []*rawConn, refused []error) {
	for i := 0; i < n; i++ {
		rc, err := dialRaw(target, settings...)
		if err != nil {
			refused = append(refused, err)
			continue
		}
		t.Cleanup(rc.close)
		conns = append(conns, rc)
	}
	return conns, refused
}

// waitAll waits, until deadline, for cond to hold on every connection, and returns how many
// it held on.
func waitAll(conns []*rawConn, deadline time.Time, cond func(*answers) bool) int {
	n := 0
	for _, rc := range conns {
		if rc.waitFor(time.Until(deadline), cond) {
			n++
		}
	}
	return n
}

// bigDataFrame: each connection opens a Probe call and then sends a DATA frame whose length
// is 16 MiB − 1 (the largest HTTP/2 allows), header first, then its payload, until the
// gateway ends the connection. A gateway that sizes its read buffer by the announced length
// holds 16 MiB per connection. Expected: GOAWAY FRAME_SIZE_ERROR (or the connection closed)
// on every connection, at the frame's header.
func bigDataFrame(t *testing.T, g *gateway) (string, error) {
	const n, length = 20, 1<<24 - 1
	conns, refused := dialAll(t, g.tlsTarget(t, attackerID), n)
	chunk := make([]byte, 64<<10) // zeros: empty gRPC messages, to a gateway that reads them
	deadline := time.Now().Add(attackDeadline)
	for _, rc := range conns {
		err := rc.writeHeaders(1, false, callHeaders(probeMethod))
		if err == nil {
			err = rc.writeRaw(frameHeader(length, http2.FrameData, 0, 1))
		}
		for sent := 0; err == nil && sent < length && rc.stillOpen() == nil && time.Now().Before(deadline); sent += len(chunk) {
			err = rc.writeRaw(chunk[:min(len(chunk), length-sent)])
		}
		if err == nil {
			err = rc.flush()
		}
		if err != nil && !rc.waitFor(5*time.Second, (*answers).connEnded) {
			return "", fmt.Errorf("sending: %v", err)
		}
	}
	ended := waitAll(conns, time.Now().Add(attackDeadline), (*answers).connEnded)
	got := fmt.Sprintf("%d of %d connections ended, %d refused at dial; the first: %s", ended, n, len(refused), first(conns))
	if ended < len(conns) {
		return got, fmt.Errorf("%d connections still open %v after announcing a 16 MiB DATA frame; want GOAWAY FRAME_SIZE_ERROR",
			len(conns)-ended, attackDeadline)
	}
	for _, rc := range conns {
		if a := rc.answers(); a.goaway != nil && *a.goaway != http2.ErrCodeFrameSize {
			return got, fmt.Errorf("GOAWAY %s, want FRAME_SIZE_ERROR", a.goaway)
		}
	}
	return got, nil
}

// first describes what the first connection got, or says there was none.
func first(conns []*rawConn) string {
	if len(conns) == 0 {
		return "no connection"
	}
	a := conns[0].answers()
	return a.String()
}

// headerList opens 50 streams on one connection. Each HEADERS frame carries a 4,000-byte
// x-attack-bin field with incremental indexing, then about 4,100 one-byte references to it:
// 8 KB on the wire that decode to a 16 MiB header list. No body follows. Expected: every
// stream reset, or the connection ended, without the gateway keeping the headers.
func headerList(target attackerTarget) (string, error) {
	const streams = 50
	rc, err := dialRaw(target)
	if err != nil {
		return "refused at dial: " + err.Error(), nil
	}
	defer rc.close()
	if err := sendHeaderLists(rc, streams); err != nil && rc.stillOpen() == nil {
		return "", fmt.Errorf("sending: %v", err)
	}
	ok := rc.waitFor(attackDeadline, func(a *answers) bool {
		for i := uint32(0); i < streams; i++ {
			if !a.done(2*i + 1) {
				return false
			}
		}
		return true
	})
	a := rc.answers()
	if !ok {
		return a.String(), fmt.Errorf("%d of %d streams with a 16 MiB header list neither reset nor answered after %v",
			streams-len(a.rst)-len(a.ended), streams, attackDeadline)
	}
	return a.String(), nil
}

// sendHeaderLists writes the header-list attack's streams on rc.
func sendHeaderLists(rc *rawConn, streams int) error {
	value := strings.Repeat("A", 4000) // valid base64, so a -bin value decodes
	field := hpack.HeaderField{Name: "x-attack-bin", Value: value}
	refs := (16<<20)/int(field.Size()) - 1
	// The field was the last one encoded, so it is the newest entry of the dynamic table:
	// index 62, the first after the static table's 61.
	indexed := bytes.Repeat([]byte{0x80 | 62}, refs)
	for i := 0; i < streams; i++ {
		id := uint32(2*i + 1)
		err := rc.write(func() error {
			block := append(rc.encode(callHeaders(probeMethod, field)), indexed...)
			return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
		})
		if err != nil {
			return err
		}
	}
	return rc.flush()
}

// streamFlood waits for the gateway's SETTINGS, then opens 20,000 streams (HEADERS only) on
// one connection. Expected: all but maxConcurrentStreams refused with RST_STREAM
// REFUSED_STREAM, or the connection ended.
func streamFlood(t *testing.T, g *gateway) (string, error) {
	const streams = 20000
	rc, err := dialRaw(attackerTarget{unix: g.sock})
	if err != nil {
		return "", fmt.Errorf("dial: %v", err)
	}
	defer rc.close()
	if !rc.waitFor(attackDeadline, func(a *answers) bool { return a.settings || a.connEnded() }) {
		return "", fmt.Errorf("no SETTINGS from the gateway within %v", attackDeadline)
	}
	for i := 0; i < streams && rc.stillOpen() == nil; i++ {
		err := rc.writeHeaders(uint32(2*i+1), false, callHeaders(probeMethod))
		if err == nil && i%500 == 499 {
			err = rc.flush()
		}
		if err != nil && rc.stillOpen() == nil {
			return "", fmt.Errorf("sending stream %d: %v", i, err)
		}
	}
	rc.flush()
	want := streams - maxConcurrentStreams
	ok := rc.waitFor(attackDeadline, func(a *answers) bool { return a.connEnded() || a.refusedStreams() >= want })
	a := rc.answers()
	got := fmt.Sprintf("%d of %d streams refused; %s", a.refusedStreams(), streams, a.String())
	if !ok {
		return got, fmt.Errorf("%d streams accepted on one connection after %v; want at most %d (maxConcurrentStreams)",
			streams-a.refusedStreams(), attackDeadline, maxConcurrentStreams)
	}
	return got, nil
}

// noRead opens 9 connections whose SETTINGS_INITIAL_WINDOW_SIZE is 0 and makes 100 whole
// Probe calls on each: the gateway can send their headers but not one byte of their answers.
// Expected: every call ended (RST_STREAM) or its connection ended within the write timeout.
func noRead(t *testing.T, g *gateway) (string, error) {
	const n, perConn = 9, 100
	conns, refused := dialAll(t, attackerTarget{unix: g.sock}, n, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	if len(refused) > 0 {
		return "", fmt.Errorf("dial: %v", refused[0])
	}
	for _, rc := range conns {
		for i := 0; i < perConn; i++ {
			if err := rc.writeProbe(uint32(2*i + 1)); err != nil && rc.stillOpen() == nil {
				return "", fmt.Errorf("sending: %v", err)
			}
		}
		if err := rc.flush(); err != nil && rc.stillOpen() == nil {
			return "", fmt.Errorf("sending: %v", err)
		}
	}
	deadline := time.Now().Add(defaultLimits.writeTimeout + attackDeadline)
	allEnded := func(a *answers) bool {
		for i := uint32(0); i < perConn; i++ {
			if !a.done(2*i + 1) {
				return false
			}
		}
		return true
	}
	ended := waitAll(conns, deadline, allEnded)
	got := fmt.Sprintf("%d of %d connections had every call ended; the first: %s", ended, n, first(conns))
	if ended < n {
		return got, fmt.Errorf("calls whose answers could not be written still open after the write timeout (%v) + %v",
			defaultLimits.writeTimeout, attackDeadline)
	}
	return got, nil
}

// firstMessage opens 100 streams whose request message never comes. Expected: each ended
// (RST_STREAM or an error status) within firstMessageTimeout.
func firstMessage(t *testing.T, g *gateway) (string, error) {
	const streams = 100
	rc, err := dialRaw(attackerTarget{unix: g.sock})
	if err != nil {
		return "", fmt.Errorf("dial: %v", err)
	}
	defer rc.close()
	for i := 0; i < streams; i++ {
		if err := rc.writeHeaders(uint32(2*i+1), false, callHeaders(probeMethod)); err != nil {
			return "", fmt.Errorf("sending: %v", err)
		}
	}
	if err := rc.flush(); err != nil {
		return "", fmt.Errorf("sending: %v", err)
	}
	timeout := 2*time.Second + attackDeadline
	ok := rc.waitFor(timeout, func(a *answers) bool {
		for i := uint32(0); i < streams; i++ {
			if !a.done(2*i + 1) {
				return false
			}
		}
		return true
	})
	a := rc.answers()
	if !ok {
		return a.String(), fmt.Errorf("%d of %d calls without a request message still open after %v",
			streams-len(a.rst)-len(a.ended), streams, timeout)
	}
	return a.String(), nil
}

// continuationFlood sends a HEADERS frame without END_HEADERS, then CONTINUATION frames of
// 16 KiB, each of 16,384 references to a static-table field (about 1 MiB of header list per
// frame), until the gateway ends the stream or the connection, or 2,000 frames are sent.
// Expected: RST_STREAM or GOAWAY (or the connection closed) long before the 2,000th frame.
func continuationFlood(t *testing.T, g *gateway) (string, error) {
	const frames = 2000
	rc, err := dialRaw(g.tlsTarget(t, attackerID))
	if err != nil {
		return "", fmt.Errorf("dial: %v", err)
	}
	defer rc.close()
	err = rc.write(func() error {
		return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.encode(callHeaders(probeMethod))})
	})
	// Static index 16 is accept-encoding: gzip, deflate.
	fragment := bytes.Repeat([]byte{0x80 | 16}, 16384)
	sent := 0
	deadline := time.Now().Add(attackDeadline)
	stopped := func() bool { a := rc.answers(); return a.connEnded() || a.done(1) }
	for ; err == nil && sent < frames && !stopped() && time.Now().Before(deadline); sent++ {
		err = rc.write(func() error { return rc.fr.WriteContinuation(1, false, fragment) })
		if err == nil && sent%16 == 15 {
			err = rc.flush()
		}
	}
	if err == nil {
		err = rc.flush()
	}
	ok := rc.waitFor(attackDeadline, func(a *answers) bool { return a.connEnded() || a.done(1) })
	a := rc.answers()
	got := fmt.Sprintf("sent %d CONTINUATION frames (%d MiB); %s", sent, sent*16384>>20, a.String())
	if !ok {
		if err != nil {
			return got, fmt.Errorf("the gateway neither reset the stream nor ended the connection; sending stopped with %v", err)
		}
		return got, errors.New("the gateway neither reset the stream nor ended the connection")
	}
	return got, nil
}

// rapidReset waits for the gateway's SETTINGS, then sends whole Probe calls, each followed at
// once by RST_STREAM(CANCEL), until the gateway ends the connection or 20,000 are sent.
// Expected, on both transports: GOAWAY ENHANCE_YOUR_CALM (or the connection closed) once the
// resets outrun limits.maxStreamResetsPerSecond (200 a second, in bursts of 200): the
// attacker is told that the gateway will start no more work for it. Streams refused with
// REFUSED_STREAM before that are not enough: an attacker that keeps its handlers in flight
// below the limit could go on for ever.
func rapidReset(t *testing.T, g *gateway) (string, error) {
	return floodUntilCalm(g.tlsTarget(t, attackerID), 20000, "calls, each reset", func(rc *rawConn, i int) error {
		id := uint32(2*i + 1)
		if err := rc.writeProbe(id); err != nil {
			return err
		}
		return rc.write(func() error { return rc.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
	})
}

// pingFlood sends PINGs until the gateway ends the connection or 10,000 are sent. Expected:
// GOAWAY ENHANCE_YOUR_CALM (or the connection closed).
func pingFlood(t *testing.T, g *gateway) (string, error) {
	return floodUntilCalm(attackerTarget{unix: g.sock}, 10000, "PINGs", func(rc *rawConn, i int) error {
		return rc.write(func() error { return rc.fr.WritePing(false, [8]byte{byte(i)}) })
	})
}

// floodUntilCalm waits for the gateway's SETTINGS on a connection to target, then calls send
// for i = 0, 1, … (flushing every 100) until the gateway ends the connection, n are sent or
// attackDeadline passes. Expected: GOAWAY ENHANCE_YOUR_CALM, or the connection closed.
func floodUntilCalm(target attackerTarget, n int, what string, send func(rc *rawConn, i int) error) (string, error) {
	rc, err := dialRaw(target)
	if err != nil {
		return "", fmt.Errorf("dial: %v", err)
	}
	defer rc.close()
	if !rc.waitFor(attackDeadline, func(a *answers) bool { return a.settings || a.connEnded() }) {
		return "", fmt.Errorf("no SETTINGS from the gateway within %v", attackDeadline)
	}
	sent := 0
	deadline := time.Now().Add(attackDeadline)
	for ; err == nil && sent < n && rc.stillOpen() == nil && time.Now().Before(deadline); sent++ {
		err = send(rc, sent)
		if err == nil && sent%100 == 99 {
			err = rc.flush()
		}
	}
	if err == nil {
		_ = rc.flush() // a gateway that ended the connection refuses it: what it answered is read below
	}
	ok := rc.waitFor(attackDeadline, (*answers).connEnded)
	a := rc.answers()
	got := fmt.Sprintf("sent %d %s; %s", sent, what, a.String())
	if !ok {
		return got, fmt.Errorf("the connection is still open after %d %s; want GOAWAY ENHANCE_YOUR_CALM", sent, what)
	}
	if a.goaway != nil && *a.goaway != http2.ErrCodeEnhanceYourCalm {
		return got, fmt.Errorf("GOAWAY %s, want ENHANCE_YOUR_CALM", a.goaway)
	}
	return got, nil
}

// refusedCaller connects as a caller the gateway must refuse and sends the header-list
// attack. Expected: the connection refused at the handshake or closed before the gateway
// sends a single HTTP/2 frame: a refused caller costs one connection and no HTTP/2 state.
func refusedCaller(target attackerTarget) (string, error) {
	rc, err := dialRaw(target)
	if err != nil {
		return "refused at dial: " + err.Error(), nil
	}
	defer rc.close()
	const streams = 50
	sendErr := sendHeaderLists(rc, streams)
	// Wait for the connection's end, or (on a gateway that reads the caller's frames) for
	// every stream's answer.
	rc.waitFor(attackDeadline, func(a *answers) bool { return a.readErr != nil || len(a.rst)+len(a.ended) >= streams })
	a := rc.answers()
	got := a.String()
	if sendErr != nil {
		got += "; sending stopped with " + sendErr.Error()
	}
	switch {
	case a.frames > 0:
		return got, fmt.Errorf("the gateway sent %d HTTP/2 frames to a caller it refuses: it read the caller's frames before checking who it is", a.frames)
	case a.readErr == nil:
		return got, fmt.Errorf("the connection is still open %v after the attack, with no frame from the gateway", attackDeadline)
	}
	return got, nil
}
