// Package ociimage builds Tidal's container image without a container
// engine and without a base image: the image is assembled FROM nothing (like
// the Dockerfile's scratch stage) with go-containerregistry, out of the
// static tidal binary and a CA bundle, so there is no base image to pin and
// the image is a function of those two files and a few labels.
//
// The build is reproducible: every timestamp (the config's created time,
// the history entries and the files' mtimes) is Options.Created, normally
// the commit's time (SOURCE_DATE_EPOCH), the files are owned by 0:0 with
// fixed modes, and the layers are gzipped by one Go implementation at one
// level. Two builds from the same binary, bundle and options have the same
// digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the files go in the image, and who runs it. The manifests run the
// container as 65532 with runAsNonRoot, which needs a numeric user.
const (
	BinaryPath   = "/usr/local/bin/tidal"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	User         = "65532:65532"
	WorkingDir   = "/"

	// DefaultSource is the org.opencontainers.image.source label.
	DefaultSource = "https://github.com/tidal-autoscaler/tidal"
	// Title is the org.opencontainers.image.title label.
	Title = "tidal"
)

// The OCI annotation keys this package sets as image labels.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelSource   = "org.opencontainers.image.source"
	LabelLicenses = "org.opencontainers.image.licenses"
	// LabelRefName names an image (or index) in an OCI layout's index.json.
	LabelRefName = "org.opencontainers.image.ref.name"
)

// Options are the inputs of one platform's image.
type Options struct {
	// Binary is the path of the tidal binary: a static (CGO_ENABLED=0)
	// ELF executable for Platform.
	Binary string
	// CABundle is the path of the PEM CA bundle copied to CABundlePath
	// (Debian's /etc/ssl/certs/ca-certificates.crt).
	CABundle string
	// Platform is the image's os/architecture; only linux is supported.
	Platform v1.Platform
	// Version and Revision are the version and commit labels.
	Version  string
	Revision string
	// Created is the image's creation time and every file's mtime; use the
	// commit time (SOURCE_DATE_EPOCH) for a reproducible image.
	Created time.Time
	// Source is the source label; DefaultSource when empty.
	Source string
	// Licenses is the SPDX licenses label; left out when empty (the
	// repository declares no license yet).
	Licenses string
}

// Labels returns the image's labels for o.
func Labels(o Options) map[string]string {
	source := o.Source
	if source == "" {
		source = DefaultSource
	}
	l := map[string]string{
		LabelTitle:    Title,
		LabelVersion:  o.Version,
		LabelRevision: o.Revision,
		LabelCreated:  o.Created.UTC().Format(time.RFC3339),
		LabelSource:   source,
	}
	if o.Licenses != "" {
		l[LabelLicenses] = o.Licenses
	}
	return l
}

// Build returns the image for o: two layers, the CA bundle and then the
// binary (the bundle changes less often, so it is the lower layer), each
// with its parent directories (0755, 0:0); the binary is 0755 and the
// bundle 0644, both owned by 0:0. The binary must be a static ELF
// executable for o.Platform, since there is nothing else in the image.
func Build(o Options) (v1.Image, error) {
	if o.Platform.OS != "linux" {
		return nil, fmt.Errorf("platform %s: only linux images are built", o.Platform.String())
	}
	if o.Version == "" || o.Revision == "" {
		return nil, errors.New("version and revision labels are required")
	}
	if o.Created.IsZero() {
		return nil, errors.New("created time is required (SOURCE_DATE_EPOCH)")
	}
	created := o.Created.UTC().Truncate(time.Second)

	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	if err := CheckStaticELF(bytes.NewReader(bin), o.Platform.Architecture); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Binary, err)
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s: not a PEM CA bundle", o.CABundle)
	}

	caLayer, err := fileLayer(CABundlePath, ca, 0o644, created)
	if err != nil {
		return nil, err
	}
	binLayer, err := fileLayer(BinaryPath, bin, 0o755, created)
	if err != nil {
		return nil, err
	}

	cfg := &v1.ConfigFile{
		Architecture: o.Platform.Architecture,
		OS:           o.Platform.OS,
		Variant:      o.Platform.Variant,
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{BinaryPath},
			WorkingDir: WorkingDir,
			// The one variable: a PATH that finds tidal for a
			// `command: [tidal]` override or kubectl debug.
			Env:    []string{"PATH=" + path.Dir(BinaryPath)},
			Labels: Labels(o),
		},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: caLayer, History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "COPY ca-certificates.crt " + CABundlePath,
			Comment:   "internal/ociimage",
		}},
		mutate.Addendum{Layer: binLayer, History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "COPY tidal " + BinaryPath,
			Comment:   "internal/ociimage",
		}},
	)
}

// Index returns the multi-platform index of images, each entry carrying
// its image's platform, in the order given. The entries have no
// artifactType: they are images, not artifacts (go-containerregistry would
// otherwise copy the config's media type there).
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil {
			return nil, errors.New("image without a platform")
		}
		adds = append(adds, mutate.IndexAddendum{Add: notArtifact{img}, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// notArtifact is an image whose index descriptor has no artifactType
// (partial.Descriptor asks ArtifactType before guessing one).
type notArtifact struct{ v1.Image }

func (notArtifact) ArtifactType() (string, error) { return "", nil }

// fileLayer is a gzipped OCI layer holding one file at name, with its
// parent directories, all with mtime t and owner 0:0.
func fileLayer(name string, content []byte, mode int64, t time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	rel := strings.TrimPrefix(name, "/")
	var dirs []string
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: t, Format: tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: int64(len(content)), ModTime: t, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching,
	)
}

// elfMachine maps GOARCH to the ELF machine of its executables.
var elfMachine = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// CheckStaticELF returns an error unless r is an ELF executable for the
// GOARCH arch that needs no dynamic loader: no PT_INTERP program header and
// no DT_NEEDED library. An image FROM nothing has no libc to load.
func CheckStaticELF(r io.ReaderAt, arch string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %s, want an executable", f.Type)
	}
	if want, ok := elfMachine[arch]; !ok {
		return fmt.Errorf("architecture %q: unknown", arch)
	} else if f.Machine != want {
		return fmt.Errorf("ELF machine %s, want %s for %s", f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (PT_INTERP): build with CGO_ENABLED=0")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return err
	}
	if len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v: build with CGO_ENABLED=0", libs)
	}
	return nil
}
