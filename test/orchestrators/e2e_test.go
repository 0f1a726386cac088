package orchestrators

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOrchestrators is the whole run; its phases share one appliance, witness and gateway.
//
//  1. kube-apiserver accepts every manifest in deploy/kubernetes and every rendering of the
//     Helm chart (server-side dry run, strict field validation).
//  2. Kubernetes: csi-provisioner and csi-attacher drive a volume's controller-side life
//     through the gateway: PVC → CreateVolume → PV bound; VolumeAttachment →
//     ControllerPublishVolume → attached; deletion → ControllerUnpublishVolume, DeleteVolume.
//     Then the same on a driver that speaks only CSI v0, every call translated.
//  3. Nomad: deploy/nomad's plugin job, volume create, a job writing into the volume (Node
//     stage and publish), its stop, volume delete.
//  4. The secrets reached the appliance and appear in no log of any process.
func TestOrchestrators(t *testing.T) {
	e := newEnv(t)
	phase := func(name string, f func()) {
		start := time.Now()
		f()
		t.Logf("phase %-44s %s", name, time.Since(start).Round(100*time.Millisecond))
	}
	var s *stack
	var k *kube
	var n *nomad
	phase("appliance, witness and gateway up", func() { s = e.startStack() })
	phase("etcd, kube-apiserver, kcm up", func() { k = e.startKube() })
	phase("manifests: server-side dry run", k.testManifests)
	phase("kubernetes: provision, attach, detach, delete", func() { k.testKubeLifecycle(s) })
	phase("kubernetes: the same on a CSI v0 driver", k.testKubeV0Lifecycle)
	phase("nomad dev agent up", func() { n = e.startNomad() })
	phase("nomad: plugin, volume, job, stop, delete", func() { n.testNomadLifecycle(s) })

	phase("no secret in any log", func() {
		canaries := []string{canaryProvisioner, canaryPublish, canaryNomad}
		found, files, err := scanLogs(canaries, append([]string{e.logs}, n.allocLogs()...)...)
		if err != nil {
			t.Fatal(err)
		}
		if files < 8 {
			t.Errorf("only %d log files were scanned", files)
		}
		for f, c := range found {
			t.Errorf("%s contains %s", f, strings.Join(c, ", "))
		}
		if len(found) == 0 {
			names, _ := filepath.Glob(filepath.Join(e.logs, "*"))
			for i := range names {
				names[i] = filepath.Base(names[i])
			}
			t.Logf("no canary secret in %d log files: %s", files, strings.Join(names, " "))
		}
	})
}
