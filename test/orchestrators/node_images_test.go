package orchestrators

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// The images of the node run, all built here and imported into containerd: no registry, no
// container engine. Pods use them with imagePullPolicy: Never.
const (
	pauseImage   = "localhost/pause:e2e"
	busyboxImage = "localhost/busybox:e2e"
	gatewayImage = "localhost/csi-gateway:e2e"
)

// sidecarImages maps the images deploy/kubernetes names to the build-components.sh
// component whose binary the local image holds.
var sidecarImages = map[string]string{
	"registry.k8s.io/sig-storage/csi-provisioner":           "csi-provisioner",
	"registry.k8s.io/sig-storage/csi-attacher":              "csi-attacher",
	"registry.k8s.io/sig-storage/csi-snapshotter":           "csi-snapshotter",
	"registry.k8s.io/sig-storage/csi-resizer":               "csi-resizer",
	"registry.k8s.io/sig-storage/csi-node-driver-registrar": "node-driver-registrar",
}

func localImage(component string) string { return "localhost/" + component + ":e2e" }

// imageFile is one file of an image layer: its content (or, for a symlink, its target).
type imageFile struct {
	path    string
	content []byte
	mode    int64
	link    string
}

// dockerArchive writes a one-layer image as a docker-archive tarball (what `docker save`
// writes and `ctr images import` reads), with the entrypoint given. (The recipe's
// mkimage.sh, in Go.)
func dockerArchive(out, ref string, entrypoint []string, files []imageFile) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		for d := filepath.Dir(f.path); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Slice(dirList, func(i, j int) bool { return strings.Count(dirList[i], "/") < strings.Count(dirList[j], "/") })
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, ModTime: epoch}
		if f.link != "" {
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerID := hex.EncodeToString(layerSum[:])
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/bin:/usr/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
	})
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerID + "/layer.tar"}}})

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	aw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {configName, config}, {layerID + "/layer.tar", layer.Bytes()}} {
		if err := aw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := aw.Write(e.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// binaryImage is an image of one static binary at /NAME, its entrypoint.
func binaryImage(out, ref, name, bin string) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return dockerArchive(out, ref, []string{"/" + name}, []imageFile{{path: "/" + name, content: b, mode: 0o755}})
}

// busyboxApplets are the commands the workload pods run.
var busyboxApplets = []string{"sh", "cat", "echo", "sleep", "df", "ls", "sync", "test", "md5sum", "dd", "mount"}

// loadImages builds every image of the run and imports it into the node's containerd.
func (n *node) loadImages() {
	e := n.e
	dir := filepath.Join(e.work, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	var archives []string
	add := func(name string, err error) {
		if err != nil {
			e.t.Fatalf("image %s: %v", name, err)
		}
		archives = append(archives, filepath.Join(dir, name+".tar"))
	}

	pause := filepath.Join(e.work, "bin", "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", pause, "./testdata/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("go build ./testdata/pause: %v\n%s", err, out)
	}
	add("pause", binaryImage(filepath.Join(dir, "pause.tar"), pauseImage, "pause", pause))

	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		e.t.Fatalf("busybox-static: %v", err)
	}
	files := []imageFile{{path: "/bin/busybox", content: bb, mode: 0o755}, {path: "/tmp/.keep", mode: 0o644}}
	for _, a := range busyboxApplets {
		files = append(files, imageFile{path: "/bin/" + a, link: "busybox"})
	}
	add("busybox", dockerArchive(filepath.Join(dir, "busybox.tar"), busyboxImage, []string{"/bin/sh"}, files))

	for _, c := range slices.Sorted(maps.Values(sidecarImages)) {
		add(c, binaryImage(filepath.Join(dir, c+".tar"), localImage(c), c, e.component(c)))
	}
	add("mock-driver", binaryImage(filepath.Join(dir, "mock-driver.tar"), mockImage, "mock-driver", e.component("mock-driver")))

	// The gateway's image: the project's own build (tools/ocimage, as make image runs it), an
	// OCI layout of the binary under test, amd64 only.
	ocimage := filepath.Join(e.work, "bin", "ocimage")
	cmd = exec.Command("go", "build", "-o", ocimage, "./ocimage")
	cmd.Dir = filepath.Join(e.repo, "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("go build tools/ocimage: %v\n%s", err, out)
	}
	gw := filepath.Join(dir, "csi-gateway.tar")
	e.run(e.work, nil, ocimage, "-out", gw, "-name", gatewayImage, "-version", "e2e", "-ca-bundle", "", "linux/amd64="+e.gateway)
	archives = append(archives, gw)

	for _, a := range archives {
		if out, err := n.ctr("images", "import", "--no-unpack", a); err != nil {
			e.t.Fatalf("ctr images import %s: %v\n%s", filepath.Base(a), err, out)
		}
	}
	out, _ := n.ctr("images", "ls", "-q")
	for _, want := range append([]string{pauseImage, busyboxImage, gatewayImage, mockImage}, localImages()...) {
		if !strings.Contains(out, want) {
			e.t.Fatalf("containerd lacks %s after the import; it has:\n%s", want, out)
		}
	}
	e.t.Logf("images imported: %s", strings.Join(strings.Fields(out), " "))
}

func localImages() []string {
	var out []string
	for _, c := range slices.Sorted(maps.Values(sidecarImages)) {
		out = append(out, localImage(c))
	}
	return out
}
