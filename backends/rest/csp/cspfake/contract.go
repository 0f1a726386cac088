package cspfake

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// contractYAML is the unmodified CSP contract (contract/SOURCE says where it comes from).
//
//go:embed contract/openapi.yaml
var contractYAML []byte

// contract validates requests and responses against openapi.yaml, then applies our
// stricter rule (no undeclared properties, see strictProperties) and forgives what the
// deviation list allows.
type contract struct {
	doc *openapi3.T
}

// sharedContract loads openapi.yaml once per process: parsing and checking it takes
// about 0.1 s, and validation only reads it, so every Fake can use the same one.
var sharedContract = sync.OnceValues(loadContract)

func loadContract() (*contract, error) {
	doc, err := openapi3.NewLoader().LoadFromData(contractYAML)
	if err != nil {
		return nil, fmt.Errorf("cspfake: load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("cspfake: openapi.yaml is not valid: %w", err)
	}
	return &contract{doc: doc}, nil
}

// ContractViolations returns every difference found so far between the traffic and
// openapi.yaml, after the deviation list; empty when all of it matched. Only with
// Options.Validate.
func (f *Fake) ContractViolations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}

// check validates one exchange when Options.Validate is set. A request to a path or
// method openapi.yaml does not have is a violation; so is the answer when it was sent.
func (f *Fake) check(r *http.Request, rel string, rt *route, known bool, params map[string]string, body []byte, rep reply, fault *Fault) {
	if f.contract == nil {
		return
	}
	var found []string
	if rt == nil {
		what := "no such path"
		if known {
			what = "no such method for the path"
		}
		found = []string{fmt.Sprintf("%s %s: request: %s in openapi.yaml", r.Method, rel, what)}
	} else {
		answered := rep.status != 0 && (fault == nil || !fault.DropReply)
		found = f.contract.exchange(r, rel, rt, params, body, rep, answered)
	}
	if len(found) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range found {
		f.violations = append(f.violations, f.scrub(v))
	}
}

// finding is one difference before the deviation list is applied.
type finding struct {
	pointer string // JSON pointer into the body, array indexes as "*"; "" for the whole
	rule    string // kin-openapi's schema field ("type", "readOnly", ...) or one of ours
	value   any
	message string
}

// exchange validates the request and, when it was answered, the response.
func (c *contract) exchange(r *http.Request, rel string, rt *route, params map[string]string, body []byte, rep reply, answered bool) []string {
	ctx := context.Background()
	pathItem := c.doc.Paths.Value(rt.path)
	op := pathItem.GetOperation(rt.method)
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	opts := &openapi3filter.Options{MultiError: true, AuthenticationFunc: apiKeyPresent}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Options: opts,
		Route: &routers.Route{Spec: c.doc, Path: rt.path, PathItem: pathItem, Method: rt.method, Operation: op},
	}

	var out []string
	report := func(direction string, fs []finding) {
		for _, fd := range fs {
			if !forgiven(op.OperationID, direction, fd) {
				where := ""
				if fd.pointer != "" {
					where = " " + fd.pointer + ":"
				}
				out = append(out, fmt.Sprintf("%s %s (%s) %s:%s %s", r.Method, rel, op.OperationID, direction, where, fd.message))
			}
		}
	}

	reqFindings := flatten(openapi3filter.ValidateRequest(ctx, in))
	if op.RequestBody != nil {
		reqFindings = append(reqFindings, strictProperties(bodySchema(op.RequestBody.Value.Content), body)...)
	}
	report("request", reqFindings)
	if !answered {
		return out
	}

	var respFindings []finding
	declared := op.Responses.Status(rep.status)
	if rep.status >= 200 && rep.status < 300 && declared == nil {
		respFindings = append(respFindings, finding{rule: ruleUndeclaredStatus, message: fmt.Sprintf("success status %d is not declared", rep.status)})
	}
	header := http.Header{}
	if rep.status != http.StatusNoContent {
		header.Set("Content-Type", rep.mediaType())
	}
	respOpts := *opts
	if len(rep.body) == 0 && forgiven(op.OperationID, "response", finding{rule: ruleEmptyBody}) {
		respOpts.ExcludeResponseBody = true
	}
	respFindings = append(respFindings, flatten(openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rep.status, Header: header,
		Body: io.NopCloser(bytes.NewReader(rep.body)), Options: &respOpts,
	}))...)
	if declared != nil && declared.Value != nil && !respOpts.ExcludeResponseBody {
		respFindings = append(respFindings, strictProperties(bodySchema(declared.Value.Content), rep.body)...)
	}
	report("response", respFindings)
	return out
}

// apiKeyPresent is the AuthenticationFunc: the contract only says the x-auth-token
// header must be there; whether the token is valid is the fake's business.
func apiKeyPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s.Type == "apiKey" && s.In == "header" && in.RequestValidationInput.Request.Header.Get(s.Name) == "" {
		return fmt.Errorf("missing %s header", s.Name)
	}
	return nil
}

func bodySchema(content openapi3.Content) *openapi3.Schema {
	mt := content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}

// flatten turns kin-openapi's error tree into findings, one per schema error.
func flatten(err error) []finding {
	switch e := err.(type) {
	case nil:
		return nil
	case openapi3.MultiError:
		var out []finding
		for _, item := range e {
			out = append(out, flatten(item)...)
		}
		return out
	case *openapi3filter.RequestError:
		if e.Parameter == nil && isSchema(e.Err) {
			return flatten(e.Err)
		}
	case *openapi3filter.ResponseError:
		if isSchema(e.Err) {
			return flatten(e.Err)
		}
	case *openapi3.SchemaError:
		msg := e.Reason
		if msg == "" {
			msg = fmt.Sprintf("doesn't match schema field %q", e.SchemaField)
		}
		return []finding{{pointer: pointer(e.JSONPointer()), rule: e.SchemaField, value: e.Value, message: msg}}
	}
	return []finding{{message: err.Error()}}
}

func isSchema(err error) bool {
	switch err.(type) {
	case openapi3.MultiError, *openapi3.SchemaError:
		return true
	}
	return false
}

// pointer renders a JSON pointer with array indexes as "*".
func pointer(segments []string) string {
	if len(segments) == 0 {
		return ""
	}
	parts := make([]string, len(segments))
	for i, s := range segments {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			s = "*"
		}
		parts[i] = s
	}
	return "/" + strings.Join(parts, "/")
}

// Our own rules, beyond what kin-openapi checks.
const (
	// ruleUnknownProperty: openapi.yaml has no required properties and no
	// additionalProperties:false (CSP-MAPPING §1.6 #10), so a misspelt field would pass.
	// Every object schema that declares properties is therefore closed here, except the
	// free-form config objects.
	ruleUnknownProperty = "unknown-property"
	// ruleEmptyBody: an answer without the body its status declares.
	ruleEmptyBody = "empty-body"
	// ruleUndeclaredStatus: a 2xx status the operation does not declare. Error statuses
	// are not checked: openapi.yaml gives them no schema, and CSPs use more than it lists
	// (409 on create, 404 on publish, ...).
	ruleUndeclaredStatus = "undeclared-status"
)

// freeForm names properties whose objects take any key (config: CSP-MAPPING §1.3).
var freeForm = map[string]bool{"config": true}

// strictProperties reports properties the schema does not declare, at any depth.
func strictProperties(schema *openapi3.Schema, body []byte) []finding {
	if schema == nil || len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil // kin-openapi reports bodies that do not decode
	}
	var out []finding
	walkStrict(schema, v, nil, &out)
	return out
}

func walkStrict(schema *openapi3.Schema, v any, path []string, out *[]finding) {
	switch x := v.(type) {
	case []any:
		if schema.Items == nil || schema.Items.Value == nil {
			return
		}
		for i, item := range x {
			walkStrict(schema.Items.Value, item, append(path, fmt.Sprint(i)), out)
		}
	case map[string]any:
		if len(schema.Properties) == 0 {
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			prop := schema.Properties[k]
			p := append(append([]string(nil), path...), k)
			switch {
			case prop == nil || prop.Value == nil:
				*out = append(*out, finding{pointer: pointer(p), rule: ruleUnknownProperty, value: x[k],
					message: fmt.Sprintf("property %q is not declared", k)})
			case !freeForm[k]:
				walkStrict(prop.Value, x[k], p, out)
			}
		}
	}
}
