package orchestrators

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// bridgeOverlay writes the test's overlay of deploy/kubernetes/bridge and returns its
// directory. It changes only what a run on this node must: the images (the local ones, never
// pulled) and the backend's address (the appliance on the node IP, over plain HTTP: the
// reference appliance serves no TLS, and the gateway sends credentials only over https, so
// the URL's tls and auth lines go; the Secrets stay mounted, unused).
func (n *node) bridgeOverlay(k *kube, app *nodeAppliance) string {
	e := n.e
	bridge := filepath.Join(e.repo, "deploy", "kubernetes", "bridge")
	dir := filepath.Join(e.work, "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for _, f := range []string{"controller-config.yaml", "node-config.yaml"} {
		b, err := os.ReadFile(filepath.Join(bridge, f))
		if err != nil {
			e.t.Fatal(err)
		}
		var out []string
		replaced := false
		for _, l := range strings.Split(string(b), "\n") {
			t := strings.TrimSpace(l)
			switch {
			case strings.HasPrefix(t, "urls:"):
				l = l[:len(l)-len(strings.TrimLeft(l, " "))] + fmt.Sprintf("urls: [%s]", app.url)
				replaced = true
			case strings.HasPrefix(t, "tls:"), strings.HasPrefix(t, "ca: /etc/csi-gateway/appliance-tls"),
				strings.HasPrefix(t, "auth:"), strings.HasPrefix(t, "bearerTokenFile:"):
				continue
			}
			out = append(out, l)
		}
		if !replaced {
			e.t.Fatalf("%s has no urls: line to point at the appliance", f)
		}
		e.write(filepath.Join("overlay", f), strings.Join(out, "\n"))
	}

	// imagePullPolicy: Never on every container, by name (a strategic merge patch adds a
	// container it does not find).
	rendered := e.run(e.work, nil, "kubectl", "kustomize", bridge)
	out := k.kubectl([]byte(rendered), "create", "--dry-run=client", "-o", "json", "-f", "-")
	type item struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name  string `json:"name"`
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var items []item // one JSON document per object
	for dec := json.NewDecoder(strings.NewReader(out)); dec.More(); {
		var it item
		if err := dec.Decode(&it); err != nil {
			e.t.Fatalf("the bridge's rendering: %v", err)
		}
		items = append(items, it)
	}
	var patches, images []string
	seen := map[string]bool{}
	for _, it := range items {
		if it.Kind != "Deployment" && it.Kind != "DaemonSet" {
			continue
		}
		var cs []string
		for _, c := range it.Spec.Template.Spec.Containers {
			cs = append(cs, fmt.Sprintf("{name: %s, imagePullPolicy: Never}", c.Name))
			name, _, _ := strings.Cut(c.Image, ":")
			if seen[name] {
				continue
			}
			seen[name] = true
			switch {
			case name == "ghcr.io/csi-gateway/csi-gateway":
				images = append(images, fmt.Sprintf("  - {name: %s, newName: %s, newTag: %s}", name, strings.Split(gatewayImage, ":")[0], "e2e"))
			case sidecarImages[name] != "":
				images = append(images, fmt.Sprintf("  - {name: %s, newName: %s, newTag: e2e}", name, strings.Split(localImage(sidecarImages[name]), ":")[0]))
			default:
				e.t.Fatalf("the bridge runs the image %s, which the test builds no local image for", c.Image)
			}
		}
		f := fmt.Sprintf("pull-never-%s.yaml", strings.ToLower(it.Kind))
		e.write(filepath.Join("overlay", f), fmt.Sprintf("apiVersion: apps/v1\nkind: %s\nmetadata: {name: %s, namespace: csi-gateway}\nspec: {template: {spec: {containers: [%s]}}}\n",
			it.Kind, it.Metadata.Name, strings.Join(cs, ", ")))
		patches = append(patches, "  - path: "+f)
	}
	rel, err := filepath.Rel(dir, bridge)
	if err != nil {
		e.t.Fatal(err)
	}
	e.write("overlay/kustomization.yaml", fmt.Sprintf(`# The e2e's overlay of deploy/kubernetes/bridge (node_bridge_test.go): local images, never
# pulled, and the appliance on the node.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%s]
configMapGenerator:
  - {name: csi-gateway-controller-config, namespace: csi-gateway, behavior: replace, files: [config.yaml=controller-config.yaml]}
  - {name: csi-gateway-node-config, namespace: csi-gateway, behavior: replace, files: [config.yaml=node-config.yaml]}
images:
%s
patches:
%s
`, rel, strings.Join(images, "\n"), strings.Join(patches, "\n")))
	return dir
}

// deployBridge applies the overlay and waits for it to run (runDeployment).
func (n *node) deployBridge(k *kube, app *nodeAppliance) string {
	e := n.e
	rendered := e.run(e.work, nil, "kubectl", "kustomize", n.bridgeOverlay(k, app))
	if strings.Contains(rendered, "appliance.example.com") {
		e.t.Fatal("the overlay's rendering still names appliance.example.com")
	}
	n.runDeployment(k, "deploy/kubernetes/bridge", rendered)
	return rendered
}

// deployHelmBridge renders the Helm chart as a bridge with the same local images (the
// gateway's pulled Never, the sidecars' present so never pulled) and appliance, applies it
// and waits for it to run (runDeployment).
func (n *node) deployHelmBridge(k *kube, app *nodeAppliance) string {
	e := n.e
	values := e.write("helm-values.yaml", fmt.Sprintf(`deployment: bridge
appliance:
  urls: [%s]
image: {repository: %s, tag: e2e, pullPolicy: Never}
sidecars:
  provisioner: {image: %s}
  attacher: {image: %s}
  snapshotter: {image: %s}
  resizer: {image: %s}
  nodeDriverRegistrar: {image: %s}
`, app.url, strings.Split(gatewayImage, ":")[0], localImage("csi-provisioner"), localImage("csi-attacher"),
		localImage("csi-snapshotter"), localImage("csi-resizer"), localImage("node-driver-registrar")))
	rendered := e.run(e.work, nil, e.component("helm"), "template", "csi-gateway", filepath.Join(e.repo, "deploy", "helm", "csi-gateway"),
		"--namespace", "csi-gateway", "-f", values)
	k.kubectl(nil, "create", "namespace", "csi-gateway")
	n.runDeployment(k, "the Helm chart (deployment: bridge)", rendered)
	return rendered
}

// runDeployment applies rendered manifests and waits for the controller Deployment and the
// node DaemonSet to run and node-driver-registrar to register the driver with kubelet.
func (n *node) runDeployment(k *kube, what, rendered string) {
	e := n.e
	k.kubectl([]byte(rendered), "apply", "-f", "-")
	start := time.Now()
	e.eventually(4*time.Minute, "the node DaemonSet's pod Ready and the driver in CSINode", func() (bool, string) {
		drivers, _ := k.try(nil, "get", "csinode", nodeName, "-o", "jsonpath={.spec.drivers[*].name}")
		pods, _ := k.try(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide")
		return strings.Contains(drivers, driverName), "csinode drivers: " + drivers + "\n" + pods
	})
	e.t.Logf("%s: CSINode %s lists %s after %s (node-driver-registrar)", what, nodeName, driverName, time.Since(start).Round(time.Second))
	e.eventually(4*time.Minute, "the controller Deployment available", func() (bool, string) {
		out, _ := k.try(nil, "get", "deployment", "csi-gateway-controller", "-n", "csi-gateway", "-o", "jsonpath={.status.availableReplicas}")
		pods, _ := k.try(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide")
		return out == "1", pods
	})
	e.eventually(2*time.Minute, "the node DaemonSet ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "daemonset", "csi-gateway-node", "-n", "csi-gateway", "-o", "jsonpath={.status.numberReady}")
		return out == "1", out
	})
	e.t.Logf("%s running after %s:\n%s\n%s", what, time.Since(start).Round(time.Second),
		k.kubectl(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide"), k.kubectl(nil, "get", "csinode"))
}

// deleteDeployment deletes rendered manifests and their namespace and waits until kubelet
// has stopped their pods, the namespace is gone and kubelet has unregistered the driver
// (node-driver-registrar removed its registration socket when it stopped).
func (n *node) deleteDeployment(k *kube, rendered, namespace string) {
	e := n.e
	k.kubectl([]byte(rendered), "delete", "--wait=false", "--ignore-not-found", "-f", "-")
	k.kubectl(nil, "delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
	e.eventually(3*time.Minute, "the pods and namespace gone, the driver unregistered", func() (bool, string) {
		pods, err1 := k.try(nil, "get", "pods", "-n", namespace, "-o", "name")
		ns, err2 := k.try(nil, "get", "namespace", namespace, "--ignore-not-found", "-o", "name")
		drivers, err3 := k.try(nil, "get", "csinode", nodeName, "-o", "jsonpath={.spec.drivers[*].name}")
		done := err1 == nil && err2 == nil && err3 == nil && strings.TrimSpace(pods+ns+drivers) == ""
		return done, fmt.Sprintf("pods: %q; namespace: %q; csinode drivers: %q", pods, ns, drivers)
	})
}

// killGateway kills (SIGKILL, through containerd) the csi-gateway container of the pod of a
// component (controller or node) and returns the pod's name; kubelet restarts it.
func (n *node) killGateway(k *kube, component string) string {
	e := n.e
	out := k.kubectl(nil, "get", "pods", "-n", "csi-gateway", "-l", "app.kubernetes.io/component="+component, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {range .status.containerStatuses[?(@.name=="csi-gateway")]}{.containerID}{end}{"\n"}{end}`)
	f := strings.Fields(out)
	if len(f) != 2 || !strings.HasPrefix(f[1], "containerd://") {
		e.t.Fatalf("the %s pod's gateway container: %q", component, out)
	}
	if out, err := n.ctr("tasks", "kill", "-s", "SIGKILL", strings.TrimPrefix(f[1], "containerd://")); err != nil {
		e.t.Fatalf("kill the %s pod's gateway: %v\n%s", component, err, out)
	}
	return f[0]
}

// gatewayRestarts is how often kubelet restarted a pod's csi-gateway container.
func gatewayRestarts(k *kube, pod string) string {
	out, _ := k.try(nil, "get", "pod", pod, "-n", "csi-gateway", "-o", `jsonpath={.status.containerStatuses[?(@.name=="csi-gateway")].restartCount}`)
	return out
}
