package orchestrators

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The content the workload writes into its volume and reads back.
const nodeVolumeContent = "written-through-csi-gateway-by-kubelet"

// testStatefulSet runs a StatefulSet's volume through its whole life on the node: the
// volumeClaimTemplate's PVC provisioned by csi-provisioner through the controller pod's
// gateway, attached by csi-attacher (VolumeAttachment), staged and published by kubelet
// through the node pod's gateway (the appliance makes the loop device and ext4), written and
// read back by the pod, expanded, snapshotted and restored (expand, snapshotAndRestore); then
// deleted: no volume or snapshot on the appliance, no mount or loop device on the node. Each
// step's time goes to the transcript.
//
// With full, the gateway is killed twice during the rollout (killGateway): the controller
// pod's as the StatefulSet is created, the node pod's once the volume is attached; and the
// volume is also expanded, snapshotted and restored.
func (n *node) testStatefulSet(k *kube, app *nodeAppliance, full bool) {
	e := n.e
	start := time.Now()
	step := func(what string) { e.t.Logf("  %-46s %s", what, time.Since(start).Round(100*time.Millisecond)) }
	n.logTranscript("before the StatefulSet: the node's mount table", app)

	k.kubectl([]byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-gateway-node-e2e}
provisioner: %s
reclaimPolicy: Delete
allowVolumeExpansion: true
volumeBindingMode: WaitForFirstConsumer
parameters: {csi.storage.k8s.io/fstype: ext4}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: writer, namespace: default}
spec:
  serviceName: writer
  replicas: 1
  selector: {matchLabels: {app: writer}}
  template:
    metadata: {labels: {app: writer}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: writer
          image: %s
          imagePullPolicy: Never
          command: ["/bin/sh", "-c", "echo %s >/data/content && sync && exec sleep 3600"]
          readinessProbe: {exec: {command: ["/bin/cat", "/data/content"]}, periodSeconds: 1}
          volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        storageClassName: csi-gateway-node-e2e
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 64Mi}}
`, driverName, busyboxImage, nodeVolumeContent)), "apply", "-f", "-")
	step("StatefulSet created")
	var killed []string
	if full {
		killed = append(killed, n.killGateway(k, "controller"))
		step("controller pod's gateway killed")
	}

	var pv string
	e.eventually(3*time.Minute, "the PVC data-writer-0 Bound", func() (bool, string) {
		out, _ := k.try(nil, "get", "pvc", "data-writer-0", "-o", "jsonpath={.status.phase} {.spec.volumeName}")
		phase, name, _ := strings.Cut(out, " ")
		pv = name
		return phase == "Bound", out + "\n" + k.events("data-writer-0")
	})
	step("PVC bound (CreateVolume)")
	vol, ok := app.volumes()[pv]
	if !ok {
		e.t.Fatalf("the PV %s has no volume on the appliance: %v", pv, keys(app.volumes()))
	}
	e.eventually(2*time.Minute, "the VolumeAttachment of "+pv+" attached", func() (bool, string) {
		out, _ := k.try(nil, "get", "volumeattachments", "-o", `jsonpath={range .items[*]}{.spec.source.persistentVolumeName}={.status.attached}{"\n"}{end}`)
		return strings.Contains(out, pv+"=true"), out
	})
	step("attached (ControllerPublishVolume)")
	if full {
		killed = append(killed, n.killGateway(k, "node"))
		step("node pod's gateway killed")
	}
	e.eventually(3*time.Minute, "the pod writer-0 Ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "writer-0", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", out + "\n" + k.events("writer-0")
	})
	step("pod Ready (NodeStage, NodePublish)")
	if got := strings.TrimSpace(k.kubectl(nil, "exec", "writer-0", "--", "cat", "/data/content")); got != nodeVolumeContent {
		e.t.Fatalf("the pod read back %q from its volume, want %q", got, nodeVolumeContent)
	}
	df := k.kubectl(nil, "exec", "writer-0", "--", "df", "-k", "/data")
	step("data read back")
	e.t.Logf("df in the pod:\n%s", strings.TrimRight(df, "\n"))
	loops := app.loopDevices(vol.ID)
	if len(loops) != 1 {
		e.t.Errorf("the volume's image %s is on %d loop devices (%v), want 1", app.image(vol.ID), len(loops), loops)
	}
	table := n.mountTable(app)
	for _, l := range loops {
		if !strings.Contains(table, l+" /var/lib/kubelet/plugins/kubernetes.io/csi/") || !strings.Contains(table, l+" /var/lib/kubelet/pods/") {
			e.t.Errorf("the node does not show %s staged under plugins/kubernetes.io/csi and published under pods/", l)
		}
	}
	e.t.Logf("with the pod running: the node's mount table\n%s", strings.TrimRight(table, "\n"))

	for _, pod := range killed {
		if r := gatewayRestarts(k, pod); r == "" || r == "0" {
			e.t.Errorf("the gateway of %s was killed but kubelet reports %q restarts", pod, r)
		} else {
			e.t.Logf("the gateway of %s restarted %s time(s); the volume's life went on through it", pod, r)
		}
	}
	if full {
		n.expand(k, step)
		n.snapshotAndRestore(k, step)
	}

	// Deletion: the StatefulSet (kubelet unpublishes and unstages), its PVC (the attacher
	// detaches, the provisioner deletes).
	k.kubectl(nil, "delete", "statefulset", "writer", "--wait=false")
	e.eventually(3*time.Minute, "the pod writer-0 gone", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "writer-0", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	step("pod deleted (NodeUnpublish, NodeUnstage)")
	k.kubectl(nil, "delete", "pvc", "data-writer-0", "--wait=false")
	e.eventually(3*time.Minute, "every VolumeAttachment and PV gone", func() (bool, string) {
		va, _ := k.try(nil, "get", "volumeattachments", "-o", "name")
		p, _ := k.try(nil, "get", "pv", "-o", "name")
		return strings.TrimSpace(va+p) == "", "attachments: " + va + "; pvs: " + p
	})
	step("detached and deleted (DeleteVolume)")
	if vs := app.volumes(); len(vs) != 0 {
		e.t.Errorf("volumes left on the appliance after the deletion: %v", keys(vs))
	}
	if ss := app.snapshotCount(); ss != 0 {
		e.t.Errorf("%d snapshots left on the appliance after the deletion", ss)
	}
	if l := app.loopDevices(vol.ID); len(l) != 0 {
		e.t.Errorf("loop devices left on the volume's image: %v", l)
	}
	if m := n.loopMounts(); strings.TrimSpace(m) != "" {
		e.t.Errorf("mounts left on the node:\n%s", m)
	}
	after := n.mountTable(app)
	if strings.Contains(after, "/dev/loop") {
		e.t.Errorf("loop devices left on the run's appliance images:\n%s", after)
	}
	e.t.Logf("after the deletion: the node's mount table\n%s", strings.TrimRight(after, "\n"))
}

// events lists the events of the objects named name, for failure messages.
func (k *kube) events(name string) string {
	out, _ := k.try(nil, "get", "events", "--field-selector", "involvedObject.name="+name, "-o",
		`jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
	return out
}

// expand grows the StatefulSet's PVC: csi-resizer's ControllerExpandVolume through the
// controller pod's gateway, then the file system on the node. Growing a mounted ext4 needs
// CAP_SYS_RESOURCE, which this VM refuses to every process (NodeExpandVolume answers
// FAILED_PRECONDITION saying so), so the pod is rescheduled: kubelet unstages, and the new
// stage grows the file system offline. The data must still be there, and the pod's df must
// show the new size.
func (n *node) expand(k *kube, step func(string)) {
	e := n.e
	pv := k.kubectl(nil, "get", "pvc", "data-writer-0", "-o", "jsonpath={.spec.volumeName}")
	before := dfBlocks(e, k.kubectl(nil, "exec", "writer-0", "--", "df", "-k", "/data"))
	k.kubectl(nil, "patch", "pvc", "data-writer-0", "--type=merge", "-p", `{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}`)
	e.eventually(3*time.Minute, "the PV at 128Mi (ControllerExpandVolume)", func() (bool, string) {
		capacity, _ := k.try(nil, "get", "pv", pv, "-o", "jsonpath={.spec.capacity.storage}")
		return capacity == "128Mi", capacity + k.events("data-writer-0")
	})
	step("controller expansion (ControllerExpandVolume)")

	uid := k.kubectl(nil, "get", "pod", "writer-0", "-o", "jsonpath={.metadata.uid}")
	k.kubectl(nil, "delete", "pod", "writer-0", "--wait=false")
	e.eventually(3*time.Minute, "writer-0 rescheduled and Ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "writer-0", "-o", `jsonpath={.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}`)
		u, ready, _ := strings.Cut(out, " ")
		return u != uid && u != "" && ready == "True", out + k.events("writer-0")
	})
	if got := strings.TrimSpace(k.kubectl(nil, "exec", "writer-0", "--", "cat", "/data/content")); got != nodeVolumeContent {
		e.t.Fatalf("after the pod was rescheduled it read %q, want %q", got, nodeVolumeContent)
	}
	step("pod rescheduled, data read back")
	var df string
	e.eventually(3*time.Minute, "the PVC at 128Mi and the pod's df grown", func() (bool, string) {
		capacity, _ := k.try(nil, "get", "pvc", "data-writer-0", "-o", "jsonpath={.status.capacity.storage}")
		df, _ = k.try(nil, "exec", "writer-0", "--", "df", "-k", "/data")
		return capacity == "128Mi" && dfBlocks(e, df) > before*3/2, "capacity " + capacity + "\n" + df + k.events("data-writer-0")
	})
	step("expansion seen in df")
	e.t.Logf("df in the pod after the expansion to 128Mi:\n%s", strings.TrimRight(df, "\n"))
}

// dfBlocks is the size in 1K blocks of the one file system in df -k's output.
func dfBlocks(e *env, df string) int64 {
	lines := strings.Split(strings.TrimSpace(df), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		e.t.Fatalf("df printed %q", df)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		e.t.Fatalf("df printed %q: %v", df, err)
	}
	return n
}

// snapshotAndRestore snapshots the StatefulSet's volume (the snapshot controller and the
// controller pod's csi-snapshotter, CreateSnapshot through the gateway), restores it into a
// new PVC that a second pod reads (the content must be the one written), then deletes the
// restored pod and PVC and the snapshot (DeleteSnapshot).
func (n *node) snapshotAndRestore(k *kube, step func(string)) {
	e := n.e
	k.kubectl([]byte(fmt.Sprintf(`apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: csi-gateway-node-e2e}
driver: %s
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: writer-snap, namespace: default}
spec:
  volumeSnapshotClassName: csi-gateway-node-e2e
  source: {persistentVolumeClaimName: data-writer-0}
`, driverName)), "apply", "-f", "-")
	e.eventually(3*time.Minute, "the VolumeSnapshot writer-snap ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "volumesnapshot", "writer-snap", "-o", "jsonpath={.status.readyToUse}")
		return out == "true", out + k.events("writer-snap")
	})
	step("snapshot ready (CreateSnapshot)")

	k.kubectl([]byte(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: restored, namespace: default}
spec:
  storageClassName: csi-gateway-node-e2e
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 128Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: writer-snap}
---
`+sleeperPod("reader", "restored")), "apply", "-f", "-")
	e.eventually(3*time.Minute, "the pod reader Ready on the restored PVC", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "reader", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", out + k.events("restored") + k.events("reader")
	})
	if got := strings.TrimSpace(k.kubectl(nil, "exec", "reader", "--", "cat", "/data/content")); got != nodeVolumeContent {
		e.t.Fatalf("the volume restored from the snapshot holds %q, want %q", got, nodeVolumeContent)
	}
	step("restored from the snapshot, data equal")

	k.kubectl(nil, "delete", "pod", "reader", "--wait=false")
	e.eventually(3*time.Minute, "the pod reader gone", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "reader", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	k.kubectl(nil, "delete", "pvc", "restored", "--wait=false")
	k.kubectl(nil, "delete", "volumesnapshot", "writer-snap", "--wait=false")
	e.eventually(3*time.Minute, "the snapshot's content gone", func() (bool, string) {
		out, _ := k.try(nil, "get", "volumesnapshotcontents", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	step("restored volume and snapshot deleted")
}

// sleeperPod is a Pod that mounts the PersistentVolumeClaim claim at /data and sleeps: a
// consumer of a volume, Ready once its volume is staged and published.
func sleeperPod(name, claim string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
    - name: %s
      image: %s
      imagePullPolicy: Never
      command: ["/bin/sleep", "3600"]
      volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: %s}}]
`, name, name, busyboxImage, claim)
}
