package cspfake

import (
	"strings"
	"testing"
)

// lifecycle drives every operation the profile has, the way a well-behaved client does.
func lifecycle(t *testing.T, c *client, p Profile) {
	t.Helper()
	c.expect(200, "POST", "/hosts", `{"uuid":"node-a","name":"a","iqns":["iqn.a"],"networks":["10.0.0.0/24"],"chap_user":"u","chap_password":"chap-secret-1"}`, nil)
	c.expect(200, "GET", "/hosts", "", nil)
	c.expect(404, "GET", "/volumes?name=pvc-1", "", nil)
	vol := c.id("POST", "/volumes", `{"name":"pvc-1","size":"1073741824","description":"d","config":{"any_key":"v"}}`)
	c.expect(200, "GET", "/volumes?name=pvc-1", "", nil)
	c.expect(200, "GET", "/volumes/"+vol, "", nil)
	c.expect(200, "PUT", "/volumes/"+vol, `{"size":2147483648}`, nil)
	c.expect(200, "PUT", "/volumes/"+vol+"/actions/publish", `{"host_uuid":"node-a","access_protocol":"iscsi"}`, nil)
	snap := c.id("POST", "/snapshots", `{"name":"snap-1","volume_id":"`+vol+`","description":"s","config":{}}`)
	c.expect(200, "GET", "/snapshots?volume_id="+vol+"&name=snap-1", "", nil)
	c.expect(200, "GET", "/snapshots?volume_id="+vol+"&mode=exists", "", nil)
	c.expect(200, "GET", "/snapshots/"+snap, "", nil)
	clone := c.id("POST", "/volumes", `{"name":"pvc-2","size":2147483648,"base_snapshot_id":"`+snap+`","clone":true,"config":{}}`)
	if p != ProfileTrueNAS {
		c.expect(200, "GET", "/volumes", "", nil)
		c.expect(200, "GET", "/snapshots", "", nil)
		vg := c.id("POST", "/volume_groups", `{"name":"vg-1","description":"d","config":{"protection_template":"t","other":1}}`)
		c.expect(200, "GET", "/volume_groups?name=vg-1", "", nil)
		c.expect(200, "PUT", "/volumes/"+clone, `{"volume_group_id":"`+vg+`"}`, nil)
		sg := c.id("POST", "/snapshot_groups", `{"name":"sg-1","volume_group_id":"`+vg+`","config":{"replicate":false}}`)
		c.expect(200, "GET", "/snapshot_groups?volume_group_id="+vg, "", nil)
		c.expect(200, "GET", "/snapshot_groups/"+sg, "", nil)
		c.expect(204, "DELETE", "/snapshot_groups/"+sg, "", nil)
		c.expect(200, "PUT", "/volumes/"+clone, `{"volume_group_id":""}`, nil)
		c.expect(200, "GET", "/volume_groups/"+vg, "", nil)
		c.expect(200, "GET", "/volume_groups", "", nil)
		c.expect(204, "DELETE", "/volume_groups/"+vg, "", nil)
		c.expect(200, "GET", "/replication_partners", "", nil)
	}
	c.expect(204, "DELETE", "/volumes/"+clone, "", nil)
	c.expect(204, "DELETE", "/snapshots/"+snap, "", nil)
	c.expect(204, "PUT", "/volumes/"+vol+"/actions/unpublish", `{"host_uuid":"node-a"}`, nil)
	c.expect(204, "DELETE", "/volumes/"+vol, "", nil)
	c.expect(204, "DELETE", "/hosts?uuid=node-a", "", nil)
}

func TestContractLifecycleHasNoViolations(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			c := start(t, Options{Profile: p, Validate: true, ArrayIP: testArrayIP})
			lifecycle(t, c, p)
			if v := c.fake.ContractViolations(); len(v) != 0 {
				t.Errorf("violations:\n%s", strings.Join(v, "\n"))
			}
		})
	}
}

func TestContractReportsViolations(t *testing.T) {
	cases := []struct {
		name           string
		fault          *Fault
		method, path   string
		body           string
		wantViolations []string // substrings, one violation each
	}{
		{
			name:   "object where the schema says array",
			fault:  &Fault{Method: "GET", Path: "/volumes", Status: 200, Body: `{"id":"x"}`},
			method: "GET", path: "/volumes",
			wantViolations: []string{"GET /volumes (getVolumes) response:"},
		},
		{
			name:   "wrong type in an answer",
			fault:  &Fault{Method: "GET", Path: "/volumes", Status: 200, Body: `[{"id":"x","size":"big"}]`},
			method: "GET", path: "/volumes",
			wantViolations: []string{"response: /*/size:"},
		},
		{
			name:   "misspelt field in an answer",
			fault:  &Fault{Method: "GET", Path: "/volumes", Status: 200, Body: `[{"id":"x","sise":1}]`},
			method: "GET", path: "/volumes",
			wantViolations: []string{`/*/sise: property "sise" is not declared`},
		},
		{
			name:   "empty 200 body",
			fault:  &Fault{Method: "GET", Path: "/volumes", Status: 200, EmptyBody: true},
			method: "GET", path: "/volumes",
			wantViolations: []string{"GET /volumes (getVolumes) response:"},
		},
		{
			name:   "undeclared success status",
			fault:  &Fault{Method: "DELETE", Path: "/volumes/*", Status: 200, Body: `{}`},
			method: "DELETE", path: "/volumes/x",
			wantViolations: []string{"success status 200 is not declared"},
		},
		{
			name:   "read-only id in a request",
			method: "POST", path: "/volumes", body: `{"id":"x","name":"pvc-9","size":1}`,
			wantViolations: []string{`request: /id: readOnly property "id" in request`},
		},
		{
			name:   "misspelt field in a request",
			method: "POST", path: "/hosts", body: `{"uuid":"n","hostIqns":["x"]}`,
			wantViolations: []string{`request: /hostIqns: property "hostIqns" is not declared`},
		},
		{
			name:   "non-numeric size string",
			method: "POST", path: "/volumes", body: `{"name":"pvc-8","size":"1Gi"}`,
			wantViolations: []string{"request: /size:"},
		},
		{
			name:   "enum",
			method: "PUT", path: "/volumes/x/actions/publish", body: `{"host_uuid":"n","access_protocol":"nvmetcp"}`,
			wantViolations: []string{"request: /access_protocol:"},
		},
		{
			name:   "no such path",
			method: "GET", path: "/pools",
			wantViolations: []string{"GET /pools: request: no such path in openapi.yaml"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, Options{Validate: true})
			if tc.fault != nil {
				c.fake.Inject(*tc.fault)
			}
			c.call(tc.method, tc.path, tc.body)
			got := c.fake.ContractViolations()
			if len(got) != len(tc.wantViolations) {
				t.Fatalf("violations:\n%s\nwant %d", strings.Join(got, "\n"), len(tc.wantViolations))
			}
			for i, w := range tc.wantViolations {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %q does not contain %q", got[i], w)
				}
			}
		})
	}
}

func TestContractMissingTokenIsReported(t *testing.T) {
	c := start(t, Options{Validate: true})
	c.token = ""
	c.expect(401, "GET", "/hosts", "", nil)
	got := c.fake.ContractViolations()
	if len(got) != 1 || !strings.Contains(got[0], "missing x-auth-token header") {
		t.Errorf("violations %q", got)
	}
}

// TestDeviationsNameRealOperations keeps the deviation list in step with openapi.yaml.
func TestDeviationsNameRealOperations(t *testing.T) {
	ct, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, item := range ct.doc.Paths.Map() {
		for _, op := range item.Operations() {
			ops[op.OperationID] = true
		}
	}
	for _, rt := range routes {
		if !ops[rt.op] || ct.doc.Paths.Value(rt.path).GetOperation(rt.method) == nil {
			t.Errorf("route %s %s (%s) is not in openapi.yaml", rt.method, rt.path, rt.op)
		}
	}
	if len(routes) != len(ops) {
		t.Errorf("%d routes for %d operations", len(routes), len(ops))
	}
	for _, d := range deviations {
		if d.why == "" || (d.direction != "request" && d.direction != "response") {
			t.Errorf("deviation %+v", d)
		}
		for _, op := range d.ops {
			if !ops[op] {
				t.Errorf("deviation names unknown operation %q", op)
			}
		}
	}
}
