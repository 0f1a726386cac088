// Package orchestrators is csi-gateway's end-to-end test against real container
// orchestrators: a Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager)
// with the real csi-provisioner and csi-attacher on the gateway's socket, and a Nomad dev
// agent with the gateway as its CSI plugin, both in front of the reference appliance
// (`csi-gateway appliance`). It also hands every manifest in deploy/ and every rendering of
// the Helm chart to the real kube-apiserver as a server-side dry run. TestKubeletNode (make
// e2e, or alone make e2e-node; it runs with CSIGWTEST_E2E_NODE=1) runs deploy/kubernetes/bridge on a real kubelet node with
// containerd, inside network and mount namespaces of its own (node_host_test.go).
//
// It is its own module so that the main module never depends on Kubernetes or Nomad: the
// orchestrators are separate binaries, built from the Go module proxy at pinned versions by
// build-components.sh and cached outside the repository. Run it with `make e2e` (as root:
// Nomad's exec driver and the appliance's Node calls mount).
//
// It refuses nothing of the machine it did not make: every process it starts is stopped by
// its PID, every mount and loop device it leaves under its work directory is undone, and
// everything listens on 127.0.0.1 on ports picked free at start.
package orchestrators
