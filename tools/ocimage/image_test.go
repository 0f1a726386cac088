package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImage: the tar holds an OCI layout whose index names the image and lists one image per
// platform; each runs the binary of its platform as the non-root user, carries the OCI labels,
// and the same inputs give the same bytes.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	o := options{
		out: filepath.Join(dir, "image.tar"), name: "example.com/csi-gateway:v9.9.9",
		version: "v9.9.9", revision: "0123abc", source: "https://example.com/csi-gateway", licenses: "Apache-2.0",
		created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "bin-"+arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o644); err != nil {
			t.Fatal(err)
		}
		o.binaries = append(o.binaries, binary{os: "linux", arch: arch, path: p})
	}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(o.out); !bytes.Equal(first, again) {
		t.Error("two builds of the same inputs differ")
	}

	root := untar(t, bytes.NewReader(first), filepath.Join(dir, "layout"))
	outer, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(om.Manifests) != 1 || om.Manifests[0].Annotations["io.containerd.image.name"] != o.name {
		t.Fatalf("index.json: %+v; want one index named %s", om.Manifests, o.name)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("%d images in the index, want 2", len(im.Manifests))
	}
	for i, d := range im.Manifests {
		arch := o.binaries[i].arch
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("image %d: platform %+v, want linux/%s", i, d.Platform, arch)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" || cfg.Architecture != arch || cfg.Config.Entrypoint[0] != "/csi-gateway" {
			t.Errorf("linux/%s: user %q, architecture %q, entrypoint %q", arch, cfg.Config.User, cfg.Architecture, cfg.Config.Entrypoint)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.source": o.source, "org.opencontainers.image.version": o.version,
			"org.opencontainers.image.revision": o.revision, "org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.created": "2026-01-02T03:04:05Z",
		} {
			if got := cfg.Config.Labels[k]; got != want {
				t.Errorf("linux/%s: label %s = %q, want %q", arch, k, got, want)
			}
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("linux/%s: %d layers (%v), want 1", arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := untar(t, rc, filepath.Join(dir, "rootfs-"+arch))
		rc.Close()
		bin, err := os.Stat(filepath.Join(files, "csi-gateway"))
		if err != nil || bin.Mode().Perm() != 0o755 {
			t.Fatalf("linux/%s: /csi-gateway: %v %v, want mode 0755", arch, bin, err)
		}
		if body, _ := os.ReadFile(filepath.Join(files, "csi-gateway")); string(body) != "binary for "+arch {
			t.Errorf("linux/%s: /csi-gateway is %q", arch, body)
		}
		if passwd, _ := os.ReadFile(filepath.Join(files, "etc", "passwd")); !bytes.Contains(passwd, []byte("nonroot:x:65532:65532:")) {
			t.Errorf("linux/%s: /etc/passwd does not name uid 65532:\n%s", arch, passwd)
		}
	}
}

// untar extracts a tar stream into dir and returns dir.
func untar(t *testing.T, r io.Reader, dir string) string {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, os.FileMode(h.Mode).Perm()); err != nil {
			t.Fatal(err)
		}
	}
}
