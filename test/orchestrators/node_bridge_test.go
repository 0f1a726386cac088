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

// deployBridge applies the overlay and waits for the controller Deployment and the node
// DaemonSet to run and node-driver-registrar to register the driver with kubelet.
func (n *node) deployBridge(k *kube, app *nodeAppliance) {
	e := n.e
	dir := n.bridgeOverlay(k, app)
	rendered := e.run(e.work, nil, "kubectl", "kustomize", dir)
	if strings.Contains(rendered, "appliance.example.com") {
		e.t.Fatal("the overlay's rendering still names appliance.example.com")
	}
	k.kubectl([]byte(rendered), "apply", "-f", "-")
	start := time.Now()
	e.eventually(4*time.Minute, "the node DaemonSet's pod Ready and the driver in CSINode", func() (bool, string) {
		drivers, _ := k.try(nil, "get", "csinode", nodeName, "-o", "jsonpath={.spec.drivers[*].name}")
		pods, _ := k.try(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide")
		return strings.Contains(drivers, driverName), "csinode drivers: " + drivers + "\n" + pods
	})
	e.t.Logf("CSINode %s lists %s after %s (node-driver-registrar)", nodeName, driverName, time.Since(start).Round(time.Second))
	e.eventually(4*time.Minute, "the controller Deployment available", func() (bool, string) {
		out, _ := k.try(nil, "get", "deployment", "csi-gateway-controller", "-n", "csi-gateway", "-o", "jsonpath={.status.availableReplicas}")
		pods, _ := k.try(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide")
		return out == "1", pods
	})
	e.eventually(2*time.Minute, "the node DaemonSet ready", func() (bool, string) {
		out, _ := k.try(nil, "get", "daemonset", "csi-gateway-node", "-n", "csi-gateway", "-o", "jsonpath={.status.numberReady}")
		return out == "1", out
	})
	e.t.Logf("deploy/kubernetes/bridge running after %s:\n%s\n%s", time.Since(start).Round(time.Second),
		k.kubectl(nil, "get", "pods", "-n", "csi-gateway", "-o", "wide"), k.kubectl(nil, "get", "csinode"))
}

// deleteBridge deletes the overlay's objects and waits until kubelet has stopped their pods,
// the namespace is gone and kubelet has unregistered the driver (node-driver-registrar
// removed its registration socket when it stopped).
func (n *node) deleteBridge(k *kube) {
	e := n.e
	k.kubectl(nil, "delete", "-k", filepath.Join(e.work, "overlay"), "--wait=false")
	e.eventually(3*time.Minute, "the bridge's pods and namespace gone, the driver unregistered", func() (bool, string) {
		pods, err1 := k.try(nil, "get", "pods", "-n", "csi-gateway", "-o", "name")
		ns, err2 := k.try(nil, "get", "namespace", "csi-gateway", "--ignore-not-found", "-o", "name")
		drivers, err3 := k.try(nil, "get", "csinode", nodeName, "-o", "jsonpath={.spec.drivers[*].name}")
		done := err1 == nil && err2 == nil && err3 == nil && strings.TrimSpace(pods+ns+drivers) == ""
		return done, fmt.Sprintf("pods: %q; namespace: %q; csinode drivers: %q", pods, ns, drivers)
	})
}
