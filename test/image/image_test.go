// Package image tests the image `make image` builds (internal/ociimage,
// hack/image) from a real tidal binary built as make image builds it
// (CGO_ENABLED=0), for the host's architecture: the image is
// written as an OCI layout and a docker load tarball, read back, and
// checked file by file. No container engine, registry or harness server is
// involved.
//
// Run: go test ./test/image/
package image

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tidal-autoscaler/tidal/internal/ociimage"
)

const (
	version  = "v1.2.3-imagetest"
	revision = "0123456789abcdef0123456789abcdef01234567"
)

var created = time.Unix(1700000000, 0).UTC()

func platform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// tidalBinary builds ./cmd/tidal for linux/GOARCH as make image does, once
// per test binary, but without -trimpath: make test compiles lint and the
// e2e tests with CGO_ENABLED=0 too, and -trimpath alone would compile every
// package again (the image's reproducibility is checked from one binary).
func tidalBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "tidal-image-test-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build",
			"-ldflags", "-s -w -X github.com/tidal-autoscaler/tidal/internal/version.Version="+version,
			"-o", filepath.Join(buildDir, "tidal"), "./cmd/tidal")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build ./cmd/tidal: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "tidal")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// caBundle writes a PEM bundle of one self-signed certificate: the test
// does not depend on the machine's CA bundle.
func caBundle(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "image test CA"},
		NotBefore: created, NotAfter: created.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type built struct {
	index   v1.Hash
	image   v1.Hash
	layout  string
	tarball string
	tarSum  [sha256.Size]byte
}

// build builds the image of opts and writes it as make image does.
func build(t *testing.T, opts ociimage.Options) built {
	t.Helper()
	img, err := ociimage.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ociimage.Index(img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := built{layout: filepath.Join(dir, "oci"), tarball: filepath.Join(dir, "tidal-"+version+"-"+runtime.GOARCH+".tar")}
	if err := ociimage.WriteLayout(b.layout, idx, version); err != nil {
		t.Fatal(err)
	}
	if err := ociimage.WriteTarball(b.tarball, "tidal:"+version, img); err != nil {
		t.Fatal(err)
	}
	if b.index, err = idx.Digest(); err != nil {
		t.Fatal(err)
	}
	if b.image, err = img.Digest(); err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(b.tarball)
	if err != nil {
		t.Fatal(err)
	}
	b.tarSum = sha256.Sum256(tb)
	return b
}

// TestImage: the image of a real tidal binary, read back from the OCI
// layout, runs the static binary as a numeric non-root user, carries the
// labels it was given, and holds the binary and the CA bundle and nothing
// else; the same inputs give the same digests and the same tarball.
func TestImage(t *testing.T) {
	bin := tidalBinary(t)
	opts := ociimage.Options{
		Binary: bin, CABundle: caBundle(t), Platform: platform(),
		Version: version, Revision: revision, Created: created,
	}
	first, second := build(t, opts), build(t, opts)
	t.Logf("image %s, index %s", first.image, first.index)
	if first.image != second.image || first.index != second.index {
		t.Errorf("two builds of the same inputs: image %s and %s, index %s and %s", first.image, second.image, first.index, second.index)
	}
	if first.tarSum != second.tarSum {
		t.Errorf("two builds of the same inputs wrote different tarballs (sha256 %x and %x)", first.tarSum, second.tarSum)
	}

	img := readLayout(t, first.layout, first.index, first.image)
	checkConfig(t, img)
	checkFiles(t, img, opts)
	checkTarball(t, first.tarball, img)

	// Another input, another digest: the labels are part of the image.
	other := opts
	other.Revision = strings.Repeat("f", 40)
	if b := build(t, other); b.image == first.image {
		t.Errorf("another revision gave the same image digest %s", b.image)
	}
}

// readLayout reads the layout's index.json: one entry, the index named by
// ref.name, whose one image is the platform's.
func readLayout(t *testing.T, dir string, wantIndex, wantImage v1.Hash) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want 1 (the multi-platform index)", len(tm.Manifests))
	}
	entry := tm.Manifests[0]
	if entry.MediaType != types.OCIImageIndex || entry.Digest != wantIndex {
		t.Errorf("index.json entry %s %s, want %s %s", entry.MediaType, entry.Digest, types.OCIImageIndex, wantIndex)
	}
	if got := entry.Annotations[ociimage.LabelRefName]; got != version {
		t.Errorf("index.json entry %s = %q, want %q", ociimage.LabelRefName, got, version)
	}
	idx, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the index has %d images, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	want := platform()
	if d.Platform == nil || !d.Platform.Equals(want) {
		t.Errorf("the index's image has platform %v, want %v", d.Platform, want)
	}
	if d.MediaType != types.OCIManifestSchema1 || d.Digest != wantImage {
		t.Errorf("the index's image is %s %s, want %s %s", d.MediaType, d.Digest, types.OCIManifestSchema1, wantImage)
	}
	if d.ArtifactType != "" {
		t.Errorf("the index's image has artifactType %q: an image is not an artifact", d.ArtifactType)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s, want %s", m.Config.MediaType, types.OCIConfigJSON)
	}
	if len(m.Layers) != 2 {
		t.Errorf("%d layers, want 2 (the CA bundle, the binary)", len(m.Layers))
	}
	for i, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer %d media type %s, want %s", i, l.MediaType, types.OCILayer)
		}
	}
	return img
}

func checkConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %s, want %s", cf.Created.Time, created)
	}
	for i, h := range cf.History {
		if !h.Created.Time.Equal(created) {
			t.Errorf("history %d created %s, want %s", i, h.Created.Time, created)
		}
	}
	c := cf.Config
	uid, gid, ok := strings.Cut(c.User, ":")
	for what, id := range map[string]string{"user": uid, "group": gid} {
		if n, err := strconv.Atoi(id); !ok || err != nil || n == 0 {
			t.Errorf("User %q: the %s must be a numeric id other than 0 (runAsNonRoot needs a number)", c.User, what)
		}
	}
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532 (the manifests' runAsUser)", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/tidal" {
		t.Errorf("Entrypoint %q, want [/usr/local/bin/tidal]", c.Entrypoint)
	}
	if len(c.Cmd) != 0 {
		t.Errorf("Cmd %q, want none (the manifests give the subcommand as args)", c.Cmd)
	}
	if c.WorkingDir != "/" {
		t.Errorf("WorkingDir %q, want /", c.WorkingDir)
	}
	for _, e := range c.Env {
		if e != "PATH=/usr/local/bin" {
			t.Errorf("Env %q: want at most PATH=/usr/local/bin", c.Env)
		}
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    "tidal",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
		"org.opencontainers.image.source":   "https://github.com/tidal-autoscaler/tidal",
	}
	if !maps.Equal(c.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", c.Labels, wantLabels)
	}
	if len(c.ExposedPorts) != 0 || len(c.Volumes) != 0 || c.StopSignal != "" || c.Healthcheck != nil {
		t.Errorf("unexpected config fields: ports %v, volumes %v, stop signal %q, healthcheck %v", c.ExposedPorts, c.Volumes, c.StopSignal, c.Healthcheck)
	}
}

// checkFiles reads the image's file system (the layers flattened): the
// binary, byte for byte the one given and a static ELF executable, the CA
// bundle, their parent directories, and nothing else; owned by 0:0, with
// the build's time as mtime.
func checkFiles(t *testing.T, img v1.Image, opts ociimage.Options) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	// mutate.Extract cleans the names: no trailing slash on directories.
	wantDirs := map[string]bool{"etc": true, "etc/ssl": true, "etc/ssl/certs": true, "usr": true, "usr/local": true, "usr/local/bin": true}
	wantFiles := map[string]struct {
		mode int64
		src  string
	}{
		"usr/local/bin/tidal":               {0o755, opts.Binary},
		"etc/ssl/certs/ca-certificates.crt": {0o644, opts.CABundle},
	}
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = true
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(created) {
			t.Errorf("%s mtime %s, want %s", h.Name, h.ModTime, created)
		}
		switch {
		case h.Typeflag == tar.TypeDir && wantDirs[h.Name]:
			if h.Mode != 0o755 {
				t.Errorf("%s mode %o, want 755", h.Name, h.Mode)
			}
		case h.Typeflag == tar.TypeReg && wantFiles[h.Name].src != "":
			want := wantFiles[h.Name]
			if h.Mode != want.mode {
				t.Errorf("%s mode %o, want %o", h.Name, h.Mode, want.mode)
			}
			got, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(want.src)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) {
				t.Errorf("%s: %d bytes, not the %d of %s", h.Name, len(got), len(src), want.src)
			}
			if h.Name == "usr/local/bin/tidal" {
				checkStatic(t, got)
			}
		default:
			t.Errorf("unexpected entry %s (type %c): the image holds the binary and the CA bundle only", h.Name, h.Typeflag)
		}
	}
	for name := range wantFiles {
		if !seen[name] {
			t.Errorf("no %s in the image", name)
		}
	}
	for name := range wantDirs {
		if !seen[name] {
			t.Errorf("no directory %s in the image", name)
		}
	}
}

// checkStatic: an ELF executable for GOARCH that loads nothing: no program
// interpreter and no needed shared library (there is no libc in the image).
func checkStatic(t *testing.T, b []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/usr/local/bin/tidal is not an ELF file: %v", err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if want != 0 && f.Machine != want {
		t.Errorf("/usr/local/bin/tidal is for %s, want %s", f.Machine, want)
	}
	if f.Type != elf.ET_EXEC {
		t.Errorf("/usr/local/bin/tidal ELF type %s, want %s (a static non-PIE executable)", f.Type, elf.ET_EXEC)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/usr/local/bin/tidal has a PT_INTERP program header: dynamically linked")
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Error("/usr/local/bin/tidal has a PT_DYNAMIC program header")
		}
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		t.Fatal(err)
	}
	if len(needed) != 0 {
		t.Errorf("/usr/local/bin/tidal needs %v", needed)
	}
}

// checkTarball: the docker load tarball is tagged tidal:<version> and holds
// the image's config and layers.
func checkTarball(t *testing.T, file string, img v1.Image) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"manifest.json": true, cfgName.String(): true}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		want[d.Hex+".tar.gz"] = true
	}
	tr := tar.NewReader(f)
	got := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = true
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "tidal:"+version || m[0].Config != cfgName.String() {
			t.Errorf("manifest.json %+v, want one image tagged tidal:%s with config %s", m, version, cfgName)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("tarball entries %v, want %v", got, want)
	}
}
