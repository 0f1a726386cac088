// Command ocimage assembles csi-gateway's container image without a container engine or a
// registry: FROM scratch, one layer per platform holding the static binary (and the CA bundle
// and a passwd naming the non-root user), a multi-platform OCI index, written as an OCI image
// layout in a tar file that `ctr images import`, `skopeo copy oci-archive:` and
// `podman load` read. `make image` runs it on `make release`'s binaries.
//
//	ocimage -out dist/csi-gateway-image.tar -name ghcr.io/csi-gateway/csi-gateway:v1.2.3 \
//	  -version v1.2.3 -revision <commit> -source https://github.com/csi-gateway/csi-gateway \
//	  linux/amd64=dist/csi-gateway-linux-amd64 linux/arm64=dist/csi-gateway-linux-arm64
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "the OCI layout tar file to write")
	flag.StringVar(&o.name, "name", "", "the image's reference (repository:tag), recorded in the layout's index")
	flag.StringVar(&o.version, "version", "", "org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	flag.StringVar(&o.source, "source", "", "org.opencontainers.image.source (the repository's URL)")
	flag.StringVar(&o.licenses, "licenses", "Apache-2.0", "org.opencontainers.image.licenses (an SPDX expression)")
	flag.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates copied to the same path in the image (empty: none)")
	flag.Parse()
	if o.out == "" || o.name == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: ocimage -out FILE -name REPO:TAG [-version V -revision C -source URL] OS/ARCH=BINARY...")
		os.Exit(2)
	}
	created, err := sourceDate()
	if err != nil {
		fail(err)
	}
	o.created = created
	for _, arg := range flag.Args() {
		platform, bin, ok := strings.Cut(arg, "=")
		osName, arch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 {
			fail(fmt.Errorf("%q: want OS/ARCH=BINARY, e.g. linux/amd64=dist/csi-gateway-linux-amd64", arg))
		}
		o.binaries = append(o.binaries, binary{os: osName, arch: arch, path: bin})
	}
	digest, err := build(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s: %s, index %s\n", o.out, o.name, digest)
}

// sourceDate is SOURCE_DATE_EPOCH (the reproducible-builds convention) when set, else now.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %v", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ocimage:", err)
	os.Exit(1)
}
