package cspfake

import (
	"net/http"
	"testing"
	"time"
)

func TestLoginPerProfile(t *testing.T) {
	cases := []struct {
		name    string
		profile Profile
		body    string
		want    int
		falcon  bool // Falcon-shaped error body rather than CSP errors
	}{
		{"spec ok", ProfileSpec, `{"username":"admin","password":"` + testPassword + `","array_ip":"10.0.0.5"}`, 200, false},
		{"spec bad password", ProfileSpec, `{"username":"admin","password":"wrong","array_ip":"10.0.0.5"}`, 401, false},
		{"spec bad user", ProfileSpec, `{"username":"root","password":"` + testPassword + `","array_ip":"10.0.0.5"}`, 401, false},
		{"spec missing password", ProfileSpec, `{"username":"admin","array_ip":"10.0.0.5"}`, 400, false},
		{"spec wrong array", ProfileSpec, `{"username":"admin","password":"` + testPassword + `","array_ip":"10.9.9.9"}`, 400, false},
		{"hpe bad password", ProfileHPE, `{"username":"admin","password":"wrong","array_ip":"10.0.0.5"}`, 401, false},
		{"truenas ok, any username", ProfileTrueNAS, `{"username":"whoever","password":"` + testPassword + `","array_ip":"10.0.0.5"}`, 200, false},
		{"truenas bad password", ProfileTrueNAS, `{"username":"admin","password":"wrong","array_ip":"10.0.0.5"}`, 401, true},
		{"truenas wrong array", ProfileTrueNAS, `{"username":"admin","password":"` + testPassword + `","array_ip":"10.9.9.9"}`, 400, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startNoLogin(t, Options{Profile: tc.profile, ArrayIP: testArrayIP})
			status, body := c.call("POST", "/tokens", tc.body)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			n := c.fake.Counters()
			if status == 200 {
				if n.Logins != 1 || n.LoginFailures != 0 {
					t.Errorf("counters %+v", n)
				}
				return
			}
			if n.Logins != 0 || n.LoginFailures != 1 {
				t.Errorf("counters %+v", n)
			}
			if tc.falcon && !falconShape(body) || !tc.falcon && !errorsShape(body) {
				t.Errorf("error body %s: want falcon=%v", body, tc.falcon)
			}
		})
	}
}

func TestTokenFields(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := startNoLogin(t, Options{Profile: p})
			var tok struct {
				ID           string `json:"id"`
				SessionToken string `json:"session_token"`
				Created      int64  `json:"creation_time"`
				Expiry       int64  `json:"expiry_time"`
			}
			c.expect(200, "POST", "/tokens", `{"username":"admin","password":"`+testPassword+`","array_ip":"10.0.0.5"}`, &tok)
			ttl := time.Duration(tok.Expiry-tok.Created) * time.Second
			switch {
			case tok.ID == "":
				t.Errorf("no token id")
			case p == ProfileTrueNAS && (tok.SessionToken != testPassword || ttl != 24*time.Hour):
				t.Errorf("truenas token ttl %v: want the password and 24h", ttl)
			case p != ProfileTrueNAS && (tok.SessionToken == "" || tok.SessionToken == testPassword || ttl != time.Hour):
				t.Errorf("token ttl %v: want a random token and 1h", ttl)
			}
		})
	}
}

func TestExpireTokensAndRelogin(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p})
			c.expect(200, "GET", "/hosts", "", nil)
			c.fake.ExpireTokens()
			status, body := c.call("GET", "/hosts", "")
			if status != http.StatusUnauthorized {
				t.Fatalf("after ExpireTokens: %d %s", status, body)
			}
			if p == ProfileTrueNAS && !falconShape(body) || p != ProfileTrueNAS && !errorsShape(body) {
				t.Errorf("401 body %s", body)
			}
			c.login()
			c.expect(200, "GET", "/hosts", "", nil)
			if n := c.fake.Counters(); n.Logins != 2 {
				t.Errorf("logins %d, want 2", n.Logins)
			}
		})
	}
}

func TestTokenTTLAndLogout(t *testing.T) {
	c := start(t, Options{TokenTTL: 50 * time.Millisecond})
	c.expect(200, "GET", "/hosts", "", nil)
	time.Sleep(100 * time.Millisecond)
	c.expect(401, "GET", "/hosts", "", nil)

	// Logout, with a lifetime no loaded machine outlasts.
	c = start(t, Options{})
	var tok map[string]any
	c.expect(200, "POST", "/tokens", `{"username":"admin","password":"`+testPassword+`","array_ip":"x"}`, &tok)
	c.expect(204, "DELETE", "/tokens/"+tok["id"].(string), "", nil)
	c.expect(404, "DELETE", "/tokens/"+tok["id"].(string), "", nil)
}

func TestMissingTokenAndArrayIP(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p, ArrayIP: testArrayIP})
			token := c.token
			c.token = ""
			if status, body := c.call("GET", "/hosts", ""); status != 401 {
				t.Errorf("no token: %d %s", status, body)
			}
			c.token, c.arrayIP = token, "10.9.9.9"
			if status, body := c.call("GET", "/hosts", ""); status != 400 {
				t.Errorf("wrong x-array-ip: %d %s", status, body)
			}
			c.arrayIP = ""
			if status, body := c.call("GET", "/hosts", ""); status != 400 {
				t.Errorf("no x-array-ip: %d %s", status, body)
			}
		})
	}
	// Without Options.ArrayIP only truenas insists on an array IP.
	for _, p := range allProfiles {
		c := start(t, Options{Profile: p})
		c.arrayIP = ""
		want := 200
		if p == ProfileTrueNAS {
			want = 400
		}
		if status, body := c.call("GET", "/hosts", ""); status != want {
			t.Errorf("%s without x-array-ip: %d %s, want %d", p, status, body, want)
		}
	}
}
