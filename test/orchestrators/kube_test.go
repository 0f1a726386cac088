package orchestrators

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kube is a Kubernetes control plane on loopback: etcd, kube-apiserver and
// kube-controller-manager (its persistent-volume controllers only), with no kubelet. Its
// PKI is minted here: a CA, the apiserver's serving certificate for 127.0.0.1, an admin
// client certificate in system:masters, and the service-account signing key.
type kube struct {
	e          *env
	dir        string
	kubeconfig string // admin
	server     string
	ca         *x509.Certificate
	caKey      *ecdsa.PrivateKey

	seenConfigs map[[32]byte]bool // gateway configurations already started (checkConfigs)
}

func (e *env) startKube() *kube {
	e.t.Helper()
	return e.startKubeWith(kubeOptions{
		controllers: "persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller",
	})
}

// kubeOptions are what a control plane for a real node (node_test.go) adds to the default.
type kubeOptions struct {
	controllers   string   // kube-controller-manager's --controllers
	apiserverArgs []string // more flags of kube-apiserver
	kcmArgs       []string // more flags of kube-controller-manager
}

func (e *env) startKubeWith(o kubeOptions) *kube {
	e.t.Helper()
	k := &kube{e: e, dir: filepath.Join(e.work, "kube")}
	pki := filepath.Join(k.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		e.t.Fatal(err)
	}
	ca, caKey := k.mintCA(pki)
	k.ca, k.caKey = ca, caKey
	k.mintCert(pki, "apiserver", ca, caKey, pkix.Name{CommonName: "kube-apiserver"}, true)
	k.mintCert(pki, "admin", ca, caKey, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, false)
	k.mintSAKey(pki)

	etcdClient, etcdPeer := e.freePort(), e.freePort()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd := e.start("etcd", nil, e.component("etcd"), "--data-dir", filepath.Join(k.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL)

	port := e.freePort()
	k.server = fmt.Sprintf("https://127.0.0.1:%d", port)
	apiserver := e.start("kube-apiserver", nil, e.component("kube-apiserver"), append([]string{
		"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true", "--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none"}, o.apiserverArgs...)...)

	k.kubeconfig = k.writeKubeconfig("admin", fmt.Sprintf("client-certificate: %s\nclient-key: %s",
		filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key")))
	e.eventually(90*time.Second, "kube-apiserver /readyz", func() (bool, string) {
		for _, p := range []*proc{etcd, apiserver} {
			if done, err := p.exited(); done {
				e.t.Fatalf("%s exited: %v\n%s", p.name, err, p.tail(30))
			}
		}
		out, err := k.try(nil, "get", "--raw", "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok", out
	})
	e.start("kube-controller-manager", nil, e.component("kube-controller-manager"), append([]string{
		"--kubeconfig=" + k.kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", e.freePort()), "--controllers=" + o.controllers,
		"--use-service-account-credentials=false"}, o.kcmArgs...)...)
	return k
}

// writeKubeconfig writes a kubeconfig for the control plane with the given user fields
// (YAML lines).
func (k *kube) writeKubeconfig(name, user string) string {
	user = strings.ReplaceAll(user, "\n", "\n      ")
	return k.e.write(filepath.Join("kube", name+".kubeconfig"), fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: %s
    user:
      %s
contexts:
  - name: e2e
    context: {cluster: e2e, user: %s}
current-context: e2e
`, k.server, filepath.Join(k.dir, "pki", "ca.crt"), name, user, name))
}

func (k *kube) kubectl(stdin []byte, args ...string) string {
	k.e.t.Helper()
	return k.e.run(k.e.work, stdin, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

func (k *kube) try(stdin []byte, args ...string) (string, error) {
	return k.e.try(k.e.work, stdin, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

// get returns an object as JSON, or nil when it does not exist.
func (k *kube) get(args ...string) map[string]any {
	k.e.t.Helper()
	out, err := k.try(nil, append([]string{"get", "-o", "json", "--ignore-not-found"}, args...)...)
	if err != nil {
		k.e.t.Fatalf("kubectl get %v: %v\n%s", args, err, out)
	}
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		k.e.t.Fatalf("kubectl get %v: %v", args, err)
	}
	return m
}

// field digs into a JSON object by keys; "" when missing.
func field(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func (k *kube) mintCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "csi-gateway e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		k.e.t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	k.writePEM(dir, "ca.crt", "CERTIFICATE", der)
	return cert, key
}

func (k *kube) mintCert(dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, subject pkix.Name, server bool) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		k.e.t.Fatal(err)
	}
	k.writePEM(dir, name+".crt", "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	k.writePEM(dir, name+".key", "EC PRIVATE KEY", kb)
}

func (k *kube) mintSAKey(dir string) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		k.e.t.Fatal(err)
	}
	k.writePEM(dir, "sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	k.writePEM(dir, "sa.pub", "PUBLIC KEY", pub)
}

func (k *kube) writePEM(dir, name, typ string, der []byte) {
	if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		k.e.t.Fatal(err)
	}
}
