package cspfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// reply is one answer, built before it is written so that it can be validated and logged.
// A zero status means no answer was given.
type reply struct {
	status      int
	body        []byte
	contentType string // "" = application/json when there is a body
	retryAfter  string
}

func (rep reply) write(w http.ResponseWriter) {
	h := w.Header()
	if rep.retryAfter != "" {
		h.Set("Retry-After", rep.retryAfter)
	}
	if rep.status != http.StatusNoContent {
		h.Set("Content-Type", rep.mediaType())
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

func (rep reply) mediaType() string {
	if rep.contentType == "" {
		return "application/json"
	}
	return rep.contentType
}

// ok answers 200 with v as JSON.
func ok(v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cspfake: cannot encode %T: %v", v, err)) // a bug in the fake
	}
	return reply{status: http.StatusOK, body: b}
}

func noContent() reply { return reply{status: http.StatusNoContent} }

// cspError answers the CSP error shape {"errors":[{"code","message"}]}.
func cspError(status int, code, message string) reply {
	b, _ := json.Marshal(map[string]any{
		"errors": []map[string]string{{"code": code, "message": message}},
	})
	return reply{status: status, body: b}
}

// falconError answers Falcon's own {"title","description"} shape, which truenas-csp's
// middleware sends for 400 and 401.
func falconError(status int, title, description string) reply {
	b, _ := json.Marshal(map[string]string{"title": title, "description": description})
	return reply{status: status, body: b}
}

// traceback answers as truenas-csp does on any exception: 500 with a Python traceback as
// the message of a CSP error.
func traceback(where, exception string) reply {
	msg := "Traceback (most recent call last):\n" +
		"  File \"/app/truenascsp.py\", line 212, in " + where + "\n" +
		"    api.post('pool/dataset', req_backend)\n" +
		"  File \"/app/backend.py\", line 301, in post\n" +
		"    raise Exception(self.req_backend.content)\n" +
		exception + "\n"
	return cspError(http.StatusInternalServerError, "Exception", msg)
}

// htmlNotFound is a proxy's answer for a path that is not a CSP route.
func htmlNotFound() reply {
	return reply{
		status:      http.StatusNotFound,
		contentType: "text/html",
		body: []byte("<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n" +
			"<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"),
	}
}

// The answers below differ per profile: Nimble-style CSP error codes, or truenas-csp's.

func (f *Fake) truenas() bool { return f.opts.Profile == ProfileTrueNAS }

func (f *Fake) badRequest(format string, args ...any) reply {
	return cspError(http.StatusBadRequest, "Bad Request", fmt.Sprintf(format, args...))
}

func (f *Fake) notFound(format string, args ...any) reply {
	code := "Not Found"
	if f.truenas() {
		code = "Not found"
	}
	return cspError(http.StatusNotFound, code, fmt.Sprintf(format, args...))
}

// notFoundDelete is the answer to a DELETE of an absent object: truenas-csp sets only
// the status.
func (f *Fake) notFoundDelete(format string, args ...any) reply {
	if f.truenas() {
		return reply{status: http.StatusNotFound}
	}
	return f.notFound(format, args...)
}

func (f *Fake) conflict(format string, args ...any) reply {
	return cspError(http.StatusConflict, "Conflict", fmt.Sprintf(format, args...))
}

func (f *Fake) methodNotAllowed() reply {
	if f.truenas() {
		return reply{status: http.StatusMethodNotAllowed}
	}
	return cspError(http.StatusMethodNotAllowed, "Method Not Allowed", "method not allowed on this resource")
}

func (f *Fake) malformedBody() reply {
	if f.truenas() {
		return falconError(http.StatusBadRequest, "Malformed JSON",
			"Could not parse JSON body - Expecting value: line 1 column 1 (char 0)")
	}
	return f.badRequest("request body is not a JSON object")
}

// Field readers for JSON bodies decoded with UseNumber. Each returns ok=false when the
// field is present with the wrong type.

func stringField(body map[string]any, key string) (string, bool) {
	v, present := body[key]
	if !present || v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

func boolField(body map[string]any, key string) (bool, bool) {
	v, present := body[key]
	if !present || v == nil {
		return false, true
	}
	b, ok := v.(bool)
	return b, ok
}

func stringsField(body map[string]any, key string) ([]string, bool) {
	v, present := body[key]
	if !present || v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// fieldReader reads several fields and remembers the first one with the wrong type.
type fieldReader struct {
	body map[string]any
	bad  string
}

func (r *fieldReader) str(key string) string {
	s, ok := stringField(r.body, key)
	r.check(ok, key)
	return s
}

func (r *fieldReader) strs(key string) []string {
	s, ok := stringsField(r.body, key)
	r.check(ok, key)
	return s
}

func (r *fieldReader) boolean(key string) bool {
	b, ok := boolField(r.body, key)
	r.check(ok, key)
	return b
}

func (r *fieldReader) object(key string) map[string]any {
	m, ok := objectField(r.body, key)
	r.check(ok, key)
	return m
}

func (r *fieldReader) check(ok bool, key string) {
	if !ok && r.bad == "" {
		r.bad = key
	}
}

// problem is what is wrong with the body whose fields r read, for a 400: the first field of
// the wrong type, else, when one of the required fields is missing or empty, all of them
// ("name is required", "name and volume_id are required"); "" when nothing is.
func (r *fieldReader) problem(required ...string) string {
	if r.bad != "" {
		return fmt.Sprintf("field %s has the wrong type", r.bad)
	}
	for _, key := range required {
		if s, _ := stringField(r.body, key); s == "" {
			if len(required) == 1 {
				return key + " is required"
			}
			return strings.Join(required, " and ") + " are required"
		}
	}
	return ""
}

// objectField returns a copy of an object field; absent means an empty map.
func objectField(body map[string]any, key string) (map[string]any, bool) {
	v, present := body[key]
	if !present || v == nil {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return copyMap(m), true
}

// sizeField reads a size in bytes given as a JSON integer or a numeric string (spec.md's
// example sends a string). present=false when absent; ok=false when not a positive integer.
func sizeField(body map[string]any, key string) (size int64, present, ok bool) {
	v, present := body[key]
	if !present || v == nil {
		return 0, false, true
	}
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = x
	default:
		return 0, true, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n <= 0 {
		return 0, true, false
	}
	return n, true, true
}

func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	b, _ := json.Marshal(m)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	_ = dec.Decode(&out)
	if out == nil {
		out = map[string]any{}
	}
	return out
}
