package orchestrators

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	canaryNomad   = "CANARY-nomad-volume-secret-4b2d"
	nomadVolumeID = "csi-gateway-demo" // deploy/nomad/volume.hcl's id
	nomadMessage  = "written by a nomad task through csi-gateway"
)

// nomad is a Nomad dev agent (server and client in one) on loopback, with raw_exec enabled
// for the plugin and exec for the consumer.
type nomad struct {
	e     *env
	bin   string
	addr  string // http://127.0.0.1:PORT
	data  string
	agent *proc
}

func (e *env) startNomad() *nomad {
	e.t.Helper()
	n := &nomad{e: e, bin: e.component("nomad"), data: filepath.Join(e.work, "nomad")}
	httpPort, rpcPort, serfPort := e.freePort(), e.freePort(), e.freePort()
	n.addr = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	cfg := e.write("nomad.hcl", fmt.Sprintf(`data_dir  = "%s"
bind_addr = "127.0.0.1"
ports {
  http = %d
  rpc  = %d
  serf = %d
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
plugin "raw_exec" {
  config { enabled = true }
}
`, n.data, httpPort, rpcPort, serfPort))
	// Registered before the agent's own clean-up, so it runs after the agent is stopped.
	e.t.Cleanup(removeNomadCgroups(e))
	n.agent = e.start("nomad", nil, n.bin, "agent", "-dev", "-config", cfg, "-network-interface", "lo")
	e.eventually(90*time.Second, "the Nomad node to be ready with raw_exec and exec", func() (bool, string) {
		if done, err := n.agent.exited(); done {
			e.t.Fatalf("nomad exited: %v\n%s", err, n.agent.tail(30))
		}
		var nodes []struct {
			ID, Status string
			Drivers    map[string]struct{ Healthy bool }
		}
		if err := n.api("/v1/nodes?resources=false", &nodes); err != nil || len(nodes) == 0 {
			return false, fmt.Sprint(err)
		}
		var node struct {
			Drivers map[string]struct{ Healthy bool }
		}
		n.api("/v1/node/"+nodes[0].ID, &node)
		ok := nodes[0].Status == "ready" && node.Drivers["raw_exec"].Healthy && node.Drivers["exec"].Healthy
		return ok, fmt.Sprintf("status %s, drivers %v", nodes[0].Status, node.Drivers)
	})
	return n
}

// api GETs a path of Nomad's HTTP API into out.
func (n *nomad) api(path string, out any) error {
	resp, err := http.Get(n.addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 404 {
		return os.ErrNotExist
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// cli runs the nomad command against the agent.
func (n *nomad) cli(args ...string) string {
	n.e.t.Helper()
	cmd := exec.Command(n.bin, args...)
	cmd.Dir = n.e.work
	cmd.Env = append(os.Environ(), "NOMAD_ADDR="+n.addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.e.t.Fatalf("nomad %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// testNomadLifecycle runs deploy/nomad's files: the plugin job (the gateway as a monolith CSI
// plugin with raw_exec, in front of the appliance through the witness), volume.hcl with a
// secret added, the example consumer (exec driver) that writes a file into the volume, its
// stop, and the volume's deletion, checking the appliance at every step.
func (n *nomad) testNomadLifecycle(s *stack) {
	e := n.e
	e.t.Helper()
	deploy := filepath.Join(e.repo, "deploy", "nomad")
	base := filepath.Join(n.data, "client", "csi", "monolith", "csi-gateway")
	mark := s.witness.mark()
	seen := func(method, canary string) (int, int) { return s.witness.seenSince(mark, method, canary) }

	// Every job validates against the real agent: the plugin job in each of its shapes (the
	// docker ones cannot run here) and the consumer.
	appliance := []string{"-var", "driver=docker", "-var", "appliance_url=https://appliance.example.com:8443"}
	for _, vars := range [][]string{
		append([]string{"-var", "plugin_type=controller"}, appliance...),
		append([]string{"-var", "plugin_type=node"}, appliance...),
		append([]string{"-var", "plugin_type=monolith"}, appliance...),
		{"-var", "driver=raw_exec"},
	} {
		n.cli(append(append([]string{"job", "validate"}, vars...), filepath.Join(deploy, "plugin.nomad.hcl"))...)
	}
	n.cli("job", "validate", filepath.Join(deploy, "example-consumer.nomad.hcl"))
	e.t.Logf("nomad: plugin.nomad.hcl (controller, node and monolith; docker and raw_exec) and example-consumer.nomad.hcl validate")

	start := time.Now()
	n.cli("job", "run", "-detach",
		"-var", "driver=raw_exec",
		"-var", "binary="+e.gateway,
		"-var", "backend_target=unix://"+filepath.Join(e.work, "witness.sock"),
		"-var", "stage_publish_base_dir="+base,
		"-var", "log_level=debug",
		filepath.Join(deploy, "plugin.nomad.hcl"))
	e.eventually(2*time.Minute, "plugin csi-gateway to be healthy (controller and node)", func() (bool, string) {
		var p struct{ ControllersHealthy, NodesHealthy int }
		err := n.api("/v1/plugin/csi/csi-gateway", &p)
		return err == nil && p.ControllersHealthy >= 1 && p.NodesHealthy >= 1, fmt.Sprintf("%+v %v", p, err)
	})
	e.t.Logf("nomad: plugin csi-gateway healthy (controller and node) in %s", time.Since(start).Round(time.Millisecond))

	// The job's admin service: Nomad's own HTTP check of /readyz on the port it gave the
	// gateway's admin listener passes.
	start = time.Now()
	e.eventually(time.Minute, "the plugin's admin service check (GET /readyz) to pass", func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		if err := n.api("/v1/job/csi-gateway-monolith/allocations", &allocs); err != nil || len(allocs) == 0 {
			return false, fmt.Sprint(allocs, err)
		}
		var checks map[string]struct{ Check, Status, Output string }
		if err := n.api("/v1/client/allocation/"+allocs[0].ID+"/checks", &checks); err != nil {
			return false, err.Error()
		}
		for _, c := range checks {
			if c.Check == "readyz" && c.Status == "success" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", checks)
	})
	e.t.Logf("nomad: the plugin's admin service check (GET /readyz) passes in %s", time.Since(start).Round(time.Millisecond))

	// nomad volume create: deploy/nomad/volume.hcl with a secrets block added.
	spec, err := os.ReadFile(filepath.Join(deploy, "volume.hcl"))
	if err != nil {
		e.t.Fatal(err)
	}
	volFile := e.write("nomad-volume.hcl", string(spec)+fmt.Sprintf("\nsecrets {\n  password = %q\n}\n", canaryNomad))
	start = time.Now()
	n.cli("volume", "create", volFile)
	vols := s.volumes()
	v, ok := vols[nomadVolumeID]
	if !ok {
		e.t.Fatalf("nomad volume create: the appliance has no volume %s (it has %v)", nomadVolumeID, keys(vols))
	}
	if v.CapacityBytes < 1<<30 || v.CapacityBytes > 2<<30 {
		e.t.Errorf("appliance volume %s: %d bytes, want 1–2 GiB", nomadVolumeID, v.CapacityBytes)
	}
	e.t.Logf("nomad: volume create → CreateVolume → appliance volume %s (%d bytes) in %s", v.ID, v.CapacityBytes, time.Since(start).Round(time.Millisecond))

	// The consumer: ControllerPublish, NodeStage, NodePublish, then the task writes a file.
	start = time.Now()
	n.cli("job", "run", "-detach", "-var", "message="+nomadMessage, filepath.Join(deploy, "example-consumer.nomad.hcl"))
	var written string
	e.eventually(3*time.Minute, "the consumer's file in the published volume", func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		n.api("/v1/job/csi-gateway-consumer/allocations", &allocs)
		// The target path Nomad gives: per-alloc/<alloc>/<volume>/<access mode>.
		matches, _ := filepath.Glob(filepath.Join(base, "per-alloc", "*", "*", "*", "hello.txt"))
		for _, m := range matches {
			if b, err := os.ReadFile(m); err == nil && strings.TrimSpace(string(b)) == nomadMessage {
				written = m
				return true, ""
			}
		}
		return false, fmt.Sprintf("allocations %+v", allocs)
	})
	v = s.volumes()[nomadVolumeID]
	loops := s.loopDevices(v.ID)
	mounts := mountsOf(loops)
	switch {
	case len(v.Publications) != 1 || v.Publications[applianceNodeID] == nil:
		e.t.Errorf("while the job runs, the appliance has the volume published to %v, want [%s]", keys(v.Publications), applianceNodeID)
	case len(loops) != 1:
		e.t.Errorf("while the job runs, the volume's image is on loop devices %v, want one", loops)
	case len(mounts) < 2:
		e.t.Errorf("while the job runs, the volume's device is mounted at %v, want the staging path and the target", mounts)
	}
	for _, c := range []string{"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"} {
		if calls, _ := seen(c, ""); calls == 0 {
			e.t.Errorf("nomad: no %s reached the appliance", c)
		}
	}
	e.t.Logf("nomad: job running, file written at %s (appliance: published to %s, %s mounted at %d paths) in %s",
		strings.TrimPrefix(written, base+"/"), applianceNodeID, strings.Join(loops, ","), len(mounts), time.Since(start).Round(time.Millisecond))

	// Stopping the job: NodeUnpublish, NodeUnstage, ControllerUnpublish.
	start = time.Now()
	n.cli("job", "stop", "-purge", "-detach", "csi-gateway-consumer")
	e.eventually(3*time.Minute, "the volume to be released", func() (bool, string) {
		v := s.volumes()[nomadVolumeID]
		loops := s.loopDevices(v.ID)
		var vol struct{ WriteAllocs, ReadAllocs map[string]any }
		n.api("/v1/volume/csi/"+nomadVolumeID, &vol)
		return len(v.Publications) == 0 && len(loops) == 0 && len(vol.WriteAllocs) == 0,
			fmt.Sprintf("publications %v, loop devices %v, nomad write claims %d", keys(v.Publications), loops, len(vol.WriteAllocs))
	})
	for _, c := range []string{"NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume"} {
		if calls, _ := seen(c, ""); calls == 0 {
			e.t.Errorf("nomad: no %s reached the appliance", c)
		}
	}
	// The file is in the appliance's image: read it from the ext4 image itself, unmounted.
	out, err := exec.Command("debugfs", "-R", "cat /hello.txt", s.image(v.ID)).Output()
	if err != nil || strings.TrimSpace(string(out)) != nomadMessage {
		e.t.Errorf("debugfs cat /hello.txt in the appliance's image: %q, %v; want %q", out, err, nomadMessage)
	} else {
		e.t.Logf("nomad: job stopped → unpublished, unstaged, detached in %s; the file is in the appliance's image (debugfs)", time.Since(start).Round(time.Millisecond))
	}

	start = time.Now()
	n.cli("volume", "delete", nomadVolumeID)
	if _, ok := s.volumes()[nomadVolumeID]; ok {
		e.t.Errorf("after nomad volume delete, the appliance still has volume %s", nomadVolumeID)
	}
	if _, err := os.Stat(s.image(v.ID)); !os.IsNotExist(err) {
		e.t.Errorf("after nomad volume delete, the image is still there (%v)", err)
	}
	e.t.Logf("nomad: volume delete → DeleteVolume (appliance: no volume, no image) in %s", time.Since(start).Round(time.Millisecond))

	// Nomad passes a volume's secrets on CreateVolume, DeleteVolume, ControllerPublishVolume,
	// NodeStageVolume and NodePublishVolume.
	for _, c := range []string{"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume", "DeleteVolume"} {
		calls, with := seen(c, canaryNomad)
		e.t.Logf("nomad: %s reached the appliance %d time(s), %d with the volume's secret", c, calls, with)
		if with == 0 {
			e.t.Errorf("nomad: the volume's secret did not reach the appliance with %s", c)
		}
	}
	e.t.Logf("nomad: calls that reached the appliance: %s", strings.Join(s.witness.methods(mark), " "))

	// The plugin's own log (the gateway at debug) joins the others for the canary check
	// before its allocation is collected.
	for _, dir := range n.allocLogs() {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
				continue // logmon's FIFOs are here too: reading one blocks
			}
			if b, err := os.ReadFile(f); err == nil {
				os.WriteFile(filepath.Join(e.logs, "nomad-task-"+filepath.Base(filepath.Dir(filepath.Dir(dir)))[:8]+"-"+filepath.Base(f)), b, 0o644)
			}
		}
	}
	n.cli("job", "stop", "-purge", "-detach", "csi-gateway-monolith")
}

// allocLogs is where Nomad keeps its tasks' stdout and stderr.
func (n *nomad) allocLogs() []string {
	dirs, _ := filepath.Glob(filepath.Join(n.data, "alloc", "*", "alloc", "logs"))
	return dirs
}

// nomadCgroups lists the cgroups a Nomad client makes for its allocations' tasks (cgroup v1:
// /sys/fs/cgroup/<controller>/nomad/<alloc>.<task>; v2: /sys/fs/cgroup/nomad.slice/…), and
// the parents it makes them in.
func nomadCgroups() []string {
	var out []string
	for _, glob := range []string{"/sys/fs/cgroup/*/nomad", "/sys/fs/cgroup/*/nomad/*", "/sys/fs/cgroup/nomad.slice", "/sys/fs/cgroup/nomad.slice/*"} {
		m, _ := filepath.Glob(glob)
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out = append(out, d)
			}
		}
	}
	return out
}

// removeNomadCgroups notes the Nomad cgroups there are now and returns the clean-up that
// removes those made since: the agent leaves its allocations' cgroups behind when it stops.
func removeNomadCgroups(e *env) func() {
	before := map[string]bool{}
	for _, d := range nomadCgroups() {
		before[d] = true
	}
	return func() {
		made := nomadCgroups()
		for i := len(made) - 1; i >= 0; i-- { // children before their parent
			if !before[made[i]] {
				removeCgroupTree(e, made[i])
			}
		}
	}
}
