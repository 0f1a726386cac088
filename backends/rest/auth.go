package rest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Auth (auth) are the credentials sent to the appliance in the Authorization header of
// every request, read from files so that a rotation (a Kubernetes Secret updated in place)
// needs no restart: a file is read again whenever its size or modification time changes.
// Either BearerTokenFile, or UsernameFile and PasswordFile (HTTP basic authentication), or
// nothing. The values are never logged and never appear in an error or a URL; only the
// files' paths do.
type Auth struct {
	BearerTokenFile string // bearerTokenFile
	UsernameFile    string // usernameFile
	PasswordFile    string // passwordFile
}

func (a Auth) configured() bool { return a != Auth{} }

// validate checks that a names one kind of credentials, and that they go over https only.
func (a Auth) validate(urls []string) []error {
	var errs []error
	switch {
	case !a.configured():
		return nil
	case a.BearerTokenFile != "" && (a.UsernameFile != "" || a.PasswordFile != ""):
		errs = append(errs, errors.New("auth: bearerTokenFile and usernameFile/passwordFile are both set; use one kind of credentials"))
	case a.BearerTokenFile == "" && (a.UsernameFile == "" || a.PasswordFile == ""):
		errs = append(errs, errors.New("auth: basic authentication needs both usernameFile and passwordFile"))
	}
	for i, raw := range urls {
		if strings.HasPrefix(strings.ToLower(raw), "http://") {
			errs = append(errs, fmt.Errorf("urls[%d]: credentials (auth) are sent only over https://; use https:// or remove auth", i))
		}
	}
	return errs
}

// credentialsError is a failure to read a credentials file. Its message names the key and
// the file, never the contents.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// SecretFile is one credentials file, cached until its size or modification time changes.
// Its value is never logged; errors name the key and the file, never the contents.
type SecretFile struct {
	key, path string // key: "backends.NAME.auth.bearerTokenFile", for messages

	mu    sync.Mutex
	size  int64
	mtime time.Time
	value string // "" until read
}

// NewSecretFile returns the credentials file at path, configured under key (such as
// "backends.NAME.auth.passwordFile", for messages).
func NewSecretFile(key, path string) *SecretFile { return &SecretFile{key: key, path: path} }

// Path is the file's path (which messages may name; never its contents).
func (f *SecretFile) Path() string { return f.path }

// Read returns the file's contents without surrounding white space, reading the file only
// when it changed since the last read.
func (f *SecretFile) Read() (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", &credentialsError{fmt.Errorf("%s: %s", f.key, fmt.Sprintf(format, args...))}
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		return fail("%v", err) // the *PathError names the file, not its contents
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && fi.Size() == f.size && fi.ModTime().Equal(f.mtime) {
		return f.value, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return fail("%v", err)
	}
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return fail("%s is empty", f.path)
	case strings.ContainsFunc(v, unicode.IsControl):
		return fail("%s holds more than one line or a control character; it must hold the value alone", f.path)
	}
	f.value, f.size, f.mtime = v, fi.Size(), fi.ModTime()
	return v, nil
}

// authTransport adds the Authorization header to every request it sends through next.
type authTransport struct {
	next                  http.RoundTripper
	token, user, password *SecretFile // token, or user and password
}

func newAuthTransport(name string, a Auth, next http.RoundTripper) *authTransport {
	file := func(key, path string) *SecretFile {
		if path == "" {
			return nil
		}
		return NewSecretFile("backends."+name+".auth."+key, path)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &authTransport{next: next, token: file("bearerTokenFile", a.BearerTokenFile),
		user: file("usernameFile", a.UsernameFile), password: file("passwordFile", a.PasswordFile)}
}

// RoundTrip sends a copy of req with the current credentials; it does not modify req.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h, err := t.header()
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", h)
	return t.next.RoundTrip(r)
}

func (t *authTransport) header() (string, error) {
	if t.token != nil {
		tok, err := t.token.Read()
		if err != nil {
			return "", err
		}
		return "Bearer " + tok, nil
	}
	user, err := t.user.Read()
	if err != nil {
		return "", err
	}
	pass, err := t.password.Read()
	if err != nil {
		return "", err
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)), nil
}

// CloseIdleConnections passes the call on, so that Backend.Close reaches the transport.
func (t *authTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
