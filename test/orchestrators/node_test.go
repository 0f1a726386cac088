package orchestrators

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubeletNode runs deploy/kubernetes/bridge on a real single-node Kubernetes: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kubelet v1.31, containerd and
// runc, a CNI bridge, all inside a network namespace (and a mount namespace) the test creates.
// The gateway's image is the project's own build (tools/ocimage); the sidecars' images hold
// the binaries build-components.sh builds; nothing is pulled from any registry.
//
//  1. The node registers Ready.
//  2. deploy/kubernetes/bridge, through an overlay that only swaps the images for the local
//     ones (imagePullPolicy: Never) and points the backend at the reference appliance the
//     test starts on the node: the controller Deployment and the node DaemonSet run as pods,
//     and node-driver-registrar registers the driver (CSINode lists it).
//  3. A StatefulSet with a volumeClaimTemplate on the gateway's StorageClass: provisioned,
//     attached, staged and published through the gateway, written and read back, expanded
//     (df shows it), snapshotted (external-snapshotter v8: CRDs, snapshot-controller, the
//     Deployment's csi-snapshotter), its pod rescheduled, the snapshot restored into a new
//     PVC whose pod reads the same content; then all deleted down to nothing on the
//     appliance and no mount or loop device on the node.
//  4. The gateway killed during the StatefulSet's rollout: the controller pod's right after
//     the StatefulSet is created, the node pod's right after the volume is attached; the
//     sidecars and kubelet retry through the restarted containers.
//  5. The Helm chart's rendering of the same deployment, in a second pass: it runs, registers
//     the driver, and a StatefulSet's volume goes through provision, attach, write, read back
//     and deletion.
//  6. deploy/kubernetes/tap/component in front of a node driver (csi-test's mock driver):
//     `csi-gateway tap` shows kubelet's calls of a pod's whole life on one of its volumes.
//  7. The node's addresses (node IP, pod network, Service IP) exist only in its network
//     namespace: with pods running, the host's addresses, links and NAT rules show none.
//  8. Everything stopped: no process, mount, loop device, network namespace, cgroup or link
//     left on the machine.
//
// It runs with CSIGWTEST_E2E_NODE=1 (make e2e and make e2e-node set it), as root.
func TestKubeletNode(t *testing.T) {
	if os.Getenv("CSIGWTEST_E2E_NODE") == "" {
		t.Skip("the kubelet node e2e runs with CSIGWTEST_E2E_NODE=1 (make e2e, make e2e-node)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the kubelet node e2e needs root: network and mount namespaces, containerd, loop devices (make e2e-node)")
	}
	if err := nodePreflight(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	phase := func(name string, f func()) {
		start := time.Now()
		f()
		t.Logf("phase %-50s %s", name, time.Since(start).Round(100*time.Millisecond))
	}
	var n *node
	var k *kube
	var app *nodeAppliance
	phase("node namespaces and containerd up", func() { n = e.startNode() })
	phase("etcd, kube-apiserver, kcm, kube-scheduler up", func() { k = n.startControlPlane() })
	phase("kubelet up, node Ready", func() { n.startKubelet(k) })
	phase("images built and imported", n.loadImages)
	phase("snapshot CRDs and snapshot-controller", func() { n.startSnapshotController(k) })
	phase("appliance up on the node", func() { app = n.startAppliance() })
	var rendered string
	phase("deploy/kubernetes/bridge running, driver registered", func() { rendered = n.deployBridge(k, app) })
	n.checkHostUntouched() // the node IP, the pods' bridge and the Service IP's DNAT are up by now
	phase("statefulset: the whole life, gateways killed", func() { n.testStatefulSet(k, app, true) })
	phase("deploy/kubernetes/bridge deleted", func() { n.deleteDeployment(k, rendered, "csi-gateway") })
	phase("helm chart (bridge) running, driver registered", func() { rendered = n.deployHelmBridge(k, app) })
	phase("statefulset: provision, attach, write, read, delete", func() { n.testStatefulSet(k, app, false) })
	phase("helm chart deleted", func() { n.deleteDeployment(k, rendered, "csi-gateway") })
	phase("tap: a pod's life on a tapped driver in csi-gateway tap", func() { n.testTap(k) })
	phase("node stopped, nothing left", func() {
		n.stop()
		n.checkNodeGone()
	})
}

// startControlPlane starts the control plane inside the node's namespaces: the apiserver
// listens on the node IP too (pods reach it through the Service IP's DNAT), and
// kube-controller-manager runs every default controller (Deployments, DaemonSets,
// StatefulSets, the PV binder, the root CA publisher for pods' service account tokens).
func (n *node) startControlPlane() *kube {
	e := n.e
	pki := func(f string) string { return filepath.Join(e.work, "kube", "pki", f) }
	k := e.startKubeWith(kubeOptions{
		controllers: "*",
		apiserverArgs: []string{"--bind-address=0.0.0.0", "--advertise-address=" + nodeIP,
			"--kubelet-client-certificate=" + pki("admin.crt"), "--kubelet-client-key=" + pki("admin.key"),
			"--kubelet-preferred-address-types=InternalIP"},
		kcmArgs: []string{"--root-ca-file=" + pki("ca.crt"), "--service-account-private-key-file=" + pki("sa.key")},
	})
	e.start("kube-scheduler", nil, e.component("kube-scheduler"), "--kubeconfig="+k.kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", e.freePort()))
	n.routeService(k)
	return k
}

// nodeAppliance is the reference appliance, running on the node (in its namespaces, so the
// mounts its Node service makes are kubelet's), serving the Connect JSON protocol on the
// node IP for the gateways in the pods.
type nodeAppliance struct {
	*stack
	url string
}

const nodeAppliancePort = 8480

func (n *node) startAppliance() *nodeAppliance {
	e := n.e
	s := &stack{e: e, dataDir: filepath.Join(e.work, "appliance")}
	sock := filepath.Join(e.work, "appliance.sock")
	addr := fmt.Sprintf("%s:%d", nodeIP, nodeAppliancePort)
	s.appliance = e.start("appliance", nil, e.gateway, "appliance", "--data", s.dataDir,
		"--endpoint", "unix://"+sock, "--http", addr, "--driver-name", driverName, "--node-id", applianceNodeID,
		"--log-level", "debug")
	e.eventually(30*time.Second, "the appliance's socket", func() (bool, string) {
		if done, err := s.appliance.exited(); done {
			e.t.Fatalf("the appliance exited: %v\n%s", err, s.appliance.tail(20))
		}
		_, err := os.Stat(sock)
		return err == nil, s.appliance.tail(3)
	})
	return &nodeAppliance{stack: s, url: "http://" + addr}
}

// mountTable is the node's view of its volume mounts and of the loop devices on the run's
// appliance images (losetup -a lists every loop device of the machine, other tests' too),
// for the transcript.
func (n *node) mountTable(app *nodeAppliance) string {
	return "# mounts of loop devices and of CSI volumes under /var/lib/kubelet\n" + n.loopMounts() +
		"# losetup -a (this run's appliance images)\n" + n.inNode("losetup -a | grep -F "+app.dataDir+"/ || true")
}

// loopMounts lists the node's mounts of loop devices and of CSI volumes.
func (n *node) loopMounts() string {
	return n.inNode(`grep -E '^/dev/loop| /var/lib/kubelet/(pods/[^ ]*/volumes/kubernetes.io~csi|plugins/kubernetes.io/csi)/' /proc/self/mounts | cut -d' ' -f1-3`)
}

func (n *node) logTranscript(what string, app *nodeAppliance) {
	n.e.t.Logf("%s:\n%s", what, strings.TrimRight(n.mountTable(app), "\n"))
}

// startSnapshotController installs the VolumeSnapshot CRDs and runs external-snapshotter's
// snapshot-controller on the node (the controller Deployment's csi-snapshotter needs both).
func (n *node) startSnapshotController(k *kube) {
	e := n.e
	crds, err := filepath.Glob(filepath.Join(e.component("snapshot-crds"), "*.yaml"))
	if err != nil || len(crds) == 0 {
		e.t.Fatalf("no snapshot CRDs in %s", e.component("snapshot-crds"))
	}
	for _, c := range crds {
		k.kubectl(nil, "apply", "-f", c)
	}
	for _, c := range crds {
		k.kubectl(nil, "wait", "--for=condition=Established", "--timeout=60s", "-f", c)
	}
	e.start("snapshot-controller", nil, e.component("snapshot-controller"), "--kubeconfig="+k.kubeconfig,
		"--leader-election=false", "--v=4")
}
