package cspfake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Call is one request the fake received, as logged. Secrets are replaced by "[REDACTED]":
// the values of password, session_token and chap_password fields in JSON bodies, and any
// occurrence of the configured password, an issued session token or a registered CHAP
// secret anywhere in the path, query or bodies.
type Call struct {
	Method string
	// Path is relative to /containers/v1 (e.g. "/volumes/abc"), or the whole path of a
	// request outside the API.
	Path  string
	Query string
	// Status is the answer's status; 0 when none was given (the request's context ended
	// during an injected latency).
	Status            int
	Request, Response string
	ArrayIP           string // the x-array-ip header
	// Faulted reports that an injected fault changed the answer or its timing; Dropped
	// that the connection was closed instead of (or in the middle of) the answer.
	Faulted, Dropped bool
}

// redacted is what the call log shows instead of a secret.
const redacted = "[REDACTED]"

// secretFields are JSON keys whose values the call log never shows.
var secretFields = map[string]bool{"password": true, "session_token": true, "chap_password": true, "x-auth-token": true}

// Calls returns the calls so far, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// record appends a call to the log.
func (f *Fake) record(r *http.Request, path string, body []byte, rep reply, fault *Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Call{
		Method:   r.Method,
		Path:     f.scrub(path),
		Query:    f.scrub(r.URL.RawQuery),
		Status:   rep.status,
		Request:  f.redactBody(body),
		Response: f.redactBody(rep.body),
		ArrayIP:  r.Header.Get("x-array-ip"),
	}
	if fault != nil {
		c.Faulted = true
		c.Dropped = fault.DropReply || fault.CutReply
	}
	f.calls = append(f.calls, c)
}

// addSecret remembers a value the call log must never show. Callers hold f.mu (or are
// New). Values shorter than four bytes are not scrubbed from free text: they would
// garble it and are not credible secrets.
func (f *Fake) addSecret(s string) {
	if len(s) >= 4 {
		f.secrets[s] = struct{}{}
	}
}

// redactBody replaces secret fields of a JSON body, then scrubs known secrets.
func (f *Fake) redactBody(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil {
		if b, err := json.Marshal(redactJSON(v)); err == nil {
			body = b
		}
	}
	return f.scrub(string(body))
}

func redactJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, item := range x {
			if secretFields[strings.ToLower(k)] {
				x[k] = redacted
				continue
			}
			x[k] = redactJSON(item)
		}
	case []any:
		for i, item := range x {
			x[i] = redactJSON(item)
		}
	}
	return v
}

// scrub replaces every known secret in s. Callers hold f.mu.
func (f *Fake) scrub(s string) string {
	for secret := range f.secrets {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return s
}
