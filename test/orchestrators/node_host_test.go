package orchestrators

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's addresses. Every non-loopback address of the run lives in the network namespace
// the test creates (nodeNetns): the node IP on a bridge with no port, the pod network on the CNI
// bridge, the Service IP of the apiserver (a DNAT to the node IP). Nothing is sent to any
// other address: the namespace has no link to the host. (Recipe: /work/shared/E2E-RECIPES.md
// "Path 3" and its e2e-up.sh, with its NETWORK RULE.)
const (
	nodeIP        = "10.200.0.1"
	nodeName      = "csigw-node"
	podSubnet     = "10.88.7.0/24"
	cniBridge     = "csigwcni0"
	serviceIP     = "10.0.0.1" // the first address of --service-cluster-ip-range: "kubernetes"
	serviceSubnet = "10.0.0.0/24"
)

// The host paths a kubelet node uses and that the node's mount namespace covers with a
// tmpfs of its own, so nothing the node writes there reaches the host's disk or outlives the
// run: kubelet's root (the manifests name /var/lib/kubelet), CNI's cache, pod logs,
// containerd's shim sockets and runc state, and the CNI network namespaces' mount points.
var nodePrivateDirs = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log", "/run/containerd", "/run/netns"}

// The cgroups kubelet and containerd make in every hierarchy (cgroupfs driver, cgroup v1);
// none may exist before the run, and none after.
var nodeCgroupNames = []string{"kubepods", "kubepods.slice", "k8s.io"}

// node is one kubelet node: a network namespace, a mount namespace held open by a process
// (holder) that every node process joins, containerd with runc and the CNI bridge, kubelet.
type node struct {
	e          *env
	netns      string
	dir        string // containerd's root, state and socket: a tmpfs inside the mount namespace
	holder     *proc
	containerd *proc
	kubelet    *proc
	madeDirs   []string // host directories created as mount points, removed at the end
	down       bool
}

// nodePreflight names what the node needs that the machine lacks (make e2e-node installs it
// as root with apt-get).
func nodePreflight() error {
	var missing []string
	for _, c := range []string{"containerd", "runc", "ctr", "nsenter", "unshare", "iptables", "ip", "losetup", "mkfs.ext4"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback", "/bin/busybox"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: install containerd runc containernetworking-plugins busybox-static iptables (make e2e-node does, as root)", strings.Join(missing, ", "))
	}
	return nil
}

// startNode creates the namespaces and starts containerd; the control plane comes next
// (inside them), then startKubelet.
func (e *env) startNode() *node {
	e.t.Helper()
	reapAbandonedNodes(e)
	for _, c := range nodeLeftovers() {
		e.t.Fatalf("the machine already has %s: a previous node run was not cleaned up (or another kubelet runs here)", c)
	}
	n := &node{e: e, netns: fmt.Sprintf("csigw-node-%d", os.Getpid()), dir: filepath.Join(e.work, "node")}
	// Undone by the run's clean-up, also on SIGINT or SIGTERM.
	e.mu.Lock()
	e.undo = append(e.undo, n.stop)
	e.mu.Unlock()
	e.run("", nil, "ip", "netns", "add", n.netns)
	in := func(args ...string) { e.run("", nil, "ip", append([]string{"-n", n.netns}, args...)...) }
	in("link", "set", "lo", "up")
	in("link", "add", "node0", "type", "bridge")
	in("addr", "add", nodeIP+"/24", "dev", "node0")
	in("link", "set", "node0", "up")
	// A default route, for the programs that want one; it leads only to the node link, which has no port.
	in("route", "add", "default", "dev", "node0")

	for _, d := range append([]string{n.dir}, nodePrivateDirs...) {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				e.t.Fatal(err)
			}
			n.madeDirs = append(n.madeDirs, d)
		}
	}
	// The holder: in the network namespace, a new mount namespace (a slave of the host's, so
	// nothing mounted in it reaches the host) with a tmpfs on each private directory; it
	// sleeps until the end, and everything of the node enters its namespaces.
	var script strings.Builder
	for _, d := range append([]string{n.dir}, nodePrivateDirs...) {
		fmt.Fprintf(&script, "mount -t tmpfs -o mode=0755 csigw-node %s && ", d)
	}
	// Shared inside the node's namespace, as on a real node: pods' Bidirectional mounts of
	// kubelet's directories need it (and it propagates to nothing outside).
	script.WriteString("mount --make-rshared /var/lib/kubelet && ")
	script.WriteString("exec sleep infinity")
	n.holder = e.start("node-holder", nil, "nsenter", "--net=/run/netns/"+n.netns, "--",
		"unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script.String())
	e.eventually(30*time.Second, "the node's mount namespace", func() (bool, string) {
		if done, err := n.holder.exited(); done {
			e.t.Fatalf("the node's namespace holder exited: %v\n%s", err, n.holder.tail(10))
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n.holder.cmd.Process.Pid))
		return strings.HasPrefix(string(b), "sleep\x00"), strings.ReplaceAll(string(b), "\x00", " ")
	})
	e.inside = []string{"nsenter", "--target", strconv.Itoa(n.holder.cmd.Process.Pid), "--net", "--mount", "--"}

	n.startContainerd()
	return n
}

func (n *node) startContainerd() {
	e := n.e
	def := e.run("", nil, "containerd", "config", "default")
	cfg := strings.NewReplacer(
		`root = "/var/lib/containerd"`, fmt.Sprintf("root = %q", filepath.Join(n.dir, "root")),
		`state = "/run/containerd"`, fmt.Sprintf("state = %q", filepath.Join(n.dir, "state")),
		`address = "/run/containerd/containerd.sock"`, fmt.Sprintf("address = %q", n.socket()),
		`bin_dir = "/opt/cni/bin"`, `bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/etc/cni/net.d"`, fmt.Sprintf("conf_dir = %q", filepath.Join(n.dir, "cni")),
		// This VM refuses lowering a process's OOM score: without it every sandbox fails
		// with "can't get final child's PID from pipe: EOF".
		`restrict_oom_score_adj = false`, `restrict_oom_score_adj = true`,
	).Replace(def)
	cfg = replaceLine(cfg, "sandbox_image = ", fmt.Sprintf("sandbox_image = %q", pauseImage))
	for _, want := range []string{n.socket(), "/usr/lib/cni", pauseImage, "restrict_oom_score_adj = true"} {
		if !strings.Contains(cfg, want) {
			e.t.Fatalf("containerd config default: could not set %s; its defaults changed", want)
		}
	}
	conf := e.write("node-containerd.toml", cfg)
	// The CNI config is written inside the mount namespace (n.dir is its tmpfs).
	e.run("", []byte(fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "csigw-pods", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`, cniBridge, podSubnet, filepath.Join(n.dir, "ipam"))), "sh", "-c",
		fmt.Sprintf("mkdir -p %[1]s && cat >%[1]s/10-bridge.conflist", filepath.Join(n.dir, "cni")))
	n.containerd = e.start("containerd", nil, "containerd", "--config", conf)
	e.eventually(60*time.Second, "containerd", func() (bool, string) {
		if done, err := n.containerd.exited(); done {
			e.t.Fatalf("containerd exited: %v\n%s", err, n.containerd.tail(20))
		}
		out, err := n.ctr("version")
		return err == nil, out
	})
}

func (n *node) socket() string { return filepath.Join(n.dir, "containerd.sock") }

// ctr runs ctr in containerd's k8s.io namespace (the CRI's).
func (n *node) ctr(args ...string) (string, error) {
	return n.e.try("", nil, "ctr", append([]string{"--address", n.socket(), "-n", "k8s.io"}, args...)...)
}

// replaceLine replaces every line that starts (after its indentation) with prefix.
func replaceLine(s, prefix, with string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if t := strings.TrimLeft(l, " \t"); strings.HasPrefix(t, prefix) {
			lines[i] = l[:len(l)-len(t)] + with
		}
	}
	return strings.Join(lines, "\n")
}

// routeService makes the Service IP of the apiserver ("kubernetes", what pods' in-cluster
// configuration dials) reach the apiserver on the node IP: no kube-proxy runs.
func (n *node) routeService(k *kube) {
	_, port, _ := strings.Cut(strings.TrimPrefix(k.server, "https://"), ":")
	n.e.run("", nil, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", serviceIP+"/32", "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", nodeIP+":"+port)
}

// checkHostUntouched fails the test if the host's own network namespace has any of the
// node's addresses, its bridges or the Service IP's DNAT: they must exist only in the
// namespace the test made. It runs ip and iptables on the host, not through e.inside.
func (n *node) checkHostUntouched() {
	n.e.t.Helper()
	podPrefix, _, _ := strings.Cut(podSubnet, ".0/")
	for _, c := range []struct {
		cmd  []string
		node []string // what only the node's namespace may show
	}{
		{[]string{"ip", "-o", "addr", "show"}, []string{" " + nodeIP + "/", " " + podPrefix + "."}},
		{[]string{"ip", "-o", "link", "show"}, []string{" " + cniBridge + ":", " node0:"}},
		{[]string{"iptables", "-t", "nat", "-S"}, []string{serviceIP + "/32", nodeIP + ":"}},
	} {
		out, err := exec.Command(c.cmd[0], c.cmd[1:]...).CombinedOutput()
		if err != nil {
			n.e.t.Fatalf("%s on the host: %v\n%s", strings.Join(c.cmd, " "), err, out)
		}
		for _, own := range c.node {
			if strings.Contains(string(out), own) {
				n.e.t.Errorf("the host's %s shows %q: the node's network reached the host namespace", strings.Join(c.cmd, " "), own)
			}
		}
	}
}

// startKubelet starts kubelet v1.31 against the control plane and waits for a Ready node.
// The configuration is the recipe's: cgroupfs (cgroup v1 here), no QoS cgroups, no node
// allocatable enforcement, swap allowed, x509 client auth, AlwaysAllow.
func (n *node) startKubelet(k *kube) {
	e := n.e
	pki := filepath.Join(k.dir, "pki")
	cfg := e.write("kube/kubelet-config.yaml", fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: %s}}
authorization: {mode: AlwaysAllow}
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://%s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
maxPods: 30
serializeImagePulls: false
`, filepath.Join(pki, "ca.crt"), nodeIP, n.socket()))
	n.kubelet = e.start("kubelet", nil, "nice", "-n", "5", e.component("kubelet"),
		"--config="+cfg, "--kubeconfig="+k.kubeconfig, "--hostname-override="+nodeName, "--node-ip="+nodeIP, "--v=2")
	e.eventually(3*time.Minute, "node "+nodeName+" Ready", func() (bool, string) {
		if done, err := n.kubelet.exited(); done {
			e.t.Fatalf("kubelet exited: %v\n%s", err, n.kubelet.tail(30))
		}
		out, err := k.try(nil, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == "True", out + n.kubelet.tail(1)
	})
}

// stop deletes what runs on the node through kubelet where it still can (the test did, when
// it passed), then stops every process of the node, the namespaces, and what kubelet and
// containerd leave in the cgroup hierarchies.
func (n *node) stop() {
	if n.down {
		return
	}
	n.down = true
	e := n.e
	if n.containerd != nil {
		if n.kubelet != nil {
			n.kubelet.stop(20 * time.Second)
		}
		// Every container's task is killed before containerd and its shims stop, or the
		// container processes would outlive them.
		if out, err := n.ctr("tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				n.ctr("tasks", "kill", "-s", "SIGKILL", id)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			out, err := n.ctr("tasks", "ls", "-q")
			if err != nil || strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		n.containerd.stop(15 * time.Second)
	}
	n.killAll()
	e.inside = nil
	if n.holder != nil {
		n.holder.stop(5 * time.Second)
	}
	for _, pid := range pidsUnder(n.dir) { // the shims name the socket
		syscall.Kill(pid, syscall.SIGKILL)
	}
	removeNodeCgroups(e)
	if out, err := exec.Command("ip", "netns", "delete", n.netns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
		e.t.Logf("ip netns delete %s: %v: %s", n.netns, err, out)
	}
	for i := len(n.madeDirs) - 1; i >= 0; i-- {
		os.Remove(n.madeDirs[i]) // only if empty: the node's files were all on its tmpfs
	}
}

// killAll kills what is left in the node's cgroups or namespaces: the node's own.
func (n *node) killAll() {
	for i := 0; i < 3; i++ {
		pids := n.pids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// reapAbandonedNodes undoes the node of a run whose test process died without cleaning up
// (SIGKILL, or go test's -timeout, which skips clean-ups): its network namespace is named
// after that process. A namespace whose process lives is another run's, and left alone.
func reapAbandonedNodes(e *env) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "csigw-node-") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(f[0], "csigw-node-"))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		e.t.Logf("undoing the abandoned node %s", f[0])
		old := &node{e: e, netns: f[0]}
		old.killAll()
		removeNodeCgroups(e)
		if out, err := exec.Command("ip", "netns", "delete", f[0]).CombinedOutput(); err != nil {
			e.t.Logf("ip netns delete %s: %v: %s", f[0], err, out)
		}
	}
}

// pids lists the processes of the node: those in its cgroups, in its network namespace, in
// its holder's mount namespace, and containerd's shims.
func (n *node) pids() []int {
	var nsIDs []string
	if n.holder != nil {
		for _, ns := range []string{"mnt", "net"} {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", n.holder.cmd.Process.Pid, ns)); err == nil {
				nsIDs = append(nsIDs, l)
			}
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+n.netns, &st); err == nil {
		nsIDs = append(nsIDs, fmt.Sprintf("net:[%d]", st.Ino))
	}
	self, holder := os.Getpid(), 0
	if n.holder != nil {
		holder = n.holder.cmd.Process.Pid
	}
	seen := map[int]bool{}
	for _, dir := range nodeCgroupDirs() {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						seen[pid] = true
					}
				}
			}
			return nil
		})
	}
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self || pid == holder {
			continue
		}
		for _, ns := range []string{"mnt", "net"} {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns)); err == nil && slicesContains(nsIDs, l) {
				seen[pid] = true
			}
		}
	}
	delete(seen, self)
	delete(seen, holder)
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// nodeCgroupDirs lists the cgroups of nodeCgroupNames in every hierarchy.
func nodeCgroupDirs() []string {
	var out []string
	for _, name := range nodeCgroupNames {
		ds, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
		out = append(out, ds...)
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", name, "cgroup.procs")); err == nil {
			out = append(out, filepath.Join("/sys/fs/cgroup", name)) // cgroup v2
		}
	}
	return out
}

// removeNodeCgroups removes the node's cgroups, deepest first (empty by now).
func removeNodeCgroups(e *env) {
	for _, dir := range nodeCgroupDirs() {
		removeCgroupTree(e, dir)
	}
}

// removeCgroupTree removes the cgroup dir and those below it, deepest first: their processes
// are gone by now, or a moment later (a killed process leaves its cgroup late).
func removeCgroupTree(e *env, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		for try := 0; try < 20; try++ {
			if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Errorf("cleanup: rmdir %s: %v", dirs[i], err)
		}
	}
}

// nodeLeftovers names what a node run leaves on the host if its clean-up failed: cgroups,
// network namespaces and links named like the run's, and mounts on kubelet's directories.
func nodeLeftovers() []string {
	var out []string
	for _, d := range nodeCgroupDirs() {
		out = append(out, "the cgroup "+d)
	}
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "csigw-node-") {
				out = append(out, "the network namespace "+f[0])
			}
		}
	}
	for _, link := range []string{cniBridge, "node0"} {
		if err := exec.Command("ip", "link", "show", link).Run(); err == nil {
			out = append(out, "the link "+link)
		}
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			for _, d := range nodePrivateDirs[:2] {
				if mp := unescapeMount(f[4]); mp == d || strings.HasPrefix(mp, d+"/") {
					out = append(out, "the mount "+mp)
				}
			}
		}
	}
	return out
}

// checkNodeGone fails the test for anything of the node still on the machine after stop:
// a process, a mount, a loop device on the run's files, a network namespace, a cgroup, a
// link.
func (n *node) checkNodeGone() {
	e := n.e
	for _, l := range nodeLeftovers() {
		e.t.Errorf("after the node stopped, the machine still has %s", l)
	}
	if pids := pidsUnder(e.work); len(pids) > 0 {
		e.t.Errorf("after the node stopped, processes of the run still run: %v", pids)
	}
	if b, err := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output(); err == nil && strings.Contains(string(b), e.work+"/") {
		e.t.Errorf("after the node stopped, loop devices remain:\n%s", b)
	}
	if ms := mountsUnder(e.work); len(ms) > 0 {
		e.t.Errorf("after the node stopped, mounts remain: %v", ms)
	}
	if _, err := os.Stat("/run/netns/" + n.netns); err == nil {
		e.t.Errorf("after the node stopped, /run/netns/%s remains", n.netns)
	}
}

// inNode runs a shell command in the node's namespaces (the node's view of mounts).
func (n *node) inNode(script string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := n.e.command(ctx, "sh", "-c", script).CombinedOutput()
	return string(out)
}
