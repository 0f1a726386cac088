package cspfake

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestVolumeIDs(t *testing.T) {
	hexID := regexp.MustCompile(`^[0-9a-f]{42}$`)
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p})
			vol := c.id("POST", "/volumes", `{"name":"pvc-0b1c","size":1048576,"config":{}}`)
			snap := c.id("POST", "/snapshots", `{"name":"snap-1","volume_id":"`+vol+`"}`)
			switch p {
			case ProfileTrueNAS:
				if vol != "tank_csi_pvc-0b1c" || snap != vol+"@snap-1" {
					t.Errorf("truenas ids %q %q", vol, snap)
				}
				other := c.id("POST", "/volumes", `{"name":"pvc-2","size":1,"config":{"root":"pool/k8s"}}`)
				if other != "pool_k8s_pvc-2" {
					t.Errorf("truenas id with root: %q", other)
				}
			default:
				if !hexID.MatchString(vol) || !hexID.MatchString(snap) {
					t.Errorf("ids %q %q: want 42 hex characters", vol, snap)
				}
			}
			long := strings.Repeat("a", 120)
			status, body := c.call("POST", "/volumes", `{"name":"`+long+`","size":1,"config":{}}`)
			if p == ProfileTrueNAS && status != 500 || p != ProfileTrueNAS && status != 200 {
				t.Errorf("long name: %d %s", status, body)
			}
		})
	}
}

func TestVolumeAnswerAndState(t *testing.T) {
	c := start(t, Options{Profile: ProfileHPE})
	var v volumeJSON
	c.expect(200, "POST", "/volumes", `{"name":"pvc-1","size":"1073741824","description":"d","config":{"perf":"fast","limit_iops":"100"}}`, &v)
	if v.Size != 1073741824 || v.Description != "d" || v.Published || v.Config["perf"] != "fast" || v.Clone {
		t.Errorf("answer %+v", v)
	}
	c.expect(200, "PUT", "/volumes/"+v.ID, `{"size":2147483648,"description":"e","config":{"limit_iops":500}}`, &v)
	if v.Size != 2147483648 || v.Description != "e" || v.Config["perf"] != "fast" || v.Config["limit_iops"] != float64(500) {
		t.Errorf("after edit %+v", v)
	}
	vols := c.fake.Volumes()
	if len(vols) != 1 || vols[0].ID != v.ID || vols[0].Size != 2147483648 || vols[0].Serial == "" {
		t.Errorf("Volumes() %+v", vols)
	}
	// A rejected edit changes nothing.
	c.expect(400, "PUT", "/volumes/"+v.ID, `{"size":4294967296,"config":{"encrypted":true}}`, nil)
	if got := c.fake.Volumes()[0].Size; got != 2147483648 {
		t.Errorf("size after rejected edit: %d", got)
	}
	var list []volumeJSON
	c.expect(200, "GET", "/volumes", "", &list)
	if len(list) != 1 {
		t.Errorf("list %+v", list)
	}
}

func TestVolumeNotFoundBodies(t *testing.T) {
	for _, p := range allProfiles {
		c := start(t, Options{Profile: p})
		// The HPE driver depends on a CSP-shaped 404 for an unknown name.
		if status, body := c.call("GET", "/volumes?name=absent", ""); status != 404 || !errorsShape(body) {
			t.Errorf("%s GET ?name=: %d %s", p, status, body)
		}
		// truenas-csp sets only the status on a delete of an absent volume.
		status, body := c.call("DELETE", "/volumes/absent", "")
		if status != 404 || (p == ProfileTrueNAS) != (len(body) == 0) {
			t.Errorf("%s DELETE absent: %d %q", p, status, body)
		}
	}
}

func TestWrongBasePathIsHTML(t *testing.T) {
	c := start(t, Options{})
	for _, path := range []string{"/csp/volumes", "/containers/v2/volumes", "/"} {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(c.base, "/csp/containers/v1")+path, nil)
		req.Header.Set("x-auth-token", c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	// Any prefix works, including none.
	c.base = strings.TrimSuffix(c.base, "/csp/containers/v1") + "/containers/v1"
	c.expect(200, "GET", "/volumes", "", nil)
	calls := c.fake.Calls()
	if last := calls[len(calls)-1]; last.Path != "/volumes" || last.Status != 200 {
		t.Errorf("last call %+v", last)
	}
}

func TestDuplicateNameOptions(t *testing.T) {
	c := start(t, Options{ReturnExistingOnDuplicate: true})
	first := c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	again := c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	if first != again || c.fake.Counters().Volumes != 1 {
		t.Errorf("duplicate gave %s then %s", first, again)
	}

	tn := start(t, Options{Profile: ProfileTrueNAS})
	tn.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	status, body := tn.call("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	if status != 500 || !strings.Contains(string(body), "Traceback (most recent call last)") || !errorsShape(body) {
		t.Errorf("truenas duplicate: %d %s", status, body)
	}
}

func TestTrueNASListWithoutNameIsEmpty(t *testing.T) {
	c := start(t, Options{Profile: ProfileTrueNAS})
	c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	if status, body := c.call("GET", "/volumes", ""); status != 200 || len(body) != 0 {
		t.Errorf("truenas list: %d %q, want an empty 200", status, body)
	}
}

func TestForceDeletePublished(t *testing.T) {
	c := start(t, Options{})
	c.host("node-a")
	vol := c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	c.expect(200, "PUT", "/volumes/"+vol+"/actions/publish", `{"host_uuid":"node-a","access_protocol":"iscsi"}`, nil)
	status, body := c.call("DELETE", "/volumes/"+vol, "")
	if status != 400 || !strings.Contains(string(body), "published") {
		t.Errorf("delete published: %d %s", status, body)
	}
	c.expect(204, "DELETE", "/volumes/"+vol+"?force=true", "", nil)
	if n := c.fake.Counters(); n.Volumes != 0 || n.Publishes != 0 {
		t.Errorf("counters %+v", n)
	}
}
