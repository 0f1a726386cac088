package orchestrators

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// v0MockDriverName is the name csi-test v0.3.5's v0 mock driver reports, and its node ID.
const v0MockDriverName = "io.kubernetes.storage.mock"

// testKubeV0Lifecycle runs a volume's controller-side life as Kubernetes drives it, on a
// driver that speaks only CSI v0 (csi-test v0.3.5's mock): the real csi-provisioner and
// csi-attacher, which speak v1, on a gateway whose grpc backend is the v0 driver with
// csiVersion auto, so every call is translated (backends/translate). Run after
// testKubeLifecycle, whose deploy/ RBAC the sidecars use.
func (k *kube) testKubeV0Lifecycle() {
	e := k.e
	e.t.Helper()
	driverSock := filepath.Join(e.work, "v0-driver.sock")
	driver := e.start("v0-mock-driver", []string{"CSI_ENDPOINT=" + driverSock}, e.component("v0-mock-driver"))
	socket := filepath.Join(e.work, "v0-csi.sock")
	admin := fmt.Sprintf("127.0.0.1:%d", e.freePort())
	cfg := e.write("gateway-v0.yaml", fmt.Sprintf(`listeners:
  - endpoint: unix://%s
backends:
  legacy: {type: grpc, target: "unix://%s", csiVersion: auto}
routes:
  - {methods: ["*"], backend: legacy}
admin: {listen: "%s", driverName: %s}
logging: {level: debug, format: json}
`, socket, driverSock, admin, v0MockDriverName))
	gateway := e.startGateway("gateway-v0", cfg, admin)

	token := strings.TrimSpace(k.kubectl(nil, "create", "token", "csi-gateway-controller", "-n", "csi-gateway", "--duration=2h"))
	kubeconfig := k.writeKubeconfig("sidecars-v0", "token: "+token)
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-gateway-e2e-v0}
provisioner: %[1]s
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: Node
metadata:
  name: node-v0
  annotations: {csi.volume.kubernetes.io/nodeid: '{"%[1]s":"%[1]s"}'}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-v0}
spec:
  drivers:
    - {name: %[1]s, nodeID: %[1]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: legacy-data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: csi-gateway-e2e-v0
  resources: {requests: {storage: 1Gi}}
`, v0MockDriverName)), "apply", "-f", "-")
	common := []string{"--csi-address=" + socket, "--kubeconfig=" + kubeconfig, "--timeout=60s",
		"--leader-election", "--leader-election-namespace=csi-gateway", "--v=5"}
	provisioner := e.start("csi-provisioner-v0", nil, e.component("csi-provisioner"), append(common, "--default-fstype=ext4")...)
	attacher := e.start("csi-attacher-v0", nil, e.component("csi-attacher"), common...)
	alive := func() {
		for _, p := range []*proc{driver, gateway, provisioner, attacher} {
			if done, err := p.exited(); done {
				e.t.Fatalf("%s exited: %v\n%s", p.name, err, p.tail(30))
			}
		}
	}

	start := time.Now()
	var pvName string
	e.eventually(2*time.Minute, "the v0 driver's PVC to be Bound", func() (bool, string) {
		alive()
		pvc := k.get("pvc", "legacy-data", "-n", "default")
		pvName = str(field(pvc, "spec", "volumeName"))
		return str(field(pvc, "status", "phase")) == "Bound", fmt.Sprintf("phase %v; provisioner: %s", field(pvc, "status", "phase"), provisioner.tail(2))
	})
	pv := k.get("pv", pvName)
	if d, h := str(field(pv, "spec", "csi", "driver")), str(field(pv, "spec", "csi", "volumeHandle")); d != v0MockDriverName || h == "" {
		e.t.Fatalf("PV %s: driver %q, volumeHandle %q", pvName, d, h)
	}
	e.t.Logf("kubernetes, v0 driver: PVC bound to %s in %s", pvName, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: e2e-v0-attachment}
spec:
  attacher: %s
  nodeName: node-v0
  source: {persistentVolumeName: %s}
`, v0MockDriverName, pvName)), "apply", "-f", "-")
	e.eventually(2*time.Minute, "the v0 driver's VolumeAttachment to be attached", func() (bool, string) {
		alive()
		va := k.get("volumeattachment", "e2e-v0-attachment")
		return field(va, "status", "attached") == true, fmt.Sprintf("status %v; attacher: %s", field(va, "status"), attacher.tail(2))
	})
	e.t.Logf("kubernetes, v0 driver: VolumeAttachment attached in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	k.kubectl(nil, "delete", "volumeattachment", "e2e-v0-attachment", "--wait=false")
	e.eventually(2*time.Minute, "the v0 driver's VolumeAttachment to be gone", func() (bool, string) {
		alive()
		va := k.get("volumeattachment", "e2e-v0-attachment")
		return va == nil, fmt.Sprintf("status %v", field(va, "status"))
	})
	k.kubectl(nil, "delete", "pvc", "legacy-data", "-n", "default", "--wait=false")
	e.eventually(2*time.Minute, "the v0 driver's PV to be deleted", func() (bool, string) {
		alive()
		pv := k.get("pv", pvName)
		return pv == nil, fmt.Sprintf("PV phase %v", field(pv, "status", "phase"))
	})
	e.t.Logf("kubernetes, v0 driver: detached, PVC and PV deleted in %s", time.Since(start).Round(time.Millisecond))

	// What reached the driver: each call the sidecars made, as v0 (the gateway's call lines
	// name the caller's v1 method; the driver answers only csi.v0).
	calls := callLines(gateway.log)
	for _, m := range []string{"CreateVolume", "ControllerPublishVolume", "ControllerUnpublishVolume", "DeleteVolume"} {
		if calls[m+" OK"] == 0 {
			e.t.Errorf("the v0 gateway logged no successful %s (calls: %v)", m, calls)
		}
	}
	e.t.Logf("kubernetes, v0 driver: the gateway's calls: %v", calls)
	provisioner.stop(10 * time.Second)
	attacher.stop(10 * time.Second)
	gateway.stop(10 * time.Second)
	driver.stop(10 * time.Second)
}

// callLines counts the gateway's call log lines (JSON, msg "call") in the log file at path,
// by "Method Code".
func callLines(path string) map[string]int {
	b, _ := os.ReadFile(path)
	counts := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		var line struct{ Msg, Method, Code string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "call" {
			counts[line.Method+" "+line.Code]++
		}
	}
	return counts
}
