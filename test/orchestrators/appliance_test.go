package orchestrators

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The driver name of the whole run: the appliance reports it, the gateway passes it through,
// and it is the name deploy/ gives the CSIDriver.
const driverName = "appliance.csi-gateway.io"

// The node ID the appliance reports in NodeGetInfo, and so the one the COs publish to.
const applianceNodeID = "node-1"

// stack is the reference appliance, the witness in front of it, and the gateway under test
// in front of both, each on its own Unix socket in the work directory:
//
//	CO ─► gateway (csi.sock) ─► witness (witness.sock) ─► appliance (appliance.sock)
type stack struct {
	e         *env
	dataDir   string
	appliance *proc
	witness   *witness
	gateway   *proc
	socket    string // the gateway's CSI socket
	admin     string // the gateway's admin listener, host:port
}

func (e *env) startStack() *stack {
	e.t.Helper()
	s := &stack{e: e, dataDir: filepath.Join(e.work, "appliance"), socket: filepath.Join(e.work, "csi.sock")}
	applianceSock := filepath.Join(e.work, "appliance.sock")
	s.appliance = e.start("appliance", nil, e.gateway, "appliance", "--data", s.dataDir,
		"--endpoint", "unix://"+applianceSock, "--driver-name", driverName, "--node-id", applianceNodeID)
	e.eventually(30*time.Second, "the appliance's socket", func() (bool, string) {
		_, err := os.Stat(applianceSock)
		return err == nil, s.appliance.tail(3)
	})
	w, err := startWitness(filepath.Join(e.work, "witness.sock"), "unix://"+applianceSock)
	if err != nil {
		e.t.Fatal(err)
	}
	s.witness = w
	e.t.Cleanup(w.stop)

	// debug: every call's request and response is logged (redacted), so the canary check
	// covers the payload logs too.
	s.admin = fmt.Sprintf("127.0.0.1:%d", e.freePort())
	cfg := e.write("gateway.yaml", fmt.Sprintf(`listeners:
  - endpoint: unix://%s
    socketMode: "0660"
backends:
  appliance:
    type: grpc
    target: unix://%s
routes:
  - {methods: ["*"], backend: appliance}
admin: {listen: "%s", driverName: %s}
logging: {level: debug, format: json}
`, s.socket, filepath.Join(e.work, "witness.sock"), s.admin, driverName))
	s.gateway = e.startGateway("gateway", cfg, s.admin)
	return s
}

// startGateway starts the gateway binary as name with the configuration file cfg and waits
// until its admin listener (admin, host:port) says it is ready.
func (e *env) startGateway(name, cfg, admin string) *proc {
	e.t.Helper()
	gw := e.start(name, nil, e.gateway, "serve", "--config", cfg)
	e.eventually(30*time.Second, "the "+name+"'s /readyz", func() (bool, string) {
		if done, err := gw.exited(); done {
			e.t.Fatalf("the %s exited: %v\n%s", name, err, gw.tail(20))
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return gw
}

// applianceVolume is a volume as the appliance's state file records it.
type applianceVolume struct {
	ID            string                     `json:"id"`
	Name          string                     `json:"name"`
	CapacityBytes int64                      `json:"capacityBytes"`
	Parameters    map[string]string          `json:"parameters"`
	Publications  map[string]json.RawMessage `json:"publications"`
}

// volumes reads the appliance's state file (written atomically, so always whole) and
// returns its volumes by name.
func (s *stack) volumes() map[string]applianceVolume {
	s.e.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dataDir, "state.json"))
	if os.IsNotExist(err) {
		return map[string]applianceVolume{}
	}
	if err != nil {
		s.e.t.Fatal(err)
	}
	var st struct {
		Volumes map[string]applianceVolume `json:"volumes"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		s.e.t.Fatalf("state.json: %v", err)
	}
	out := map[string]applianceVolume{}
	for _, v := range st.Volumes {
		out[v.Name] = v
	}
	return out
}

// image is the path of a volume's image file.
func (s *stack) image(id string) string { return filepath.Join(s.dataDir, "volumes", id+".img") }

// loopDevices lists the loop devices attached to a volume's image.
func (s *stack) loopDevices(id string) []string {
	out, _ := exec.Command("losetup", "--noheadings", "--output", "NAME", "-j", s.image(id)).Output()
	return strings.Fields(string(out))
}

// mountsOf lists the mount points whose source is one of devs.
func mountsOf(devs []string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 2 {
			continue
		}
		for _, d := range devs {
			if qf[1] == d {
				out = append(out, unescapeMount(pf[4]))
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
