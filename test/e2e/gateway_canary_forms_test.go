package e2e

import (
	"bufio"
	"context"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// fragmentLen is the shortest fragment of a secret that no output may hold: the gateway
// scrubs whole secret values from 4 bytes and their lines and words from 8 (docs/errors.md).
const fragmentLen = 8

// formKinds are the secrets whose bytes a backend reformats: what a Kubernetes Secret made
// from a file holds (a trailing newline, a CRLF), a tab, a PEM key, and a value of exactly
// fragmentLen bytes. formCanary mints one of each per method.
var formKinds = []string{"newline", "crlf", "tab", "pem", "eight"}

// formCanary returns the secret of kind for label: random-looking bytes derived from both
// (so that no fragment occurs in the gateway's own words), shaped as kind says.
func formCanary(label, kind string) string {
	core := func(salt string, n int) string {
		h := fnv.New128a()
		h.Write([]byte(label + "/" + kind + "/" + salt))
		s := strings.ToLower(base32.StdEncoding.EncodeToString(h.Sum(nil)))
		return s[:n]
	}
	switch kind {
	case "newline":
		return "nl" + core("a", 16) + "\n"
	case "crlf":
		return "cr" + core("a", 16) + "\r\n"
	case "tab":
		return "tb" + core("a", 10) + "\t" + core("b", 10)
	case "pem":
		return "-----BEGIN PRIVATE KEY-----\n" + strings.ToUpper(core("a", 24)) + core("b", 24) + "\n" +
			core("c", 24) + strings.ToUpper(core("d", 24)) + "\n" + core("e", 20) + "==\n-----END PRIVATE KEY-----\n"
	case "eight":
		return "8" + core("a", 7)
	}
	panic("unknown kind " + kind)
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// echoForms is how a careless backend repeats a secret in its error message: raw, with its
// white space collapsed, JSON-escaped, trimmed, and line by line.
func echoForms(v string) string {
	return fmt.Sprintf("raw=%s collapsed=%s json=%s trimmed=%s lines=%s", v, strings.Join(strings.Fields(v), " "),
		jsonEscaped(v), strings.TrimSpace(v), strings.Join(trimmedLines(v), " | "))
}

// fragmentIndex maps every fragmentLen-byte substring of each canary, and of the forms it
// takes once reformatted (collapsed, each line, JSON-escaped), to the canary. A longer
// fragment contains one of them, so text in which no fragmentLen-byte window is in the index
// holds no fragment of any canary of fragmentLen bytes or more.
type fragmentIndex map[string]string

func newFragmentIndex(canaries []string) fragmentIndex {
	idx := fragmentIndex{}
	for _, c := range canaries {
		forms := append([]string{c, strings.Join(strings.Fields(c), " "), jsonEscaped(c)}, trimmedLines(c)...)
		for _, f := range forms {
			for i := 0; i+fragmentLen <= len(f); i++ {
				idx[f[i:i+fragmentLen]] = c
			}
		}
	}
	return idx
}

// leaks describes each fragment of a canary that text holds, once per canary.
func (idx fragmentIndex) leaks(text string) []string {
	var out []string
	seen := map[string]bool{}
	for i := 0; i+fragmentLen <= len(text); i++ {
		if c, ok := idx[text[i:i+fragmentLen]]; ok && !seen[c] {
			seen[c] = true
			out = append(out, fmt.Sprintf("%q of %q in …%s…", text[i:i+fragmentLen], c, text[max(0, i-40):min(len(text), i+48)]))
		}
	}
	return out
}

// sinkTexts returns text and, for each of its lines that is a JSON object (a log line, a
// span, a tap record), every string in it decoded: an escaped fragment (a tab written \t)
// is found in its decoded form too.
func sinkTexts(text string) []string {
	out := []string{text}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v any
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			out = appendStrings(out, v)
		}
	}
	return out
}

func appendStrings(out []string, v any) []string {
	switch v := v.(type) {
	case string:
		return append(out, v)
	case []any:
		for _, e := range v {
			out = appendStrings(out, e)
		}
	case map[string]any:
		for _, e := range v {
			out = appendStrings(out, e)
		}
	}
	return out
}

// addFormCanaries puts a secret of every formKinds kind in each secrets map of m, at any
// depth, and returns them.
func addFormCanaries(m protoreflect.Message, label string) []string {
	var out []string
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case isSecretField(fd) && fd.IsMap() && fd.MapValue().Kind() == protoreflect.StringKind:
			for _, kind := range formKinds {
				v := formCanary(label+"/"+string(fd.Name()), kind)
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString("form-"+kind).MapKey(), protoreflect.ValueOfString(v))
				out = append(out, v)
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap() && m.Has(fd):
			out = append(out, addFormCanaries(m.Mutable(fd).Message(), label)...)
		}
	}
	return out
}

// echoSecrets is the error message of a backend that repeats every sensitive value of req in
// every form of echoForms.
func echoSecrets(req proto.Message) string {
	vals := sensitiveValues(req.ProtoReflect(), "")
	var b strings.Builder
	b.WriteString("login refused:")
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		fmt.Fprintf(&b, " %s: %s;", k, echoForms(vals[k]))
	}
	return b.String()
}

// TestGatewayCanaryForms sends secrets whose bytes a backend reformats (formKinds) in every
// secret-bearing RPC through the real gateway, at debug level with every span exported and a
// tap watching, to a grpc driver and to a rest appliance (the connect protocol, its error
// bodies as Connect JSON and as plain text) that refuse each call with a message repeating
// every secret raw, collapsed, JSON-escaped, trimmed and line by line. The secrets must
// reach the backend intact, and no fragment of fragmentLen bytes or more of any of them may
// appear in the caller's error, the log, the spans or the tap.
func TestGatewayCanaryForms(t *testing.T) {
	methods := secretBearingMethods()
	for _, kind := range []string{"grpc", "rest-connect-json", "rest-plain-text"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			var backend string
			var received func(method string) []proto.Message
			switch kind {
			case "grpc":
				driver := startTestDriver(t, dir, "driver.sock", func(_ context.Context, c *driverCall, _ func([]byte) error) error {
					md := methodDesc(c.Method)
					if md == nil || md.Parent().FullName() == "csi.v1.Identity" {
						return nil
					}
					req := newMessage(md.Input())
					if err := proto.Unmarshal(c.Request, req); err != nil {
						return status.Errorf(codes.InvalidArgument, "cannot decode: %v", err)
					}
					return status.Error(codes.PermissionDenied, echoSecrets(req))
				})
				backend = fmt.Sprintf("{type: grpc, target: %q}", driver.Endpoint)
				received = func(method string) []proto.Message {
					var out []proto.Message
					for _, c := range driver.Calls(method) {
						req := newMessage(methodDesc(method).Input())
						if proto.Unmarshal(c.Request, req) == nil {
							out = append(out, req)
						}
					}
					return out
				}
			default:
				appliance := startConnectAppliance(t, func(w http.ResponseWriter, _ string, req proto.Message) {
					msg := echoSecrets(req)
					if kind == "rest-plain-text" {
						w.Header().Set("Content-Type", "text/plain; charset=utf-8")
						w.WriteHeader(http.StatusForbidden)
						_, _ = w.Write([]byte(msg + "\n"))
						return
					}
					body, _ := json.Marshal(map[string]string{"code": "permission_denied", "message": msg})
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusForbidden)
					_, _ = w.Write(body)
				})
				backend = fmt.Sprintf("{type: rest, urls: [%q], allowSecretsOverPlaintextHTTP: true, retry: {maxAttempts: 1}}", appliance.URL)
				received = appliance.Requests
			}
			admin := testutil.FreeAddr(t)
			gw := startGatewayWith(t, dir, noValidation+fmt.Sprintf(`backends:
  b: %s
routes:
  - {methods: ["*"], backend: b}
logging: {level: debug}
tracing: {exporter: stdout, sampleRatio: 1}
admin: {listen: %q}
`, backend, admin))
			waitListening(t, gw.Process, admin)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			tapped := startTap(ctx, t, admin, len(methods))

			var canaries []string
			var errors strings.Builder
			for _, m := range methods {
				req := newMessage(methodDesc(m).Input())
				sent := addFormCanaries(req.ProtoReflect(), shortName(m))
				if len(sent) == 0 {
					t.Fatalf("%s: the request holds no secrets map to put canaries in", m)
				}
				canaries = append(canaries, sent...)
				_, err := invoke(ctx, gw.Conn, m, req)
				st := status.Convert(err)
				rest := kind != "grpc"
				if rest && serverStreaming(m) {
					checkStatus(t, m, err, codes.Unimplemented) // a rest backend has no streams
					continue
				}
				checkStatus(t, m, err, codes.PermissionDenied)
				if !strings.Contains(st.Message(), "login refused") {
					t.Errorf("%s: the message %q lost the backend's words", m, st.Message())
				}
				fmt.Fprintf(&errors, "%s\n", st.Message())
				got := received(m)
				if len(got) != 1 {
					t.Errorf("%s: the backend received %d calls, want 1", m, len(got))
					continue
				}
				arrived := slices.Collect(maps.Values(sensitiveValues(got[0].ProtoReflect(), "")))
				for _, c := range sent {
					if !slices.Contains(arrived, c) {
						t.Errorf("%s: the secret %q did not reach the backend intact", m, c)
					}
				}
			}
			tapOut, tapErr := tapped()

			// Stopping the gateway flushes its spans to its output after every log line.
			gw.Conn.Close()
			if err := gw.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := gw.Wait(30 * time.Second); err != nil {
				t.Fatalf("the gateway did not stop cleanly: %v", err)
			}
			out := gw.Output()
			if want := `"Name":"csi.v1.Controller/CreateVolume"`; !strings.Contains(out, want) {
				t.Errorf("the gateway's output holds no span %s: the spans were not checked", want)
			}
			if got := strings.Count(tapOut, "\n"); got != len(methods) {
				t.Errorf("the tap printed %d records, want %d", got, len(methods))
			}
			idx := newFragmentIndex(canaries)
			for sink, text := range map[string]string{"caller's errors": errors.String(), "log and spans": out, "tap": tapOut + tapErr} {
				var leaks []string
				for _, s := range sinkTexts(text) {
					leaks = append(leaks, idx.leaks(s)...)
				}
				if len(leaks) > 0 {
					t.Errorf("%s: the %s hold %d fragments of canaries, such as:\n%s", kind, sink, len(leaks), strings.Join(leaks[:min(len(leaks), 3)], "\n"))
				}
			}
			t.Logf("%d secret-bearing RPCs, %d canaries, %d log lines, %d tap records checked", len(methods), len(canaries),
				strings.Count(out, "\n"), strings.Count(tapOut, "\n"))
		})
	}
}
