package orchestrators

import (
	"fmt"
	"strings"
	"time"
)

// The content the workload writes into its volume and reads back.
const nodeVolumeContent = "written-through-csi-gateway-by-kubelet"

// testStatefulSet runs a StatefulSet's volume through its whole life on the node: the
// volumeClaimTemplate's PVC provisioned by csi-provisioner through the controller pod's
// gateway, attached by csi-attacher (VolumeAttachment), staged and published by kubelet
// through the node pod's gateway (the appliance makes the loop device and ext4), written and
// read back by the pod; then deleted: no volume on the appliance, no mount or loop device on
// the node. Each step's time goes to the transcript.
func (n *node) testStatefulSet(k *kube, app *nodeAppliance) {
	e := n.e
	start := time.Now()
	step := func(what string) { e.t.Logf("  %-40s %s", what, time.Since(start).Round(100*time.Millisecond)) }
	n.logTranscript("before the StatefulSet: the node's mount table")

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
	table := n.mountTable()
	for _, l := range loops {
		if !strings.Contains(table, l+" /var/lib/kubelet/plugins/kubernetes.io/csi/") || !strings.Contains(table, l+" /var/lib/kubelet/pods/") {
			e.t.Errorf("the node does not show %s staged under plugins/kubernetes.io/csi and published under pods/", l)
		}
	}
	e.t.Logf("with the pod running: the node's mount table\n%s", strings.TrimRight(table, "\n"))

	// Deletion: the StatefulSet (kubelet unpublishes and unstages), its PVC (the attacher
	// detaches, the provisioner deletes).
	k.kubectl(nil, "delete", "statefulset", "writer", "--wait=false")
	e.eventually(3*time.Minute, "the pod writer-0 gone", func() (bool, string) {
		out, _ := k.try(nil, "get", "pod", "writer-0", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	step("pod deleted (NodeUnpublish, NodeUnstage)")
	k.kubectl(nil, "delete", "pvc", "data-writer-0", "--wait=false")
	e.eventually(3*time.Minute, "the VolumeAttachment and PV of "+pv+" gone", func() (bool, string) {
		va, _ := k.try(nil, "get", "volumeattachments", "-o", "jsonpath={.items[*].spec.source.persistentVolumeName}")
		p, _ := k.try(nil, "get", "pv", pv, "--ignore-not-found", "-o", "name")
		return !strings.Contains(va, pv) && strings.TrimSpace(p) == "", "attachments: " + va + "; pv: " + p
	})
	step("detached and deleted (DeleteVolume)")
	if vs := app.volumes(); len(vs) != 0 {
		e.t.Errorf("volumes left on the appliance after the deletion: %v", keys(vs))
	}
	if l := app.loopDevices(vol.ID); len(l) != 0 {
		e.t.Errorf("loop devices left on the volume's image: %v", l)
	}
	after := n.mountTable()
	if strings.Contains(after, "/dev/loop") {
		e.t.Errorf("mounts of loop devices left on the node:\n%s", after)
	}
	e.t.Logf("after the deletion: the node's mount table\n%s", strings.TrimRight(after, "\n"))
}

// events lists the events of the objects named name, for failure messages.
func (k *kube) events(name string) string {
	out, _ := k.try(nil, "get", "events", "--field-selector", "involvedObject.name="+name, "-o",
		`jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
	return out
}
