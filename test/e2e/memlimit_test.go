package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// memoryCgroup is a cgroup with a memory limit that the test created, and the file a
// process's PID is written to to move it in.
type memoryCgroup struct {
	dir, procs, version string
}

// newMemoryCgroup creates a cgroup limited to limit bytes at the root of the memory hierarchy
// (cgroup v2 when its memory controller is there, else cgroup v1's memory controller) and
// removes it when the test ends, after the processes the test started in it are gone (so call
// it before starting them). It skips the test, saying why, when not root or when neither
// hierarchy can be used.
func newMemoryCgroup(t *testing.T, limit int64) memoryCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: creating a cgroup needs root; run as root to test GOMEMLIMIT from the cgroup limit")
	}
	v1, v2 := cgroupMounts(t)
	name := fmt.Sprintf("csigw-memlimit-%d", os.Getpid())
	var cg memoryCgroup
	var limitFile string
	switch {
	case v2 != "" && enableMemoryController(v2):
		cg = memoryCgroup{dir: filepath.Join(v2, name), version: "v2"}
		limitFile = "memory.max"
	case v1 != "":
		cg = memoryCgroup{dir: filepath.Join(v1, name), version: "v1"}
		limitFile = "memory.limit_in_bytes"
	default:
		t.Skipf("SKIPPED: no usable memory cgroup: no cgroup v2 hierarchy with the memory controller (mounted: %q) and no cgroup v1 memory controller", v2)
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("SKIPPED: cannot create a cgroup %s (%s): %v", cg.dir, cg.version, err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg.dir); err != nil {
			t.Errorf("removing the test's cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(cg.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("setting the cgroup's limit: %v", err)
	}
	cg.procs = filepath.Join(cg.dir, "cgroup.procs")
	return cg
}

// cgroupMounts returns where /proc/self/mountinfo says the cgroup v1 memory controller and the
// cgroup v2 hierarchy are mounted ("" for none).
func cgroupMounts(t *testing.T) (v1Memory, v2 string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("SKIPPED: no /proc/self/mountinfo: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 || fields[3] != "/" {
			continue
		}
		switch {
		case tail[0] == "cgroup2" && v2 == "":
			v2 = fields[4]
		case tail[0] == "cgroup" && v1Memory == "" && strings.Contains(","+tail[2]+",", ",memory,"):
			v1Memory = fields[4]
		}
	}
	return v1Memory, v2
}

// enableMemoryController reports whether the v2 hierarchy at root offers the memory
// controller to its children, enabling it if need be.
func enableMemoryController(root string) bool {
	controllers, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil || !strings.Contains(" "+strings.TrimSpace(string(controllers))+" ", " memory ") {
		return false
	}
	subtree := filepath.Join(root, "cgroup.subtree_control")
	if b, err := os.ReadFile(subtree); err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " memory ") {
		return true
	}
	return os.WriteFile(subtree, []byte("+memory"), 0o644) == nil
}

// TestMemoryLimitFollowsTheCgroup: with no GOMEMLIMIT set, a gateway started in a cgroup
// limited to 256 MiB sets its Go memory limit to 90% of it: its `memory limit` start-up line
// says so, and the runtime's own figure, csigw_go_gc_gomemlimit_bytes on /metrics, agrees.
func TestMemoryLimitFollowsTheCgroup(t *testing.T) {
	const limit = 256 << 20
	want := int64(limit * 9 / 10)
	cg := newMemoryCgroup(t, limit)

	dir := t.TempDir()
	sock := filepath.Join(dir, "gw.sock")
	admin := testutil.FreeAddr(t)
	config := writeFile(t, filepath.Join(dir, "gateway.yaml"), fmt.Sprintf(
		"listeners:\n  - endpoint: unix://%s\nadmin: {listen: %q}\nbackends:\n  local: {type: embedded, dataDir: %q}\nroutes:\n  - {methods: [\"*\"], backend: local}\n",
		sock, admin, filepath.Join(dir, "data")))
	// The shell moves itself into the cgroup, then becomes the gateway: the gateway reads its
	// cgroup only once it is in it. GOMEMLIMIT must not be inherited from the test's environment.
	p := testutil.StartCommand(t, "/usr/bin/env", "-u", "GOMEMLIMIT", "/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`,
		cg.procs, testutil.Binary(t), "serve", "--config", config)
	waitOutput(t, p, `"msg":"memory limit"`, 30*time.Second)

	var line struct {
		Limit  int64  `json:"gomemlimit"`
		From   string `json:"gomemlimit_from"`
		Cgroup int64  `json:"cgroup_limit"`
	}
	for _, l := range strings.Split(p.Output(), "\n") {
		if strings.Contains(l, `"msg":"memory limit"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("the memory limit line does not parse: %v\n%s", err, l)
			}
		}
	}
	if line.Limit != want || line.From != "cgroup" || line.Cgroup != limit {
		t.Errorf("in a %s cgroup limited to %d bytes the gateway logged %+v, want gomemlimit %d from the cgroup\n%s", cg.version, limit, line, want, p.Output())
	}

	waitHTTP(t, p, "http://"+admin+"/readyz", 200, "", 30*time.Second)
	fams := scrapeMetrics(t, "http://"+admin+"/metrics")
	if got := metricSeries(fams, "csigw_go_gc_gomemlimit_bytes", map[string]string{}).GetGauge().GetValue(); got != float64(want) {
		t.Errorf("csigw_go_gc_gomemlimit_bytes = %v, want %d (90%% of the %s cgroup's %d)", got, want, cg.version, limit)
	}
}
