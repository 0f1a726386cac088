package cspfake

import (
	"fmt"
	"strings"
	"testing"
)

// TestCallLogNeverShowsSecrets runs a lifecycle with sentinel secrets in every profile
// (truenas makes the password the session token and echoes CHAP secrets) and looks for
// them in every field of the call log and in the violations.
func TestCallLogNeverShowsSecrets(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p, Validate: true})
			token := c.token
			lifecycle(t, c, p)
			c.call("POST", "/tokens", `{"username":"admin","password":"wrong-sentinel-pw","array_ip":"x"}`)
			c.call("POST", "/volumes", `{"name":"pvc-9","size":1,"config":{},"password":"`+testPassword+`"}`)
			c.call("GET", "/volumes?name="+testPassword, "")
			calls := c.fake.Calls()
			if len(calls) < 20 {
				t.Fatalf("only %d calls", len(calls))
			}
			sentinels := []string{testPassword, token, "chap-secret-1", "wrong-sentinel-pw"}
			all := fmt.Sprintf("%+v %q", calls, c.fake.ContractViolations())
			for _, s := range sentinels {
				if strings.Contains(all, s) {
					t.Errorf("secret %q in the call log", s)
				}
			}
			if !strings.Contains(all, redacted) {
				t.Error("nothing redacted")
			}
			first := calls[0]
			if first.Method != "POST" || first.Path != "/tokens" || first.Status != 200 || first.ArrayIP != testArrayIP {
				t.Errorf("first call %+v", first)
			}
		})
	}
}
