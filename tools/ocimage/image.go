package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as this uid and gid, "nonroot" as in distroless. The node DaemonSet, whose
// gateway needs root (deploy/helm: node.privileged, or to reach a root driver's socket), sets
// runAsUser: 0 in its securityContext; everything else runs as this user.
const (
	nonRootUID = 65532
	entrypoint = "/csi-gateway"
)

type options struct {
	out, name, version, revision, source, licenses, caBundle string
	created                                                  time.Time
	binaries                                                 []binary
}

type binary struct{ os, arch, path string }

// labels are the OCI annotations every image config and the index carry.
func (o options) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "csi-gateway",
		"org.opencontainers.image.licenses": o.licenses,
		"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.source":   o.source,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// build writes the image index of o's binaries to o.out and returns the index's digest.
func build(o options) (string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range o.binaries {
		img, err := image(o, b)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.os, Architecture: b.arch}},
		})
	}
	idx = mutate.Annotations(idx, o.labels()).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "ocimage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	// containerd names the image it imports by io.containerd.image.name; other tools read the
	// OCI ref.name.
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          o.name,
		"org.opencontainers.image.ref.name": o.name,
	})); err != nil {
		return "", err
	}
	return digest.String(), tarDir(dir, o.out, o.created)
}

// image is the single-platform image of binary b.
func image(o options, b binary) (v1.Image, error) {
	files, err := rootFiles(o, b)
	if err != nil {
		return nil, err
	}
	layerTar, err := tarFiles(files, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "ocimage: " + filepath.Base(b.path) + " as " + entrypoint,
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = b.os, b.arch, v1.Time{Time: o.created}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRootUID, nonRootUID),
		Entrypoint: []string{entrypoint},
		Cmd:        []string{"serve"},
		// CSI_ENDPOINT (the spec's variable) sets the first listener, as in deploy/Dockerfile.
		Env:        []string{"CSI_ENDPOINT=unix:///csi/csi.sock", "PATH=/"},
		WorkingDir: "/",
		Labels:     o.labels(),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.labels()).(v1.Image), nil
}

// file is one entry of the image's only layer.
type file struct {
	name string
	mode int64
	body []byte // nil for a directory
}

// rootFiles is the image's file system: the binary, /etc/passwd and /etc/group naming root
// and the non-root user, /tmp, and the CA bundle when there is one.
func rootFiles(o options, b binary) ([]file, error) {
	bin, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	files := []file{
		{name: "csi-gateway", mode: 0o755, body: bin},
		{name: "etc", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootUID, nonRootUID))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootUID))},
		{name: "tmp", mode: 0o1777},
	}
	if o.caBundle != "" {
		ca, err := os.ReadFile(o.caBundle)
		if err != nil {
			return nil, fmt.Errorf("-ca-bundle: %w", err)
		}
		for _, d := range []string{"etc/ssl", "etc/ssl/certs"} {
			files = append(files, file{name: d, mode: 0o755})
		}
		files = append(files, file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

// tarFiles is a gzipped tar of files.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := writeTar(zw, files, mtime); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the tree under dir (an OCI layout) to the tar file out.
func tarDir(dir, out string, mtime time.Time) error {
	var files []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files = append(files, file{name: filepath.ToSlash(rel), mode: 0o755})
			return nil
		}
		body, err := os.ReadFile(p)
		files = append(files, file{name: filepath.ToSlash(rel), mode: 0o644, body: body})
		return err
	})
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := writeTar(f, files, mtime); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeTar writes files as a tar stream, in their order, owned by root, every time stamp
// mtime: the same inputs give the same bytes.
func writeTar(w io.Writer, files []file, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.body == nil {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, f.name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	return tw.Close()
}
