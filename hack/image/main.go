// Command image builds Tidal's container image without a container engine
// (make image): one image per platform from a static tidal binary and a CA
// bundle (internal/ociimage), written as
//
//	<out>/oci/                          an OCI image layout: index.json holds the
//	                                    multi-platform index, ref.name=<version>
//	<out>/tidal-<version>-<arch>.tar    a `docker load` tarball per platform,
//	                                    tagged -tag (tidal:<version>)
//
// and prints the digests. The image has no base image: nothing is pulled,
// and the same binaries, bundle and flags give the same digests.
//
//	go run ./hack/image -version v0.1.0 -revision $(git rev-parse HEAD) \
//	  -created $(git log -1 --format=%ct) \
//	  -binary linux/amd64=_output/image/bin/linux_amd64/tidal \
//	  -binary linux/arm64=_output/image/bin/linux_arm64/tidal
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tidal-autoscaler/tidal/internal/ociimage"
)

// binaries is the repeated -binary os/arch=path flag.
type binaries []struct {
	platform v1.Platform
	path     string
}

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(s string) error {
	plat, file, ok := strings.Cut(s, "=")
	if !ok || file == "" {
		return errors.New("want os/arch=path")
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return err
	}
	if p.OS == "" || p.Architecture == "" {
		return fmt.Errorf("platform %q: want os/arch", plat)
	}
	*b = append(*b, struct {
		platform v1.Platform
		path     string
	}{*p, file})
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bins binaries
	fs.Var(&bins, "binary", "os/arch=path of a static tidal binary for that platform (repeat per platform)")
	out := fs.String("out", "_output/image", "output directory: the OCI layout goes to <out>/oci, the tarballs next to it")
	ca := fs.String("ca", "/etc/ssl/certs/ca-certificates.crt", "the PEM CA bundle to ship at "+ociimage.CABundlePath)
	version := fs.String("version", "", "org.opencontainers.image.version, the layout's ref.name and the tarballs' tag")
	revision := fs.String("revision", "", "org.opencontainers.image.revision: the commit")
	created := fs.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time in Unix seconds (default $SOURCE_DATE_EPOCH): the commit time makes the image reproducible")
	tag := fs.String("tag", "", "the tarballs' tag (default tidal:<version>)")
	source := fs.String("source", ociimage.DefaultSource, "org.opencontainers.image.source")
	licenses := fs.String("licenses", "", "org.opencontainers.image.licenses (SPDX); left out when empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(bins) == 0 {
		return errors.New("no -binary os/arch=path given")
	}
	if *version == "" || *revision == "" || *created == "" {
		return errors.New("-version, -revision and -created (or SOURCE_DATE_EPOCH) are required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: want Unix seconds: %w", *created, err)
	}
	if *tag == "" {
		*tag = "tidal:" + *version
	}

	var images []v1.Image
	for _, b := range bins {
		img, err := ociimage.Build(ociimage.Options{
			Binary:   b.path,
			CABundle: *ca,
			Platform: b.platform,
			Version:  *version,
			Revision: *revision,
			Created:  time.Unix(secs, 0).UTC(),
			Source:   *source,
			Licenses: *licenses,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", b.platform.String(), err)
		}
		images = append(images, img)
	}
	idx, err := ociimage.Index(images...)
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(*out, "oci")
	if err := ociimage.WriteLayout(layoutDir, idx, *version); err != nil {
		return err
	}
	for i, img := range images {
		p := bins[i].platform
		arch := strings.Join(append([]string{p.Architecture}, nonEmpty(p.Variant)...), "-")
		file := filepath.Join(*out, fmt.Sprintf("tidal-%s-%s.tar", *version, arch))
		if err := ociimage.WriteTarball(file, *tag, img); err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		sum, err := fileSHA256(file)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "image %-12s %s  %s (sha256 of the file %s)\n", p.String(), d, file, sum)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "index %-12s %s  %s (ref.name %s)\n", "", d, layoutDir, *version)
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
