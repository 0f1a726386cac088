package cspfake

import (
	"strings"
	"testing"
)

func publishVolume(c *client, vol, host, protocol string) publishJSON {
	c.t.Helper()
	var info publishJSON
	c.expect(200, "PUT", "/volumes/"+vol+"/actions/publish", `{"host_uuid":"`+host+`","access_protocol":"`+protocol+`"}`, &info)
	return info
}

func TestPublishAnswers(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p})
			c.host("node-a")
			c.host("node-b")
			v1 := c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
			v2 := c.id("POST", "/volumes", `{"name":"pvc-2","size":1,"config":{}}`)

			a1 := publishVolume(c, v1, "node-a", "iscsi")
			a2 := publishVolume(c, v2, "node-a", "iscsi")
			b1 := publishVolume(c, v1, "node-b", "iscsi")
			again := publishVolume(c, v1, "node-a", "iscsi")

			if a1.SerialNumber == "" || a1.SerialNumber != b1.SerialNumber || a1.SerialNumber == a2.SerialNumber {
				t.Errorf("serials %q %q %q: want stable per volume", a1.SerialNumber, b1.SerialNumber, a2.SerialNumber)
			}
			if again.LunID != a1.LunID {
				t.Errorf("publish again: lun %d, first %d", again.LunID, a1.LunID)
			}
			wantLUN2 := int64(1)
			if p == ProfileTrueNAS {
				wantLUN2 = 0
			}
			if a1.LunID != 0 || a2.LunID != wantLUN2 || b1.LunID != 0 {
				t.Errorf("luns %d %d %d", a1.LunID, a2.LunID, b1.LunID)
			}
			if a1.AccessProtocol != "iscsi" || len(a1.TargetNames) != 1 || len(a1.DiscoveryIPs) == 0 {
				t.Errorf("iscsi answer %+v", a1)
			}
			if (p == ProfileTrueNAS) != (a1.CHAPUser != nil) {
				t.Errorf("chap without host chap: %+v", a1)
			}
			vols := c.fake.Volumes()
			if !vols[0].Published || strings.Join(vols[0].Hosts, ",") != "node-a,node-b" {
				t.Errorf("volume state %+v", vols[0])
			}
			if n := c.fake.Counters(); n.Publishes != 3 {
				t.Errorf("publishes %d, want 3", n.Publishes)
			}

			c.expect(204, "PUT", "/volumes/"+v1+"/actions/unpublish", `{"host_uuid":"node-a"}`, nil)
			var v volumeJSON
			c.expect(200, "GET", "/volumes/"+v1, "", &v)
			if !v.Published {
				t.Error("published must stay true while node-b holds it")
			}
			c.expect(204, "PUT", "/volumes/"+v1+"/actions/unpublish", `{"host_uuid":"node-b"}`, nil)
			c.expect(200, "GET", "/volumes/"+v1, "", &v)
			if v.Published {
				t.Error("published after the last unpublish")
			}
		})
	}
}

func TestPublishCHAPAndFC(t *testing.T) {
	c := start(t, Options{Profile: ProfileSpec})
	c.expect(200, "POST", "/hosts", `{"uuid":"node-c","iqns":["iqn.c"],"wwpns":["10:00:00:00:c9:00:00:02"],"chap_user":"chap-u","chap_password":"chap-secret-77"}`, nil)
	var host hostJSON
	c.expect(200, "POST", "/hosts", `{"uuid":"node-c","iqns":["iqn.c"],"wwpns":["10:00:00:00:c9:00:00:02"],"chap_user":"chap-u","chap_password":"chap-secret-77"}`, &host)
	if host.CHAPPassword != "" || host.CHAPUser != "chap-u" {
		t.Errorf("host answer %+v: CHAP secret must not be echoed", host)
	}
	if hs := c.fake.Hosts(); len(hs) != 1 || hs[0].CHAPUser != "chap-u" || len(hs[0].WWPNs) != 1 {
		t.Errorf("Hosts() %+v", hs)
	}
	v1 := c.id("POST", "/volumes", `{"name":"pvc-1","size":1,"config":{}}`)
	v2 := c.id("POST", "/volumes", `{"name":"pvc-2","size":1,"config":{}}`)
	iscsi := publishVolume(c, v1, "node-c", "iscsi")
	if iscsi.CHAPUser == nil || *iscsi.CHAPUser != "chap-u" || iscsi.CHAPPassword == nil || *iscsi.CHAPPassword != "chap-secret-77" {
		t.Errorf("iscsi answer without the host's CHAP: %+v", iscsi)
	}
	fc := publishVolume(c, v2, "node-c", "fc")
	if fc.AccessProtocol != "fc" || fc.TargetNames != nil || fc.DiscoveryIPs != nil || fc.CHAPUser != nil || fc.SerialNumber == "" {
		t.Errorf("fc answer %+v", fc)
	}
	for _, call := range c.fake.Calls() {
		if strings.Contains(call.Request+call.Response, "chap-secret-77") {
			t.Errorf("CHAP secret in the call log: %+v", call)
		}
	}
}
