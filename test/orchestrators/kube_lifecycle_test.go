package orchestrators

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The secret values the StorageClass references: they must reach the appliance (the witness
// sees them in the requests' secrets) and appear in no log.
const (
	canaryProvisioner = "CANARY-k8s-provisioner-secret-7f3a"
	canaryPublish     = "CANARY-k8s-publish-secret-9c1e"
)

// testKubeLifecycle runs a volume's controller-side life as Kubernetes drives it: the real
// csi-provisioner and csi-attacher on the gateway's socket, authorized by deploy/'s own RBAC
// (they use the controller ServiceAccount's token, not the admin certificate), with the
// appliance's state checked at every step.
func (k *kube) testKubeLifecycle(s *stack) {
	e := k.e
	e.t.Helper()

	// deploy/'s controller base, applied for real: the CSIDriver, the ServiceAccount and its
	// RBAC (the Deployment is stored but never runs: there is no kubelet).
	base, err := e.try(e.repo, nil, "kubectl", "kustomize", filepath.Join(e.repo, "deploy/kubernetes/base/controller"))
	if err != nil {
		e.t.Fatalf("kubectl kustomize base/controller: %v\n%s", err, base)
	}
	k.kubectl([]byte(base), "apply", "-f", "-")
	token := strings.TrimSpace(k.kubectl(nil, "create", "token", "csi-gateway-controller", "-n", "csi-gateway", "--duration=2h"))
	sidecarKubeconfig := k.writeKubeconfig("sidecars", "token: "+token)

	k.kubectl([]byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: e2e-provisioner, namespace: csi-gateway}
stringData: {password: %s}
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-publish, namespace: csi-gateway}
stringData: {password: %s}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-gateway-e2e}
provisioner: %s
reclaimPolicy: Delete
volumeBindingMode: Immediate
parameters:
  tier: premium
  csi.storage.k8s.io/provisioner-secret-name: e2e-provisioner
  csi.storage.k8s.io/provisioner-secret-namespace: csi-gateway
  csi.storage.k8s.io/controller-publish-secret-name: e2e-publish
  csi.storage.k8s.io/controller-publish-secret-namespace: csi-gateway
`, canaryProvisioner, canaryPublish, driverName)), "apply", "-f", "-")

	// The sidecars as deploy/ runs them (leader election on, in the deployment's namespace),
	// at -v=5, where they log every CSI request (sanitized by their protosanitizer).
	common := []string{"--csi-address=" + s.socket, "--kubeconfig=" + sidecarKubeconfig, "--timeout=60s",
		"--leader-election", "--leader-election-namespace=csi-gateway", "--v=5"}
	provisioner := e.start("csi-provisioner", nil, e.component("csi-provisioner"), append(common, "--default-fstype=ext4")...)
	attacher := e.start("csi-attacher", nil, e.component("csi-attacher"), common...)

	// The node, as kubelet and node-driver-registrar would register it (there is no kubelet
	// here): the node ID the appliance reports, and its topology key (the appliance reports
	// accessibility constraints, so the provisioner needs a node that has its topology).
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: node1
  labels: {%[3]s: zone-1}
  annotations: {csi.volume.kubernetes.io/nodeid: '{"%[1]s":"%[2]s"}'}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node1}
spec:
  drivers:
    - {name: %[1]s, nodeID: %[2]s, topologyKeys: [%[3]s]}
`, driverName, applianceNodeID, "topology.csi-gateway.io/zone")), "apply", "-f", "-")

	// 1. StorageClass + PVC → CreateVolume through the gateway → PV bound.
	start := time.Now()
	k.kubectl([]byte(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: csi-gateway-e2e
  resources: {requests: {storage: 1Gi}}
`), "apply", "-f", "-")
	var pvName string
	e.eventually(2*time.Minute, "the PVC to be Bound", func() (bool, string) {
		for _, p := range []*proc{provisioner, attacher} {
			if done, err := p.exited(); done {
				e.t.Fatalf("%s exited: %v\n%s", p.name, err, p.tail(30))
			}
		}
		pvc := k.get("pvc", "data", "-n", "default")
		pvName = str(field(pvc, "spec", "volumeName"))
		return str(field(pvc, "status", "phase")) == "Bound", fmt.Sprintf("phase %v; provisioner: %s", field(pvc, "status", "phase"), provisioner.tail(2))
	})
	pv := k.get("pv", pvName)
	handle := str(field(pv, "spec", "csi", "volumeHandle"))
	if d := str(field(pv, "spec", "csi", "driver")); d != driverName || handle == "" {
		e.t.Fatalf("PV %s: driver %q, volumeHandle %q", pvName, d, handle)
	}
	vols := s.volumes()
	v, ok := vols[pvName]
	switch {
	case !ok:
		e.t.Fatalf("the appliance has no volume named %s (it has %v)", pvName, keys(vols))
	case v.ID != handle:
		e.t.Errorf("appliance volume %s has ID %s, the PV's volumeHandle is %s", pvName, v.ID, handle)
	case v.CapacityBytes != 1<<30:
		e.t.Errorf("appliance volume %s: %d bytes, want 1Gi", pvName, v.CapacityBytes)
	case v.Parameters["tier"] != "premium":
		e.t.Errorf("appliance volume %s: parameters %v, want tier=premium", pvName, v.Parameters)
	case len(v.Parameters) != 1:
		e.t.Errorf("appliance volume %s: parameters %v: the provisioner's secret parameters must not reach the appliance as parameters", pvName, v.Parameters)
	}
	if _, err := os.Stat(s.image(handle)); err != nil {
		e.t.Errorf("the volume's image: %v", err)
	}
	e.t.Logf("kubernetes: PVC bound to %s (appliance volume %s) in %s", pvName, handle, time.Since(start).Round(time.Millisecond))

	// 2. A VolumeAttachment → ControllerPublishVolume → attached (made by hand, as the
	// attach-detach controller would for a pod on node1).
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: e2e-attachment}
spec:
  attacher: %s
  nodeName: node1
  source: {persistentVolumeName: %s}
`, driverName, pvName)), "apply", "-f", "-")
	start = time.Now()
	e.eventually(2*time.Minute, "the VolumeAttachment to be attached", func() (bool, string) {
		va := k.get("volumeattachment", "e2e-attachment")
		return field(va, "status", "attached") == true, fmt.Sprintf("status %v; attacher: %s", field(va, "status"), attacher.tail(2))
	})
	if pubs := s.volumes()[pvName].Publications; len(pubs) != 1 || pubs[applianceNodeID] == nil {
		e.t.Errorf("after attach, the appliance has the volume published to %v, want [%s]", keys(pubs), applianceNodeID)
	}
	e.t.Logf("kubernetes: VolumeAttachment attached (appliance: published to %s) in %s", applianceNodeID, time.Since(start).Round(time.Millisecond))

	// 3. Deletion → ControllerUnpublishVolume, then DeleteVolume.
	start = time.Now()
	k.kubectl(nil, "delete", "volumeattachment", "e2e-attachment", "--wait=false")
	e.eventually(2*time.Minute, "the VolumeAttachment to be gone", func() (bool, string) {
		va := k.get("volumeattachment", "e2e-attachment")
		return va == nil, fmt.Sprintf("status %v", field(va, "status"))
	})
	if pubs := s.volumes()[pvName].Publications; len(pubs) != 0 {
		e.t.Errorf("after detach, the appliance still has the volume published to %v", keys(pubs))
	}
	e.t.Logf("kubernetes: VolumeAttachment detached and removed (appliance: no publication) in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	k.kubectl(nil, "delete", "pvc", "data", "-n", "default", "--wait=false")
	e.eventually(2*time.Minute, "the PV to be deleted", func() (bool, string) {
		pv := k.get("pv", pvName)
		return pv == nil, fmt.Sprintf("PV phase %v", field(pv, "status", "phase"))
	})
	if _, ok := s.volumes()[pvName]; ok {
		e.t.Errorf("after the PV was deleted, the appliance still has volume %s", pvName)
	}
	if _, err := os.Stat(s.image(handle)); !os.IsNotExist(err) {
		e.t.Errorf("after DeleteVolume the image is still there (%v)", err)
	}
	e.t.Logf("kubernetes: PVC deleted → DeleteVolume, PV removed (appliance: no volume, no image) in %s", time.Since(start).Round(time.Millisecond))

	// 4. The secrets reached the appliance on every call that carries them.
	for _, c := range []struct{ method, canary string }{
		{"CreateVolume", canaryProvisioner},
		{"ControllerPublishVolume", canaryPublish},
		{"ControllerUnpublishVolume", canaryPublish},
		{"DeleteVolume", canaryProvisioner},
	} {
		calls, with := s.witness.seen(c.method, c.canary)
		if calls == 0 || with != calls {
			e.t.Errorf("%s reached the appliance %d times, %d of them with the StorageClass's secret", c.method, calls, with)
		} else {
			e.t.Logf("kubernetes: %s reached the appliance %d time(s), each with the StorageClass's secret", c.method, calls)
		}
	}
	e.t.Logf("kubernetes: calls that reached the appliance: %s", strings.Join(s.witness.methods(0), " "))
	provisioner.stop(10 * time.Second)
	attacher.stop(10 * time.Second)
}
