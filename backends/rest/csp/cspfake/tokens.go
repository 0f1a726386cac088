package cspfake

import (
	"net/http"
	"strconv"
	"time"
)

// token is one issued session. The truenas profile issues the password itself as the
// session token; every login still makes a new record, so a login after ExpireTokens
// makes the same value valid again.
type token struct {
	id       string
	value    string
	username string
	arrayIP  string
	created  time.Time
	expires  time.Time
	revoked  bool
}

// ExpireTokens makes every token issued so far answer 401 from now on, as after an
// array's inactivity timeout. Tokens from later logins are valid.
func (f *Fake) ExpireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tokens {
		t.revoked = true
	}
}

// createToken is POST /tokens. Callers hold f.mu.
func (f *Fake) createToken(q *request) reply {
	if f.truenas() {
		return f.createTokenTrueNAS(q)
	}
	user, okUser := stringField(q.body, "username")
	pass, okPass := stringField(q.body, "password")
	arrayIP, okIP := stringField(q.body, "array_ip")
	switch {
	case !okUser || !okPass || !okIP || user == "" || pass == "":
		f.loginFailures++
		return f.badRequest("username and password are required")
	case f.opts.ArrayIP != "" && (arrayIP != f.opts.ArrayIP || q.header.Get("x-array-ip") != f.opts.ArrayIP):
		f.loginFailures++
		return f.badRequest("array_ip and x-array-ip must name array %s", f.opts.ArrayIP)
	case user != f.opts.Username || pass != f.opts.Password:
		f.loginFailures++
		return cspError(http.StatusUnauthorized, "Unauthorized", "Invalid username and/or password")
	}
	return ok(f.issue(hexID(), randomHex(32), user, arrayIP))
}

// createTokenTrueNAS imitates truenas-csp: its middleware takes the password (else the
// x-auth-token header) and the array IP (body, else header), pings TrueNAS with them, and
// the session token is the password.
func (f *Fake) createTokenTrueNAS(q *request) reply {
	pass, _ := stringField(q.body, "password")
	arrayIP, _ := stringField(q.body, "array_ip")
	if pass == "" || arrayIP == "" {
		pass, arrayIP = q.header.Get("x-auth-token"), q.header.Get("x-array-ip")
	}
	user, _ := stringField(q.body, "username")
	switch {
	case pass == "":
		f.loginFailures++
		return falconError(http.StatusUnauthorized, "Missing token",
			"Missing x-auth-token in header or password in Tokens request")
	case arrayIP == "" || (f.opts.ArrayIP != "" && arrayIP != f.opts.ArrayIP):
		f.loginFailures++
		return falconError(http.StatusBadRequest, "Missing backend array IP",
			"Missing x-array-ip in header or array_ip in Tokens request")
	case pass != f.opts.Password:
		f.loginFailures++
		return falconError(http.StatusUnauthorized, "Authentication failed",
			"Unable to authenticate with provided credentials")
	}
	id := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 6, 64) // str(time())
	return ok(f.issue(id, pass, user, arrayIP))
}

// tokenJSON is the AccessToken answer.
type tokenJSON struct {
	ID           string `json:"id"`
	Username     string `json:"username"`
	ArrayIP      string `json:"array_ip"`
	SessionToken string `json:"session_token"`
	CreationTime int64  `json:"creation_time"`
	ExpiryTime   int64  `json:"expiry_time"`
}

func (f *Fake) issue(id, value, user, arrayIP string) tokenJSON {
	now := time.Now()
	t := &token{id: id, value: value, username: user, arrayIP: arrayIP, created: now, expires: now.Add(f.opts.TokenTTL)}
	f.tokens[id] = t
	f.addSecret(value)
	f.logins++
	return tokenJSON{
		ID: t.id, Username: t.username, ArrayIP: t.arrayIP, SessionToken: t.value,
		CreationTime: t.created.Unix(), ExpiryTime: t.expires.Unix(),
	}
}

// authenticate checks x-array-ip and x-auth-token for every call but POST /tokens.
// Callers hold f.mu.
func (f *Fake) authenticate(q *request) (reply, bool) {
	value, arrayIP := q.header.Get("x-auth-token"), q.header.Get("x-array-ip")
	if f.truenas() {
		switch {
		case value == "":
			return falconError(http.StatusUnauthorized, "Missing token",
				"Missing x-auth-token in header or password in Tokens request"), false
		case arrayIP == "" || (f.opts.ArrayIP != "" && arrayIP != f.opts.ArrayIP):
			return falconError(http.StatusBadRequest, "Missing backend array IP",
				"Missing x-array-ip in header or array_ip in Tokens request"), false
		case !f.validToken(value):
			return falconError(http.StatusUnauthorized, "Authentication failed",
				"Unable to authenticate with provided credentials"), false
		}
		return reply{}, true
	}
	switch {
	case f.opts.ArrayIP != "" && arrayIP != f.opts.ArrayIP:
		return f.badRequest("x-array-ip must name array %s", f.opts.ArrayIP), false
	case value == "":
		return cspError(http.StatusUnauthorized, "Unauthorized", "x-auth-token header is required"), false
	case !f.validToken(value):
		return cspError(http.StatusUnauthorized, "Unauthorized", "session token is invalid or expired"), false
	}
	return reply{}, true
}

func (f *Fake) validToken(value string) bool {
	now := time.Now()
	for _, t := range f.tokens {
		if t.value == value && !t.revoked && now.Before(t.expires) {
			return true
		}
	}
	return false
}

// deleteToken is DELETE /tokens/{id}; truenas-csp answers 204 whatever the id.
func (f *Fake) deleteToken(q *request) reply {
	id := q.param("id")
	if _, found := f.tokens[id]; !found && !f.truenas() {
		return f.notFound("token %s not found", id)
	}
	delete(f.tokens, id)
	return noContent()
}

// IssuedTokens returns every session token the fake has issued, expired or not, so that a
// test can check that none appears where it must not.
func (f *Fake) IssuedTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.tokens))
	for _, t := range f.tokens {
		out = append(out, t.value)
	}
	return out
}
