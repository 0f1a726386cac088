package csp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
)

// maxSaid bounds how much of the CSP's own words an error message repeats.
const maxSaid = 1024

// answer is one HTTP answer of the CSP.
type answer struct {
	method, path string // the request, for messages: "POST /containers/v1/volumes"
	status       int
	contentType  string
	body         []byte
	resp         *http.Response // its headers (the body is read and closed); nil without an answer
	cause        error          // the transport failure when there was no answer
}

// said returns what an error answer's body says, and whether the body has the CSP's error
// shape: {"errors":[{"code","message"}]}, or the bare {"code","message"} of one spec example.
// An HTML page (a proxy's), an empty body or another JSON shape (a web framework's own
// {"title","description"}) is not CSP-shaped.
func (a answer) said() (text string, cspShaped bool) {
	body := bytes.TrimSpace(a.body)
	if len(body) == 0 {
		return "", false
	}
	if rest.LooksLikeHTML(body) {
		if t := rest.HTMLTitle(body); t != "" {
			return "an HTML page: " + t, false
		}
		return "an HTML page", false
	}
	var shaped struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
		Code        string `json:"code"`
		Message     string `json:"message"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	if json.Unmarshal(body, &shaped) != nil {
		return rest.Clean(string(body), maxSaid), false
	}
	switch {
	case len(shaped.Errors) > 0:
		var parts []string
		for _, e := range shaped.Errors {
			parts = append(parts, strings.TrimSpace(e.Code+": "+e.Message))
		}
		return rest.Clean(strings.Join(parts, "; "), maxSaid), true
	case shaped.Code != "" || shaped.Message != "":
		return rest.Clean(strings.TrimSpace(shaped.Code+": "+shaped.Message), maxSaid), true
	case shaped.Title != "" || shaped.Description != "":
		return rest.Clean(strings.TrimSpace(shaped.Title+": "+shaped.Description), maxSaid), false
	}
	return rest.Clean(string(body), maxSaid), false
}

// notFound reports whether the answer says the object does not exist: a 404 with a
// CSP-shaped body (or, from truenas-csp, an empty one on DELETE). Any other 404 — an HTML
// page, a framework's own body — means the base URL or path is wrong, and must never be
// taken for "absent": on DeleteVolume that would answer OK and drop the delete.
func (a answer) notFound(p profile) bool {
	if a.status != http.StatusNotFound {
		return false
	}
	if _, shaped := a.said(); shaped {
		return true
	}
	return p.emptyNotFoundOnDelete && a.method == http.MethodDelete && len(bytes.TrimSpace(a.body)) == 0
}

// StatusRule classifies the CSP's answer to a CSI RPC by its HTTP status (and, where the
// CSP's status is ambiguous, by what its message says). Rules with RPCs apply to those
// RPCs before the general rules (no RPCs).
type StatusRule struct {
	RPCs   []string // short names, e.g. "DeleteVolume"; empty: every RPC
	Status int
	When   string                 // the condition beyond the status, for the documentation
	match  func(text string) bool // nil: always
	Class  backends.Class
	Why    string
}

// mentions returns a match function for messages that contain any of words.
func mentions(words ...string) func(string) bool {
	return func(text string) bool {
		t := strings.ToLower(text)
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(t, w) })
	}
}

// statusRules is the CSP half of the gateway's error table (CSP-MAPPING §3); the class is
// then turned into the RPC's code by the gateway's canonical table, as for every backend.
// docs/errors.md is generated from both.
var statusRules = []StatusRule{
	{RPCs: []string{"DeleteVolume"}, Status: 400, When: "the message says published", match: mentions("publish", "in use", "attached"),
		Class: backends.ClassPrecondition, Why: "a published volume cannot be deleted until it is unpublished"},
	{RPCs: []string{"DeleteVolume", "DeleteSnapshot", "DeleteVolumeGroup"}, Status: 409,
		Class: backends.ClassPrecondition, Why: "the object has snapshots, clones or members that keep it"},
	{RPCs: []string{"CreateVolume", "CreateSnapshot", "ControllerExpandVolume"}, Status: 500, When: "the message says there is no space", match: mentions("insufficient", "no space", "out of space", "not enough space"),
		Class: backends.ClassExhausted, Why: "CSI's code for no room"},
	{RPCs: []string{"ControllerUnpublishVolume"}, Status: 500,
		Class: backends.ClassUnavailable, Why: "a lost detach strands an attachment: keep the attacher retrying"},
	{Status: 400, Class: backends.ClassInvalid, Why: "the CSP refused the request (e.g. \"Unexpected argument\")"},
	{Status: 401, Class: backends.ClassUnavailable, Why: "the CSP refused the gateway's credentials even after a fresh login: they come from the gateway's configuration, so the caller did nothing wrong, and a retry recovers after the credentials are fixed"},
	{Status: 403, Class: backends.ClassPermission, Why: "the CSP's user may not do this"},
	{Status: 404, When: "CSP-shaped body", Class: backends.ClassNotFound, Why: "the object does not exist (deletes and unpublish then answer OK)"},
	{Status: 404, When: "any other body (HTML, empty, a web framework's own), except truenas-csp's empty 404 to a DELETE", Class: backends.ClassUnavailable, Why: "a wrong base URL or path, never \"absent\": that would turn a failed delete into OK"},
	{Status: 409, Class: backends.ClassAborted, Why: "a conflicting operation: retry"},
	{Status: 422, Class: backends.ClassInvalid, Why: "the CSP refused the request"},
	{Status: 429, Class: backends.ClassUnavailable, Why: "rate limited (retried within the deadline, honouring Retry-After); not RESOURCE_EXHAUSTED, which in CSI means capacity"},
	{Status: 500, Class: backends.ClassInternal, Why: "truenas-csp answers 500 for validation errors too, so a 500 is not evidence of a transient fault"},
	{Status: 501, Class: backends.ClassUnimplemented, Why: "the CSP does not implement the operation"},
	{Status: 502, Class: backends.ClassUnavailable, Why: "the CSP or its array cannot be reached (retried)"},
	{Status: 503, Class: backends.ClassUnavailable, Why: "the CSP is overloaded or starting (retried)"},
	{Status: 504, Class: backends.ClassUnavailable, Why: "the CSP's array did not answer in time (retried)"},
}

// classify turns a failed answer to rpc into a classified error.
func (b *Backend) classify(rpc string, a answer) *backends.Error {
	text, shaped := a.said()
	class, found := backends.ClassInternal, false
	for _, r := range statusRules {
		if r.Status != a.status || (len(r.RPCs) > 0 && !slices.Contains(r.RPCs, rpc)) || (r.match != nil && !r.match(text)) {
			continue
		}
		if r.Status == http.StatusNotFound && (r.Class == backends.ClassNotFound) != a.notFound(b.profile) {
			continue
		}
		class, found = r.Class, true
		break
	}
	if !found {
		switch {
		case a.status >= 500:
			class = backends.ClassInternal
		case a.status >= 400:
			class = backends.ClassInvalid
		case a.status >= 300:
			class = backends.ClassUnavailable // redirects are not followed
		}
	}
	msg := fmt.Sprintf("%s %s answered %d %s", a.method, a.path, a.status, http.StatusText(a.status))
	switch {
	case text != "":
		msg += ": " + text
	case !shaped && a.status == http.StatusNotFound:
		msg += " with no CSP error body"
	}
	if class == backends.ClassUnavailable && a.status == http.StatusNotFound {
		msg += fmt.Sprintf(" (not the CSP's answer for a missing object: is backends.%s.urls right?)", b.name)
	}
	return b.errorf(class, rpc, "%s", msg)
}

// errorf returns a classified error whose message names the backend and the RPC.
func (b *Backend) errorf(class backends.Class, rpc, format string, args ...any) *backends.Error {
	return backends.Errorf(class, "backend %q: %s: %s", b.name, rpc, fmt.Sprintf(format, args...))
}

// StatusRules returns the CSP rows of the gateway's error table, for docs/errors.md.
func StatusRules() []StatusRule { return slices.Clone(statusRules) }
