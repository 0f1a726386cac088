package cspfake

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	testUser     = "admin"
	testPassword = "sentinel-password-3f9a"
	testArrayIP  = "10.0.0.5"
)

var allProfiles = []Profile{ProfileSpec, ProfileHPE, ProfileTrueNAS}

// client talks to a fake under the base path /csp, as the HPE driver does on an array.
type client struct {
	t       *testing.T
	fake    *Fake
	base    string
	token   string
	arrayIP string
}

// start serves a fake with the test credentials (and any other options) and logs in.
func start(t *testing.T, o Options) *client {
	t.Helper()
	c := startNoLogin(t, o)
	c.login()
	return c
}

func startNoLogin(t *testing.T, o Options) *client {
	t.Helper()
	o.Username, o.Password = testUser, testPassword
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &client{t: t, fake: f, base: srv.URL + "/csp/containers/v1", arrayIP: testArrayIP}
}

func (c *client) login() {
	c.t.Helper()
	var tok map[string]any
	c.expect(http.StatusOK, "POST", "/tokens",
		`{"username":"`+testUser+`","password":"`+testPassword+`","array_ip":"`+c.arrayIP+`"}`, &tok)
	c.token, _ = tok["session_token"].(string)
}

// do sends one request; body is raw JSON ("" for none).
func (c *client) do(ctx context.Context, method, path, body string) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("x-auth-token", c.token)
	}
	if c.arrayIP != "" {
		req.Header.Set("x-array-ip", c.arrayIP)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// call sends a request and fails the test on a transport error.
func (c *client) call(method, path, body string) (int, []byte) {
	c.t.Helper()
	resp, b, err := c.do(context.Background(), method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// expect sends a request, checks the status, and decodes the answer into out (if set).
func (c *client) expect(want int, method, path, body string, out any) []byte {
	c.t.Helper()
	got, b := c.call(method, path, body)
	if got != want {
		c.t.Fatalf("%s %s %s: status %d, want %d; body %s", method, path, body, got, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return b
}

// id creates something and returns its id.
func (c *client) id(method, path, body string) string {
	c.t.Helper()
	var obj map[string]any
	c.expect(http.StatusOK, method, path, body, &obj)
	id, _ := obj["id"].(string)
	if id == "" {
		c.t.Fatalf("%s %s: no id in the answer", method, path)
	}
	return id
}

// host registers a host with an iSCSI initiator and returns nothing; its uuid is uuid.
func (c *client) host(uuid string) {
	c.t.Helper()
	c.expect(http.StatusOK, "POST", "/hosts",
		`{"uuid":"`+uuid+`","name":"node-`+uuid+`","iqns":["iqn.1994-05.com.redhat:`+uuid+`"],"wwpns":["10:00:00:00:c9:00:00:01"],"networks":["10.0.0.0/24"]}`, nil)
}

// errorsShape reports whether b is a CSP error body.
func errorsShape(b []byte) bool {
	var e struct {
		Errors []struct{ Code, Message string } `json:"errors"`
	}
	return json.Unmarshal(b, &e) == nil && len(e.Errors) == 1 && e.Errors[0].Code != "" && e.Errors[0].Message != ""
}

// falconShape reports whether b is Falcon's {"title","description"} body.
func falconShape(b []byte) bool {
	var e struct{ Title, Description string }
	return json.Unmarshal(b, &e) == nil && e.Title != "" && e.Description != "" && !bytes.Contains(b, []byte(`"errors"`))
}
