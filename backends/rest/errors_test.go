package rest

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/csi-gateway/csi-gateway/backends"
)

// statusClasses is the class of every status tested when the body carries no code, and a
// fragment its message must hold besides the status.
var statusClasses = []struct {
	status int
	class  backends.Class
	hint   string
}{
	{302, backends.ClassUnavailable, "redirects are not followed"},
	{400, backends.ClassInvalid, "HTTP 400 Bad Request"},
	{401, backends.ClassUnauthenticated, "backends.array1.auth"},
	{403, backends.ClassPermission, "account"},
	{404, backends.ClassUnavailable, "the URL or the method path is wrong: check that backends.array1.urls"},
	{405, backends.ClassUnavailable, "backends.array1.urls"},
	{408, backends.ClassDeadline, "HTTP 408"},
	{409, backends.ClassAborted, "HTTP 409"},
	{412, backends.ClassPrecondition, "HTTP 412"},
	{413, backends.ClassInvalid, "larger than the appliance accepts"},
	{415, backends.ClassUnavailable, "backends.array1.urls"},
	{418, backends.ClassInvalid, "HTTP 418"},
	{429, backends.ClassUnavailable, "rate limiting"},
	{500, backends.ClassInternal, "HTTP 500"},
	{501, backends.ClassUnimplemented, "HTTP 501"},
	{502, backends.ClassUnavailable, "could not reach it"},
	{503, backends.ClassUnavailable, "HTTP 503"},
	{504, backends.ClassDeadline, "timed out"},
	{507, backends.ClassUnavailable, "HTTP 507"},
}

// bodyForms are the shapes of error body tested. coded bodies carry already_exists, which
// wins over every status; the others leave the class to the status.
var bodyForms = []struct {
	name     string
	ct       string
	body     string
	coded    bool
	fragment string // the message must hold it
}{
	{"connect", "application/json", `{"code":"already_exists","message":"volume \"pvc-1\" exists with another size"}`, true,
		`volume "pvc-1" exists with another size (already_exists, HTTP `},
	{"google.rpc.Status", "application/json", `{"code":6,"message":"volume exists","details":[]}`, true, "volume exists (already_exists, HTTP "},
	{"problem+json", "application/problem+json", `{"type":"about:blank","title":"Pool trouble","status":500,"detail":"pool p1 is degraded"}`, false,
		"Pool trouble: pool p1 is degraded"},
	{"plain text", "text/plain", "pool p1 is offline\n", false, ": pool p1 is offline"},
	{"html", "text/html", "<html><head><title>Bad things</title></head><body><h1>nginx</h1></body></html>", false,
		`with an HTML page titled "Bad things"`},
	{"empty", "", "", false, "with an empty body"},
}

// TestAnswerClasses sends CreateVolume to a server answering each status with each body
// form and checks the class and message.
func TestAnswerClasses(t *testing.T) {
	for _, st := range statusClasses {
		for _, form := range bodyForms {
			t.Run(fmt.Sprintf("%d/%s", st.status, form.name), func(t *testing.T) {
				srv := newServer(t, reply(st.status, form.ct, form.body))
				b := newBackend(t, Config{Retry: Retry{MaxAttempts: 1}}, srv.URL)
				_, err := b.Unary(t.Context(), createPath, createRequest(t))
				want, fragments := st.class, []string{`backend "array1": CreateVolume: `, form.fragment}
				if form.coded {
					want = backends.ClassAlreadyExists
				} else {
					fragments = append(fragments, fmt.Sprintf("HTTP %d", st.status), st.hint)
				}
				checkError(t, err, want, fragments...)
				if n := srv.hits.Load(); n != 1 {
					t.Errorf("%d attempts, want 1", n)
				}
			})
		}
	}
}

// TestAnswerSpecialCases covers the rules that matter most and the bodies that are not
// quite one of the forms.
func TestAnswerSpecialCases(t *testing.T) {
	long := strings.Repeat("x", 2*maxSaid)
	tests := []struct {
		name      string
		status    int
		ct, body  string
		class     backends.Class
		fragments []string
		absent    []string
	}{
		{"404 with not_found is not found", 404, "application/json", `{"code":"not_found","message":"volume \"v\" does not exist"}`,
			backends.ClassNotFound, []string{`volume "v" does not exist (not_found, HTTP 404)`}, []string{"backends.array1.urls"}},
		{"404 plain text is a wrong URL, never not found", 404, "text/plain", "404 page not found",
			backends.ClassUnavailable, []string{"404 page not found", "the URL or the method path is wrong", "http://127.0.0.1:"}, nil},
		{"404 problem is a wrong URL", 404, "application/problem+json", `{"title":"Not Found","status":404}`,
			backends.ClassUnavailable, []string{"Not Found", "backends.array1.urls"}, nil},
		{"404 unimplemented from a connect server hints at the URL", 404, "application/json",
			`{"code":"unimplemented","message":"connect: service \"csi.v1.Controller\" is not served here"}`,
			backends.ClassUnimplemented, []string{"is not served here (unimplemented, HTTP 404)", "backends.array1.urls"}, nil},
		{"429 resource_exhausted keeps its code", 429, "application/json", `{"code":"resource_exhausted","message":"pool full"}`,
			backends.ClassExhausted, []string{"pool full (resource_exhausted, HTTP 429)"}, nil},
		{"vendor numeric code is not a gRPC code", 500, "application/json", `{"code":5,"message":"disk failure","requestId":"r-1"}`,
			backends.ClassInternal, []string{"HTTP 500 Internal Server Error: disk failure"}, []string{"not_found"}},
		{"numeric code out of range", 400, "application/json", `{"code":99,"message":"odd"}`,
			backends.ClassInvalid, []string{"HTTP 400 Bad Request: odd"}, nil},
		{"upper-case code name is not a connect code", 500, "application/json", `{"code":"NOT_FOUND","message":"gone"}`,
			backends.ClassInternal, []string{"HTTP 500 Internal Server Error: gone"}, nil},
		{"code without message", 409, "application/json", `{"code":"aborted"}`,
			backends.ClassAborted, []string{"the appliance gave no message (aborted, HTTP 409)"}, nil},
		{"error string", 400, "application/json", `{"error":"name is too long"}`,
			backends.ClassInvalid, []string{": name is too long"}, nil},
		{"error object", 400, "application/json", `{"error":{"code":400,"message":"bad size"}}`,
			backends.ClassInvalid, []string{": bad size"}, nil},
		{"other JSON is shown", 400, "application/json", `{"reason":"quota"}`,
			backends.ClassInvalid, []string{`{"reason":"quota"}`}, nil},
		{"broken JSON is text", 503, "application/json", `{"code":"unavail`,
			backends.ClassUnavailable, []string{`{"code":"unavail`}, nil},
		{"html without content type", 502, "", "<!DOCTYPE html><html><title>502 Bad Gateway</title></html>",
			backends.ClassUnavailable, []string{`HTML page titled "502 Bad Gateway"`}, []string{"DOCTYPE"}},
		{"html without title", 500, "text/html", "<p>oops</p>",
			backends.ClassInternal, []string{"HTTP 500 Internal Server Error with an HTML page,"}, []string{"oops"}},
		{"long text is cut", 500, "text/plain", long,
			backends.ClassInternal, []string{strings.Repeat("x", maxSaid-12) + "…"}, []string{strings.Repeat("x", maxSaid)}},
		{"control characters become spaces", 400, "text/plain", "line one\r\nline\ttwo\x00\x1b[31m",
			backends.ClassInvalid, []string{"line one line two [31m"}, []string{"\n", "\x1b"}},
		{"userinfo in a quoted URL is dropped", 502, "text/plain", "upstream https://admin:hunter2@10.0.0.9/api failed",
			backends.ClassUnavailable, []string{"upstream https://10.0.0.9/api failed"}, []string{"hunter2", "admin"}},
		{"204 is not success", 204, "", "",
			backends.ClassInternal, []string{"HTTP 204 No Content"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, reply(tt.status, tt.ct, tt.body))
			b := newBackend(t, Config{Retry: Retry{MaxAttempts: 1}}, srv.URL)
			_, err := b.Unary(t.Context(), createPath, createRequest(t))
			e := checkError(t, err, tt.class, tt.fragments...)
			for _, a := range tt.absent {
				if strings.Contains(e.Message, a) {
					t.Errorf("message %q contains %q", e.Message, a)
				}
			}
		})
	}
}

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  a \n\t b  ", "a b"},
		{"\xff\xfeok", "\uFFFDok"},
		{"see http://u:p@h/x and https://h2", "see http://h/x and https://h2"},
		{strings.Repeat("é", maxSaid), strings.Repeat("é", (maxSaid-len("…"))/2) + "…"},
	}
	for _, tt := range tests {
		got := Clean(tt.in, maxSaid)
		if got != tt.want {
			t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) > maxSaid || !utf8.ValidString(got) {
			t.Errorf("clean(%q) = %q: %d bytes, valid UTF-8 %v", tt.in, got, len(got), utf8.ValidString(got))
		}
	}
}

// FuzzDecodeError checks that no answer makes the decoding panic, and that every answer
// gets a non-empty message of at most 1 KiB that is valid UTF-8 on one line.
func FuzzDecodeError(f *testing.F) {
	for _, form := range bodyForms {
		f.Add(503, []byte(form.body), form.ct)
	}
	f.Add(404, []byte(`{"code":5,"message":"x","details":[{"@type":"y"}]}`), "application/json")
	f.Add(0, []byte("\x00\xff<title>"), "text/html; charset=\"")
	f.Add(999, []byte(`{"error":{"message":`+strings.Repeat(`"\u0000",`, 10)+`}}`), "application/problem+json")
	f.Add(-1, []byte(`{"code":"not_found","message":"`+strings.Repeat("\\n", 3000)+`"}`), "")
	f.Fuzz(func(t *testing.T, status int, body []byte, contentType string) {
		e := answerError(testName, createPath, "https://array1.example:8443", status, contentType, body)
		switch {
		case e == nil:
			t.Fatal("nil error")
		case e.Message == "" || len(e.Message) > backends.MaxMessageBytes:
			t.Fatalf("message of %d bytes: %q", len(e.Message), e.Message)
		case !utf8.ValidString(e.Message) || strings.ContainsAny(e.Message, "\n\r\x00"):
			t.Fatalf("message not one line of UTF-8: %q", e.Message)
		case !strings.HasPrefix(e.Message, `backend "array1": CreateVolume: `):
			t.Fatalf("message without its prefix: %q", e.Message)
		}
	})
}
