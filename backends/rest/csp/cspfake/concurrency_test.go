package cspfake

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

func TestConcurrentCreates(t *testing.T) {
	c := start(t, Options{Validate: true})
	c.host("node-a")
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 8*n)
	// send is c.call without t.Fatal, which must not run outside the test goroutine.
	send := func(method, path, body string) (int, []byte) {
		resp, b, err := c.do(context.Background(), method, path, body)
		if err != nil {
			errs <- err
			return 0, nil
		}
		return resp.StatusCode, b
	}
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("pvc-%02d", i)
			status, body := send("POST", "/volumes", `{"name":"`+name+`","size":1048576,"config":{}}`)
			if status != 200 {
				errs <- fmt.Errorf("create %s: %d %s", name, status, body)
				return
			}
			// The same name from a second goroutine must never make a second volume.
			if status, _ := send("POST", "/volumes", `{"name":"`+name+`","size":1048576,"config":{}}`); status != 409 {
				errs <- fmt.Errorf("duplicate %s: %d", name, status)
			}
			var list []volumeJSON
			status, body = send("GET", "/volumes?name="+name, "")
			if status != 200 || json.Unmarshal(body, &list) != nil || len(list) != 1 {
				errs <- fmt.Errorf("lookup %s: %d %s", name, status, body)
				return
			}
			if status, body := send("PUT", "/volumes/"+list[0].ID+"/actions/publish", `{"host_uuid":"node-a","access_protocol":"iscsi"}`); status != 200 {
				errs <- fmt.Errorf("publish %s: %d %s", name, status, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := c.fake.Counters()
	if got.Volumes != n || got.Publishes != n {
		t.Errorf("counters %+v, want %d volumes and publishes", got, n)
	}
	luns := map[int64]bool{}
	for _, call := range c.fake.Calls() {
		if call.Status == 200 && call.Method == "PUT" {
			var info publishJSON
			if err := json.Unmarshal([]byte(call.Response), &info); err != nil {
				t.Fatal(err)
			}
			luns[info.LunID] = true
		}
	}
	if len(luns) != n {
		t.Errorf("%d distinct LUNs on one host, want %d", len(luns), n)
	}
	if v := c.fake.ContractViolations(); len(v) != 0 {
		t.Errorf("violations %q", v)
	}
}
