package cspfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// want is the expected status per profile: spec, hpe, truenas.
type want [3]int

func all(status int) want { return want{status, status, status} }

func (w want) of(p Profile) int {
	switch p {
	case ProfileHPE:
		return w[1]
	case ProfileTrueNAS:
		return w[2]
	}
	return w[0]
}

// step is one request of a scenario. {key} in path and body is replaced by the id saved
// under key by an earlier step.
type step struct {
	name         string
	method, path string
	body         string
	want         want
	save         string
}

// TestBehaviourPerProfile runs one scenario on every profile, checking each status.
func TestBehaviourPerProfile(t *testing.T) {
	const noGroups = http.StatusNotFound
	steps := []step{
		{name: "host upsert", method: "POST", path: "/hosts", body: `{"uuid":"node-a","iqns":["iqn.a"],"networks":["10.0.0.0/24"]}`, want: all(200)},
		{name: "host upsert again", method: "POST", path: "/hosts", body: `{"uuid":"node-a","iqns":["iqn.a","iqn.a2"]}`, want: all(200)},
		{name: "host without uuid", method: "POST", path: "/hosts", body: `{"name":"x"}`, want: all(400)},
		{name: "host without initiators", method: "POST", path: "/hosts", body: `{"uuid":"node-empty"}`, want: all(200)},
		{name: "list hosts", method: "GET", path: "/hosts", want: all(200)},

		{name: "create volume", method: "POST", path: "/volumes", body: `{"name":"pvc-1","size":1073741824,"config":{"perf":"x"}}`, want: all(200), save: "vol"},
		{name: "duplicate name", method: "POST", path: "/volumes", body: `{"name":"pvc-1","size":1073741824,"config":{}}`, want: want{409, 409, 500}},
		{name: "size as a string", method: "POST", path: "/volumes", body: `{"name":"pvc-2","size":"2147483648","config":{}}`, want: all(200), save: "vol2"},
		{name: "size zero", method: "POST", path: "/volumes", body: `{"name":"pvc-3","size":0,"config":{}}`, want: all(400)},
		{name: "size fractional", method: "POST", path: "/volumes", body: `{"name":"pvc-3","size":1.5,"config":{}}`, want: all(400)},
		{name: "size missing", method: "POST", path: "/volumes", body: `{"name":"pvc-3","config":{}}`, want: all(400)},
		{name: "name missing", method: "POST", path: "/volumes", body: `{"size":1,"config":{}}`, want: all(400)},
		{name: "no config", method: "POST", path: "/volumes", body: `{"name":"pvc-4","size":1}`, want: want{200, 200, 500}},
		{name: "underscore in name", method: "POST", path: "/volumes", body: `{"name":"pvc_5","size":1,"config":{}}`, want: want{200, 200, 500}},
		{name: "name not a string", method: "POST", path: "/volumes", body: `{"name":7,"size":1,"config":{}}`, want: all(400)},
		{name: "config not an object", method: "POST", path: "/volumes", body: `{"name":"pvc-7","size":1,"config":[]}`, want: all(400)},
		{name: "not JSON", method: "POST", path: "/volumes", body: `{"name":`, want: all(400)},
		{name: "unknown group", method: "POST", path: "/volumes", body: `{"name":"pvc-6","size":1,"config":{},"volume_group_id":"nope"}`, want: want{404, 404, 200}},

		{name: "get by name", method: "GET", path: "/volumes?name=pvc-1", want: all(200)},
		{name: "get unknown name", method: "GET", path: "/volumes?name=pvc-none", want: all(404)},
		{name: "list volumes", method: "GET", path: "/volumes", want: all(200)},
		{name: "get by id", method: "GET", path: "/volumes/{vol}", want: all(200)},
		{name: "get unknown id", method: "GET", path: "/volumes/nope", want: all(404)},

		{name: "grow", method: "PUT", path: "/volumes/{vol}", body: `{"size":2147483648}`, want: all(200)},
		{name: "same size", method: "PUT", path: "/volumes/{vol}", body: `{"size":2147483648}`, want: all(200)},
		{name: "shrink", method: "PUT", path: "/volumes/{vol}", body: `{"size":1073741824}`, want: all(400)},
		{name: "mutable config", method: "PUT", path: "/volumes/{vol}", body: `{"config":{"description":"d"}}`, want: all(200)},
		{name: "immutable config", method: "PUT", path: "/volumes/{vol}", body: `{"config":{"encrypted":true}}`, want: all(400)},
		{name: "profile's own mutable key", method: "PUT", path: "/volumes/{vol}", body: `{"config":{"limit_iops":1000}}`, want: want{200, 200, 400}},
		{name: "truenas mutable key", method: "PUT", path: "/volumes/{vol}", body: `{"config":{"compression":"lz4"}}`, want: want{400, 400, 200}},
		{name: "unknown top-level key", method: "PUT", path: "/volumes/{vol}", body: `{"encrypted":true}`, want: want{400, 400, 200}},
		{name: "edit unknown", method: "PUT", path: "/volumes/nope", body: `{"size":1}`, want: all(404)},

		{name: "publish unknown host", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"host_uuid":"node-x","access_protocol":"iscsi"}`, want: all(404)},
		{name: "publish unknown volume", method: "PUT", path: "/volumes/nope/actions/publish", body: `{"host_uuid":"node-a","access_protocol":"iscsi"}`, want: all(404)},
		{name: "publish without host", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"access_protocol":"iscsi"}`, want: all(400)},
		{name: "publish host without iqns", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"host_uuid":"node-empty","access_protocol":"iscsi"}`, want: all(400)},
		{name: "publish nvmetcp", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"host_uuid":"node-a","access_protocol":"nvmetcp"}`, want: all(400)},
		{name: "publish", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"host_uuid":"node-a","access_protocol":"iscsi"}`, want: all(200)},
		{name: "publish again", method: "PUT", path: "/volumes/{vol}/actions/publish", body: `{"host_uuid":"node-a","access_protocol":"iscsi"}`, want: all(200)},
		{name: "delete published", method: "DELETE", path: "/volumes/{vol}", want: want{400, 400, 409}},
		{name: "delete host with published volume", method: "DELETE", path: "/hosts?uuid=node-a", want: all(409)},

		{name: "snapshot", method: "POST", path: "/snapshots", body: `{"name":"snap-1","volume_id":"{vol}","description":"s","config":{}}`, want: all(200), save: "snap"},
		{name: "duplicate snapshot", method: "POST", path: "/snapshots", body: `{"name":"snap-1","volume_id":"{vol}"}`, want: want{409, 409, 200}},
		{name: "snapshot of unknown volume", method: "POST", path: "/snapshots", body: `{"name":"snap-1","volume_id":"nope"}`, want: all(404)},
		{name: "snapshot without name", method: "POST", path: "/snapshots", body: `{"volume_id":"{vol}"}`, want: all(400)},
		{name: "list snapshots of volume", method: "GET", path: "/snapshots?volume_id={vol}", want: all(200)},
		{name: "list snapshots by name", method: "GET", path: "/snapshots?volume_id={vol}&name=snap-1", want: all(200)},
		{name: "absent snapshot name", method: "GET", path: "/snapshots?volume_id={vol}&name=snap-none", want: all(404)},
		{name: "snapshots of unknown volume", method: "GET", path: "/snapshots?volume_id=nope", want: all(404)},
		{name: "snapshots without volume_id", method: "GET", path: "/snapshots", want: want{200, 200, 400}},
		{name: "snapshots exists mode", method: "GET", path: "/snapshots?volume_id={vol}&mode=exists", want: all(200)},
		{name: "empty snapshot list", method: "GET", path: "/snapshots?volume_id={vol2}", want: want{200, 200, 404}},
		{name: "get snapshot", method: "GET", path: "/snapshots/{snap}", want: all(200)},
		{name: "get unknown snapshot", method: "GET", path: "/snapshots/nope", want: all(404)},

		{name: "clone", method: "POST", path: "/volumes", body: `{"name":"pvc-clone","size":2147483648,"base_snapshot_id":"{snap}","clone":true,"config":{}}`, want: all(200), save: "clone"},
		{name: "clone without size", method: "POST", path: "/volumes", body: `{"name":"pvc-clone2","base_snapshot_id":"{snap}","clone":true,"config":{}}`, want: all(200), save: "clone2"},
		{name: "clone smaller than snapshot", method: "POST", path: "/volumes", body: `{"name":"pvc-clone3","size":1,"base_snapshot_id":"{snap}","clone":true,"config":{}}`, want: all(400)},
		{name: "clone of unknown snapshot", method: "POST", path: "/volumes", body: `{"name":"pvc-clone3","size":1,"base_snapshot_id":"nope","clone":true,"config":{}}`, want: all(404)},
		{name: "base snapshot without clone", method: "POST", path: "/volumes", body: `{"name":"pvc-clone3","size":1,"base_snapshot_id":"{snap}","config":{}}`, want: all(400)},
		{name: "delete snapshot with clone", method: "DELETE", path: "/snapshots/{snap}", want: want{409, 409, 204}},
		{name: "delete volume with snapshots or clones", method: "DELETE", path: "/volumes/{vol}?force=true", want: all(409)},

		{name: "unpublish unknown host", method: "PUT", path: "/volumes/{vol}/actions/unpublish", body: `{"host_uuid":"node-x"}`, want: all(404)},
		{name: "unpublish unknown volume", method: "PUT", path: "/volumes/nope/actions/unpublish", body: `{"host_uuid":"node-a"}`, want: all(404)},
		{name: "unpublish", method: "PUT", path: "/volumes/{vol}/actions/unpublish", body: `{"host_uuid":"node-a"}`, want: all(204)},
		{name: "unpublish again", method: "PUT", path: "/volumes/{vol}/actions/unpublish", body: `{"host_uuid":"node-a"}`, want: all(204)},
		{name: "delete host", method: "DELETE", path: "/hosts/node-empty", want: all(204)},
		{name: "delete host again", method: "DELETE", path: "/hosts/node-empty", want: all(404)},
		{name: "delete host by uuid without uuid", method: "DELETE", path: "/hosts", want: all(400)},

		{name: "delete clone", method: "DELETE", path: "/volumes/{clone}", want: all(204)},
		{name: "delete clone2", method: "DELETE", path: "/volumes/{clone2}", want: all(204)},
		{name: "delete snapshot", method: "DELETE", path: "/snapshots/{snap}", want: want{204, 204, 404}},
		{name: "delete snapshot again", method: "DELETE", path: "/snapshots/{snap}", want: all(404)},
		{name: "delete volume", method: "DELETE", path: "/volumes/{vol}", want: all(204)},
		{name: "delete volume again", method: "DELETE", path: "/volumes/{vol}", want: all(404)},

		{name: "create volume group", method: "POST", path: "/volume_groups", body: `{"name":"vg-1","description":"d","config":{"protection_template":"p"}}`, want: want{200, 200, noGroups}, save: "vg"},
		{name: "duplicate volume group", method: "POST", path: "/volume_groups", body: `{"name":"vg-1"}`, want: want{409, 409, noGroups}},
		{name: "volume group by name", method: "GET", path: "/volume_groups?name=vg-1", want: want{200, 200, noGroups}},
		{name: "unknown volume group name", method: "GET", path: "/volume_groups?name=vg-none", want: all(404)},
		{name: "list volume groups", method: "GET", path: "/volume_groups", want: want{200, 200, noGroups}},
		{name: "get volume group", method: "GET", path: "/volume_groups/{vg}", want: want{200, 200, noGroups}},
		{name: "move volume into group", method: "PUT", path: "/volumes/{vol2}", body: `{"volume_group_id":"{vg}"}`, want: all(200)},
		{name: "delete non-empty group", method: "DELETE", path: "/volume_groups/{vg}", want: want{409, 409, noGroups}},
		{name: "snapshot group", method: "POST", path: "/snapshot_groups", body: `{"name":"sg-1","volume_group_id":"{vg}","config":{}}`, want: want{200, 200, noGroups}, save: "sg"},
		{name: "snapshot group without group", method: "POST", path: "/snapshot_groups", body: `{"name":"sg-2"}`, want: want{400, 400, noGroups}},
		{name: "snapshot groups without group id", method: "GET", path: "/snapshot_groups", want: want{400, 400, noGroups}},
		{name: "snapshot groups of group", method: "GET", path: "/snapshot_groups?volume_group_id={vg}", want: want{200, 200, noGroups}},
		{name: "get snapshot group", method: "GET", path: "/snapshot_groups/{sg}", want: want{200, 200, noGroups}},
		{name: "delete snapshot group", method: "DELETE", path: "/snapshot_groups/{sg}", want: want{204, 204, noGroups}},
		{name: "delete snapshot group again", method: "DELETE", path: "/snapshot_groups/{sg}", want: all(404)},
		{name: "leave group", method: "PUT", path: "/volumes/{vol2}", body: `{"volume_group_id":""}`, want: all(200)},
		{name: "delete empty group", method: "DELETE", path: "/volume_groups/{vg}", want: want{204, 204, noGroups}},
		{name: "replication partners", method: "GET", path: "/replication_partners", want: want{200, 200, noGroups}},
		{name: "unknown replication partner", method: "GET", path: "/replication_partners?name=x", want: all(404)},
		{name: "unknown volume group id", method: "GET", path: "/volume_groups/nope", want: all(404)},
		{name: "unknown snapshot group id", method: "GET", path: "/snapshot_groups/nope", want: all(404)},

		{name: "method not allowed", method: "PATCH", path: "/volumes", body: `{}`, want: all(405)},
		{name: "unknown route", method: "GET", path: "/pools", want: all(404)},
		{name: "logout unknown token", method: "DELETE", path: "/tokens/nope", want: want{404, 404, 204}},
	}
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p, ArrayIP: testArrayIP})
			saved := map[string]string{}
			expand := func(s string) string {
				for k, v := range saved {
					s = strings.ReplaceAll(s, "{"+k+"}", v)
				}
				return s
			}
			for _, s := range steps {
				status, body := c.call(s.method, expand(s.path), expand(s.body))
				if status != s.want.of(p) {
					t.Errorf("%s: %s %s: status %d, want %d; body %s", s.name, s.method, expand(s.path), status, s.want.of(p), body)
					continue
				}
				if s.save != "" && status == http.StatusOK {
					var obj struct{ ID string }
					if err := json.Unmarshal(body, &obj); err != nil || obj.ID == "" {
						t.Fatalf("%s: no id in %s", s.name, body)
					}
					saved[s.save] = obj.ID
				}
				if s.save != "" && status != http.StatusOK {
					saved[s.save] = "absent-" + s.save
				}
			}
		})
	}
}

func TestNewRejectsUnknownProfile(t *testing.T) {
	if _, err := New(Options{Profile: "nimble"}); err == nil {
		t.Error("unknown profile accepted")
	}
	f, err := New(Options{})
	if err != nil || f.opts.Profile != ProfileSpec {
		t.Errorf("default profile: %v %v", f, err)
	}
}
