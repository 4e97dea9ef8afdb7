package ociimage

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout replaces dir with an OCI image layout whose index.json holds
// one entry, idx, annotated org.opencontainers.image.ref.name=refName: what
// `crane push dir <ref>` pushes and `skopeo copy --all oci:dir:<refName>`
// copies.
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{LabelRefName: refName}))
}

// WriteTarball writes img to file as a `docker load` tarball tagged tag
// (e.g. tidal:v0.1.0): one platform's image, config and layers with a
// manifest.json. Push the layout rather than this file; it holds every
// platform and the OCI manifests as built.
func WriteTarball(file, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	return tarball.WriteToFile(file, t, img)
}
