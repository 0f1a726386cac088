package orchestrators

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The driver the tap runs in front of: csi-test's mock driver, named like the one of
// deploy/kubernetes/tap/example (the registration path there is its), without
// ControllerPublish.
const (
	tapDriverName = "hostpath.csi.k8s.io"
	mockImage     = "localhost/mock-driver:e2e"
)

// testTap runs deploy/kubernetes/tap/component in front of a node driver DaemonSet named and
// shaped like the tap example's (the mock driver instead of hostpathplugin, which the module
// proxy does not serve), and watches a pod's whole life on a volume of it with
// `csi-gateway tap`: csi-provisioner's CreateVolume, kubelet's NodeStage, NodePublish,
// NodeUnpublish and NodeUnstage, and DeleteVolume must all pass through the tap and be shown.
func (n *node) testTap(k *kube) {
	e := n.e
	dir := filepath.Join(e.work, "tap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.write("tap/driver.yaml", fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: example-csi-driver}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: %[1]s}
spec: {attachRequired: false, podInfoOnMount: false, volumeLifecycleModes: [Persistent]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: example-csi-driver, namespace: example-csi-driver}
spec:
  selector:
    matchLabels: {app: example-csi-driver}
  template:
    metadata:
      labels: {app: example-csi-driver}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      containers:
        - name: driver
          image: %[2]s
          imagePullPolicy: Never
          args: [-name=%[1]s, -disable-attach, -v=5]
          env:
            - {name: CSI_ENDPOINT, value: unix:///csi/csi.sock}
          securityContext: {privileged: true}
          volumeMounts:
            - {name: socket-dir, mountPath: /csi}
            - {name: mountpoint-dir, mountPath: /var/lib/kubelet/pods, mountPropagation: Bidirectional}
            - {name: plugins-dir, mountPath: /var/lib/kubelet/plugins, mountPropagation: Bidirectional}
        - name: node-driver-registrar
          image: registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.12.0
          args: [--csi-address=/csi/csi.sock, --kubelet-registration-path=/var/lib/kubelet/plugins/csi-hostpath/csi.sock]
          volumeMounts:
            - {name: socket-dir, mountPath: /csi}
            - {name: registration-dir, mountPath: /registration}
      volumes:
        - name: socket-dir
          hostPath: {path: /var/lib/kubelet/plugins/csi-hostpath, type: DirectoryOrCreate}
        - name: registration-dir
          hostPath: {path: /var/lib/kubelet/plugins_registry, type: Directory}
        - name: mountpoint-dir
          hostPath: {path: /var/lib/kubelet/pods, type: DirectoryOrCreate}
        - name: plugins-dir
          hostPath: {path: /var/lib/kubelet/plugins, type: Directory}
`, tapDriverName, mockImage))
	component, err := filepath.Rel(dir, filepath.Join(e.repo, "deploy", "kubernetes", "tap", "component"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.write("tap/kustomization.yaml", fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: example-csi-driver
resources: [driver.yaml]
components: [%s]
images:
  - {name: ghcr.io/csi-gateway/csi-gateway, newName: %s, newTag: e2e}
  - {name: registry.k8s.io/sig-storage/csi-node-driver-registrar, newName: %s, newTag: e2e}
`, component, strings.Split(gatewayImage, ":")[0], strings.Split(localImage("node-driver-registrar"), ":")[0]))
	rendered := e.run(e.work, nil, "kubectl", "kustomize", dir)
	k.kubectl([]byte(rendered), "apply", "-f", "-")
	var pod string
	e.eventually(4*time.Minute, "the tapped driver's pod Ready and registered", func() (bool, string) {
		out, _ := k.try(nil, "get", "pods", "-n", "example-csi-driver", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{end}`)
		name, ready, _ := strings.Cut(out, " ")
		pod = name
		drivers, _ := k.try(nil, "get", "csinode", nodeName, "-o", "jsonpath={.spec.drivers[*].name}")
		return ready == "True" && strings.Contains(drivers, tapDriverName), out + "; csinode drivers: " + drivers
	})

	// The live tap, as docs/tap.md says to run it: in the gateway's container (the tap is
	// served to loopback peers only), here through kubectl exec; one JSON line a call.
	tap := e.start("csi-gateway-tap", nil, "kubectl", "--kubeconfig", k.kubeconfig, "exec", "-n", "example-csi-driver", pod,
		"-c", "csi-gateway-tap", "--", "/csi-gateway", "tap", "--admin", "127.0.0.1:9818", "-o", "json")
	e.eventually(time.Minute, "csi-gateway tap streaming", func() (bool, string) {
		if done, err := tap.exited(); done {
			e.t.Fatalf("csi-gateway tap exited: %v\n%s", err, tap.tail(10))
		}
		b, _ := os.ReadFile(tap.log)
		return strings.Contains(string(b), "streaming the calls"), tap.tail(3)
	})

	// csi-provisioner on the tap's socket (kubelet's path, in the node's mount namespace), as
	// the driver's own node-deployed provisioner would be.
	e.start("tap-csi-provisioner", nil, e.component("csi-provisioner"), "--csi-address=/var/lib/kubelet/plugins/csi-hostpath/csi.sock",
		"--kubeconfig="+k.kubeconfig, "--leader-election=false", "--v=3")
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: tapped}
provisioner: %s
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: tapped, namespace: default}
spec: {storageClassName: tapped, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
`, tapDriverName)+sleeperPod("tapped", "tapped")), "apply", "-f", "-")
	e.eventually(3*time.Minute, "the pod on the tapped driver's volume Ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "tapped", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", out + "\n" + tap.tail(3)
	})
	k.kubectl(nil, "delete", "pod", "tapped", "--wait=false")
	e.eventually(3*time.Minute, "the pod on the tapped driver's volume gone", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "tapped", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	k.kubectl(nil, "delete", "pvc", "tapped", "--wait=false")
	want := []string{"Controller/CreateVolume", "Node/NodeStageVolume", "Node/NodePublishVolume", "Node/NodeUnpublishVolume",
		"Node/NodeUnstageVolume", "Controller/DeleteVolume"}
	e.eventually(3*time.Minute, "the pod's whole life in csi-gateway tap", func() (bool, string) {
		b, _ := os.ReadFile(tap.log)
		for _, m := range want {
			if !strings.Contains(string(b), "/csi.v1."+m) {
				return false, tap.tail(5)
			}
		}
		return true, ""
	})
	tap.stop(5 * time.Second)
	b, _ := os.ReadFile(tap.log)
	var calls []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, `"/csi.v1.`); i >= 0 {
			m, _, _ := strings.Cut(l[i+1:], `"`)
			calls = append(calls, m)
		}
	}
	e.t.Logf("csi-gateway tap saw %d calls of the pod's life: %s", len(calls), strings.Join(calls, " "))

	k.kubectl(nil, "delete", "storageclass", "tapped")
	n.deleteDeployment(k, rendered, "example-csi-driver")
}
