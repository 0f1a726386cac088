package csp

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
)

// session is the backend's login to the CSP: one token, shared by every call. Logins are
// single-flight: callers that find the token rejected together cause one login.
type session struct {
	b                  *Backend
	username, password *rest.SecretFile

	mu    sync.Mutex // held during a login
	token string     // "" before the first login
}

// current returns the session's token, logging in first when there is none.
func (s *session) current(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" {
		return s.token, nil
	}
	return s.loginLocked(ctx)
}

// renew returns a fresh token after the CSP rejected stale: if another call has logged in
// since, its token; otherwise it logs in again.
func (s *session) renew(ctx context.Context, stale string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != stale && s.token != "" {
		return s.token, nil
	}
	return s.loginLocked(ctx)
}

// loginLocked posts the credentials to /tokens; s.mu is held. Credentials the CSP refuses
// are the gateway's configuration's fault, not the caller's: ClassUnavailable.
func (s *session) loginLocked(ctx context.Context) (string, error) {
	s.token = ""
	user, err := s.username.Read()
	if err != nil {
		return "", backends.Errorf(backends.ClassUnavailable, "backend %q: cannot log in to the CSP: %v", s.b.name, err)
	}
	password, err := s.password.Read()
	if err != nil {
		return "", backends.Errorf(backends.ClassUnavailable, "backend %q: cannot log in to the CSP: %v", s.b.name, err)
	}
	var tok token
	a, err := s.b.send(ctx, request{rpc: "login", method: http.MethodPost, path: "/tokens",
		body: token{Username: user, Password: password, ArrayIP: s.b.cfg.ArrayIP}}, "", &tok)
	if err != nil {
		return "", err
	}
	switch {
	case a.status == http.StatusOK && tok.SessionToken != "":
		s.b.logins.Add(1)
		s.token = tok.SessionToken
		return s.token, nil
	case a.status == http.StatusOK:
		return "", s.b.errorf(backends.ClassInternal, "login", "POST %s/tokens answered 200 without a session_token", containersPath)
	case a.status == http.StatusUnauthorized || a.status == http.StatusBadRequest || a.status == http.StatusForbidden:
		text, _ := a.said()
		text = strings.ReplaceAll(text, password, "[REDACTED]") // a CSP may repeat what it refused
		return "", s.b.errorf(backends.ClassUnavailable, "login",
			"the CSP refused the credentials in %s and %s (%d %s: %s); fix the files (they are read again at the next login)",
			s.username.Path(), s.password.Path(), a.status, http.StatusText(a.status), text)
	}
	return "", s.b.classify("login", a)
}
