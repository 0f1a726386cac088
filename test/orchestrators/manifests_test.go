package orchestrators

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// overlays lists every kustomization (not component) under deploy/kubernetes.
func (e *env) overlays() []string {
	e.t.Helper()
	var dirs []string
	root := filepath.Join(e.repo, "deploy", "kubernetes")
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), "\nkind: Component") {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs
}

// object is what the checks read of an object the API server returned.
type object struct {
	Kind     string                `json:"kind"`
	Metadata struct{ Name string } `json:"metadata"`
	Data     map[string]string     `json:"data"`
}

// dryRun hands rendered manifests to kube-apiserver as a server-side dry run with strict
// field validation, and returns the objects it accepted, as it would have stored them.
func (k *kube) dryRun(what string, manifests string) []object {
	k.e.t.Helper()
	out, err := k.try([]byte(manifests), "apply", "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-")
	if err != nil {
		k.e.t.Errorf("%s: the API server refused it: %v\n%s", what, err, out)
		return nil
	}
	var list struct {
		object
		Items []object `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		k.e.t.Errorf("%s: %v", what, err)
		return nil
	}
	objs := list.Items
	if list.Kind != "List" {
		objs = []object{list.object}
	}
	if len(objs) == 0 {
		k.e.t.Errorf("%s: no object accepted:\n%s", what, out)
	}
	return objs
}

// testManifests renders every kustomize overlay (and the node-mounts component on the bridge),
// and the Helm chart with its default values and each ci/*.yaml, and dry-runs each on the
// server. cert-manager's and the Prometheus Operator's CRDs are installed first (really), so
// Certificates and PodMonitors are checked against their real schema; the namespaces the
// manifests use are created.
func (k *kube) testManifests() {
	e := k.e
	e.t.Helper()
	for _, crds := range []string{e.component("cert-manager-crds"), e.component("prometheus-operator-crds")} {
		k.kubectl(nil, "apply", "--server-side", "-f", crds)
	}
	k.kubectl(nil, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io",
		"crd/podmonitors.monitoring.coreos.com", "crd/servicemonitors.monitoring.coreos.com")
	for _, ns := range []string{"csi-gateway", "example-csi-driver"} {
		k.kubectl(nil, "create", "namespace", ns)
	}
	// The node-mounts component applied to the bridge, from a kustomization of our own.
	withMounts := filepath.Join(e.work, "kustomize", "bridge-node-mounts")
	if err := os.MkdirAll(withMounts, 0o755); err != nil {
		e.t.Fatal(err)
	}
	rel := func(p string) string { r, _ := filepath.Rel(withMounts, filepath.Join(e.repo, p)); return r }
	e.write("kustomize/bridge-node-mounts/kustomization.yaml",
		"resources: ["+rel("deploy/kubernetes/bridge")+"]\ncomponents: ["+rel("deploy/kubernetes/components/node-mounts")+"]\n")

	total, configs := 0, 0
	for _, dir := range append(e.overlays(), withMounts) {
		name, _ := filepath.Rel(e.repo, dir)
		if strings.HasPrefix(name, "..") {
			name = "deploy/kubernetes/bridge + components/node-mounts"
		}
		out, err := e.try(e.repo, nil, "kubectl", "kustomize", dir)
		if err != nil {
			e.t.Errorf("kubectl kustomize %s: %v\n%s", name, err, out)
			continue
		}
		objs := k.dryRun(name, out)
		e.t.Logf("server-side dry run: %-60s %2d objects accepted", name, len(objs))
		total += len(objs)
		configs += k.checkConfigs(name, objs)
	}
	helm := e.component("helm")
	chart := filepath.Join(e.repo, "deploy", "helm", "csi-gateway")
	values, _ := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	for _, v := range append([]string{""}, values...) {
		args := []string{"template", "e2e", chart, "--namespace", "csi-gateway"}
		name := "helm template (default values)"
		if v != "" {
			args = append(args, "-f", v)
			name = "helm template -f ci/" + filepath.Base(v)
		}
		out, err := e.try(e.repo, nil, helm, args...)
		if err != nil {
			e.t.Errorf("%s: %v\n%s", name, err, out)
			continue
		}
		objs := k.dryRun(name, out)
		e.t.Logf("server-side dry run: %-60s %2d objects accepted", name, len(objs))
		total += len(objs)
		configs += k.checkConfigs(name, objs)
	}
	e.t.Logf("server-side dry run: %d objects accepted in all", total)
	e.t.Logf("gateway configurations: %d distinct ones rendered, each started by the real csi-gateway", configs)
}

// checkConfigs starts the real gateway on every gateway configuration (a ConfigMap's
// config.yaml) in rendered manifests it has not seen yet, with the paths the pods mount
// moved into the work directory and the certificates, CA and token they name minted for
// the run, and requires it to reach "gateway ready". A key the gateway does not know, a
// value it refuses or a file it cannot use fails here. It returns how many it started.
func (k *kube) checkConfigs(what string, objs []object) int {
	e := k.e
	e.t.Helper()
	started := 0
	for _, it := range objs {
		cfg, ok := it.Data["config.yaml"]
		if it.Kind != "ConfigMap" || !ok {
			continue
		}
		sum := sha256.Sum256([]byte(cfg))
		if k.seenConfigs == nil {
			k.seenConfigs = map[[32]byte]bool{}
		}
		if k.seenConfigs[sum] {
			continue
		}
		k.seenConfigs[sum] = true
		started++
		k.startConfig(fmt.Sprintf("%s: ConfigMap %s", what, it.Metadata.Name), cfg, len(k.seenConfigs))
	}
	return started
}

func (k *kube) startConfig(what, cfg string, n int) {
	e := k.e
	e.t.Helper()
	dir := filepath.Join(e.work, "cfg", strconv.Itoa(n))
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{"tls", "central-tls", "etcd-tls", "token-key", "appliance-tls", "appliance-credentials", "s", "t", "n", "var"} {
		os.MkdirAll(filepath.Join(etc, d), 0o755)
	}
	for _, d := range []string{"tls", "central-tls", "etcd-tls"} {
		k.mintCert(filepath.Join(etc, d), "tls", k.ca, k.caKey, pkix.Name{CommonName: "csi-gateway-" + d}, d == "tls")
		copyFile(filepath.Join(k.dir, "pki", "ca.crt"), filepath.Join(etc, d, "ca.crt"))
	}
	copyFile(filepath.Join(k.dir, "pki", "ca.crt"), filepath.Join(etc, "appliance-tls", "ca.crt"))
	os.WriteFile(filepath.Join(etc, "appliance-credentials", "token"), []byte("e2e-token"), 0o600)
	os.WriteFile(filepath.Join(etc, "token-key", "token.key"), []byte(strings.Repeat("e2e0", 16)), 0o600)
	r := strings.NewReplacer(
		"/etc/csi-gateway/", etc+"/",
		"/var/lib/csi-gateway", filepath.Join(etc, "var"),
		"unix:///csi/", "unix://"+filepath.Join(etc, "s")+"/",
		"unix:///tap-driver/", "unix://"+filepath.Join(etc, "t")+"/",
		"unix:///csi-node/", "unix://"+filepath.Join(etc, "n")+"/",
		"0.0.0.0:9808", "127.0.0.1:0",
		"0.0.0.0:9818", "127.0.0.1:0",
		"tcp://0.0.0.0:9443", "tcp://127.0.0.1:0",
	)
	// The central's etcd members are out of reach here (loopback only): a closed port on
	// loopback instead. The gateway does not wait for etcd to start; its tenants' calls would
	// be UNAVAILABLE naming etcd.
	cfg = etcdEndpoint.ReplaceAllString(r.Replace(cfg), "https://127.0.0.1:9")
	file := filepath.Join(dir, "config.yaml")
	os.WriteFile(file, []byte(cfg), 0o600)
	cmd := exec.Command(e.gateway, "serve", "--config", file)
	cmd.Env = append(os.Environ(), "CSI_ENDPOINT=")
	var buf syncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case err := <-done:
			e.t.Errorf("%s: the gateway refused it (%v):\n%s", what, err, buf.String())
			return
		case <-deadline:
			cmd.Process.Kill()
			<-done
			e.t.Errorf("%s: the gateway did not get ready in 20 s:\n%s", what, buf.String())
			return
		case <-time.After(100 * time.Millisecond):
		}
		if strings.Contains(buf.String(), `"msg":"gateway ready"`) {
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
			e.t.Logf("gateway configuration accepted: %s", what)
			return
		}
	}
}

// etcdEndpoint matches the etcd client URLs of a rendered central configuration.
var etcdEndpoint = regexp.MustCompile(`https://[A-Za-z0-9.-]+:2379`)

func copyFile(from, to string) {
	b, _ := os.ReadFile(from)
	os.WriteFile(to, b, 0o600)
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
