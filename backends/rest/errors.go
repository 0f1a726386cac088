package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
)

// Bounds on what is read from the appliance and repeated from it.
const (
	maxSuccessBody = 4 << 20  // a response message; the gRPC default receive limit too
	maxErrorBody   = 64 << 10 // an error answer; only its first maxSaid bytes of text are kept
	// maxSaid bounds the appliance's own words in one message; the whole message is bounded
	// to backends.MaxMessageBytes. Both are well above the 1 KiB a caller finally sees (see
	// MaxMessageBytes).
	maxSaid = 8 << 10
)

// said is what the body of an error answer says.
type said struct {
	code    codes.Code // meaningful when hasCode
	hasCode bool
	text    string // the appliance's message, cleaned and at most maxSaid bytes; may be empty
	html    bool   // the body is an HTML page; text is its title
}

// The JSON error bodies understood: Connect {"code":"not_found","message"},
// google.rpc.Status {"code":5,"message","details"} and RFC 9457 problem details
// {"type","title","status","detail"}; "error" as a string or an object with "message" is
// read for its message only. Keys are matched exactly, as written in those specifications.

// statusKeys are the keys of a google.rpc.Status in JSON. A numeric code is taken for a
// gRPC code only in a body that has no other keys: many REST APIs number their own errors
// in "code", and reading a vendor's 5 as NOT_FOUND would turn a failed DeleteVolume into a
// success.
var statusKeys = map[string]bool{"code": true, "message": true, "details": true}

// parseErrorBody reads an error answer's body. It never fails: a body it does not
// understand is reported as text, an HTML page by its title.
func parseErrorBody(contentType string, body []byte) said {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return said{}
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if trimmed[0] == '{' {
		if s, ok := parseJSONError(trimmed); ok {
			return s
		}
	}
	if mt == "text/html" || mt == "application/xhtml+xml" || LooksLikeHTML(trimmed) {
		return said{html: true, text: HTMLTitle(trimmed)}
	}
	return said{text: Clean(string(trimmed), maxSaid)}
}

func parseJSONError(body []byte) (said, bool) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil {
		return said{}, false
	}
	str := func(key string) string { // the key's value if it is a JSON string, else ""
		var v string
		_ = json.Unmarshal(keys[key], &v)
		return v
	}
	var s said
	var num int64
	switch code := keys["code"]; {
	case len(code) > 0 && code[0] == '"':
		s.code, s.hasCode = connect.ParseCodeName(str("code"))
	case json.Unmarshal(code, &num) == nil && num > 0 && num <= int64(codes.Unauthenticated):
		onlyStatusKeys := true
		for k := range keys {
			onlyStatusKeys = onlyStatusKeys && statusKeys[k]
		}
		s.code, s.hasCode = codes.Code(num), onlyStatusKeys
	}
	var parts []string
	for _, key := range []string{"message", "title", "detail"} {
		if v := str(key); strings.TrimSpace(v) != "" {
			parts = append(parts, v)
		}
	}
	if e := keys["error"]; len(parts) == 0 && len(e) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if v := str("error"); v != "" {
			parts = append(parts, v)
		} else if json.Unmarshal(e, &obj) == nil && obj.Message != "" {
			parts = append(parts, obj.Message)
		}
	}
	s.text = Clean(strings.Join(parts, ": "), maxSaid)
	if s.text == "" && !s.hasCode {
		s.text = Clean(string(body), maxSaid) // JSON of some other shape: show it
	}
	return s, true
}

// LooksLikeHTML reports whether body starts like an HTML page (a proxy's or a web server's error page).
func LooksLikeHTML(body []byte) bool {
	head := strings.ToLower(string(body[:min(len(body), 64)]))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") ||
		strings.HasPrefix(head, "<head") || strings.HasPrefix(head, "<body")
}

var titleRE = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

// HTMLTitle returns the text of the page's <title>, or "".
func HTMLTitle(body []byte) string {
	m := titleRE.FindSubmatch(body)
	if m == nil {
		return ""
	}
	return Clean(string(m[1]), maxSaid)
}

// userinfoRE finds the userinfo of URLs inside text, so that a message can never repeat a
// password that a proxy or transport error happened to include.
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]*@`)

// Clean makes s fit for a one-line message (backends.OneLine: valid UTF-8, no control
// characters, runs of space collapsed), with no URL userinfo, and at most max bytes (cut at
// a character boundary, marked with "…"). Text that may echo the request's secrets is
// cleaned with a max of maxSaid or more: the gateway scrubs secrets only after this, and a
// secret cut here would leave its first bytes unrecognised.
func Clean(s string, max int) string {
	if len(s) > 4*max {
		s = s[:4*max] // keep the work bounded; the cut below marks the truncation
	}
	s = backends.OneLine(s)
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllString(s, "$1")
	}
	return backends.Truncate(s, max)
}

// classByStatus holds the classes of the non-200 answers whose status alone says it.
var classByStatus = map[int]backends.Class{
	http.StatusBadRequest:            backends.ClassInvalid,
	http.StatusRequestEntityTooLarge: backends.ClassInvalid,
	http.StatusUnauthorized:          backends.ClassUnauthenticated,
	http.StatusForbidden:             backends.ClassPermission,
	// The URL or the method's path is wrong. Never ClassNotFound: DeleteVolume maps not-found
	// to success, and a wrong URL must not delete volumes that way.
	http.StatusNotFound:             backends.ClassUnavailable,
	http.StatusMethodNotAllowed:     backends.ClassUnavailable,
	http.StatusUnsupportedMediaType: backends.ClassUnavailable,
	http.StatusRequestTimeout:       backends.ClassDeadline,
	http.StatusConflict:             backends.ClassAborted,
	http.StatusPreconditionFailed:   backends.ClassPrecondition,
	http.StatusTooManyRequests:      backends.ClassUnavailable, // rate limited: retried, and transient if it persists
	http.StatusInternalServerError:  backends.ClassInternal,
	http.StatusNotImplemented:       backends.ClassUnimplemented,
	http.StatusGatewayTimeout:       backends.ClassDeadline,
}

// classOfStatus is the class of a non-200 answer whose body has no recognised code: its
// status's in statusClasses, else that of its status's range.
func classOfStatus(status int) backends.Class {
	if c, ok := classByStatus[status]; ok {
		return c
	}
	switch {
	case status >= 300 && status < 400:
		return backends.ClassUnavailable // a redirect, not followed: a misconfigured URL
	case status >= 400 && status < 500:
		return backends.ClassInvalid
	case status >= 500 && status < 600:
		return backends.ClassUnavailable
	}
	return backends.ClassInternal // 1xx, a 2xx other than 200, or not an HTTP status at all
}

// answerError classifies a non-200 answer of the appliance at the URL shown as display to
// the call of the method path (such as "/csi.v1.Controller/CreateVolume") on the backend
// called name. A recognised code in the body wins; otherwise
// the status decides. The message holds the appliance's own words (at most maxSaid bytes)
// and, when the status decided, what to check.
func answerError(name, path, display string, status int, contentType string, body []byte) *backends.Error {
	class, msg := describeAnswer(name, path, display, status, contentType, body)
	return newError(class, name, path[strings.LastIndex(path, "/")+1:], msg)
}

// describeAnswer is answerError's class and message, without the prefix.
func describeAnswer(name, path, display string, status int, contentType string, body []byte) (backends.Class, string) {
	s := parseErrorBody(contentType, body)
	statusLine := fmt.Sprintf("HTTP %d", status)
	if t := http.StatusText(status); t != "" {
		statusLine += " " + t
	}
	if s.hasCode {
		class := backends.ClassFromCode(s.code)
		text := s.text
		if text == "" {
			text = "the appliance gave no message"
		}
		msg := fmt.Sprintf("%s (%s, HTTP %d)", text, connect.CodeName(s.code), status)
		if s.code == codes.Unimplemented && status == http.StatusNotFound {
			msg += fmt.Sprintf("; if every call fails this way, check that backends.%s.urls holds the appliance's base URL", name)
		}
		return class, msg
	}
	var msg string
	switch {
	case s.html && s.text != "":
		msg = fmt.Sprintf("%s with an HTML page titled %q, which came from a web server or proxy rather than the appliance's CSI service", statusLine, s.text)
	case s.html:
		msg = statusLine + " with an HTML page, which came from a web server or proxy rather than the appliance's CSI service"
	case s.text == "":
		msg = statusLine + " with an empty body"
	default:
		msg = statusLine + ": " + s.text
	}
	return classOfStatus(status), msg + statusHint(name, path, display, status)
}

// statusHint says what to check after an answer that carried no code.
func statusHint(name, path, display string, status int) string {
	switch {
	case status >= 300 && status < 400:
		return fmt.Sprintf("; redirects are not followed: put the appliance's final address in backends.%s.urls", name)
	case status == http.StatusUnauthorized:
		return fmt.Sprintf("; check the credentials of backends.%s.auth", name)
	case status == http.StatusForbidden:
		return "; check what the gateway's account may do on the appliance"
	case status == http.StatusNotFound:
		return fmt.Sprintf("; %s serves nothing at …%s, so the URL or the method path is wrong: check that backends.%s.urls holds the appliance's base URL",
			display, path, name)
	case status == http.StatusMethodNotAllowed, status == http.StatusUnsupportedMediaType:
		return fmt.Sprintf("; %s does not take Connect calls (POST with application/json) at …%s: check that backends.%s.urls holds the appliance's base URL",
			display, path, name)
	case status == http.StatusRequestEntityTooLarge:
		return "; the request is larger than the appliance accepts"
	case status == http.StatusTooManyRequests:
		return "; the appliance is rate limiting the gateway"
	case status == http.StatusBadGateway:
		return "; a proxy in front of the appliance could not reach it"
	case status == http.StatusGatewayTimeout:
		return "; a proxy in front of the appliance timed out waiting for it"
	}
	return ""
}

// newError returns the *Error of class for the call of m on backend name, its message
// `backend "NAME": METHOD: msg`, bounded to backends.MaxMessageBytes.
func newError(class backends.Class, name, m, msg string) *backends.Error {
	return &backends.Error{Class: class, Message: backends.Truncate(fmt.Sprintf("backend %q: %s: %s", name, m, msg), backends.MaxMessageBytes)}
}
