package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tinyBinaries builds a small static program for linux/amd64 and
// linux/arm64 (a stand-in for tidal: the layout's shape does not depend on
// the binary; test/image checks the image of the real one).
func tinyBinaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\"tidal\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, arch, "tidal")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", arch, err, b)
		}
		bins["linux/"+arch] = out
	}
	return bins
}

func caBundle(t *testing.T) string {
	t.Helper()
	// Any PEM certificate block: the image copies the bundle as it is.
	path := filepath.Join(t.TempDir(), "ca.crt")
	pem := "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(path, []byte(pem), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRun: make image's command writes the layout with a two-platform
// index and a tarball per platform, prints their digests, and writes the
// same digests again from the same inputs; -created defaults to
// SOURCE_DATE_EPOCH.
func TestRun(t *testing.T) {
	bins := tinyBinaries(t)
	ca := caBundle(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	runOnce := func() (string, string) {
		out := t.TempDir()
		var stdout bytes.Buffer
		err := run([]string{
			"-out", out, "-ca", ca, "-version", "v9.9.9", "-revision", "abc",
			"-binary", "linux/amd64=" + bins["linux/amd64"],
			"-binary", "linux/arm64=" + bins["linux/arm64"],
		}, &stdout, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		return out, stdout.String()
	}
	out, printed := runOnce()
	_, again := runOnce()
	// The printed paths differ (two temp dirs); the digests may not.
	digests := regexp.MustCompile(`sha256:[0-9a-f]{64}|\(sha256 of the file [0-9a-f]{64}\)`)
	if a, b := digests.FindAllString(printed, -1), digests.FindAllString(again, -1); len(a) != 5 || strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("two runs printed digests\n%v\nand\n%v\nwant the same 5 (2 images, 2 files, the index)", a, b)
	}
	t.Logf("printed:\n%s", printed)

	lp, err := layout.FromPath(filepath.Join(out, "oci"))
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
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v9.9.9" {
		t.Fatalf("index.json %+v: want one index named v9.9.9", tm.Manifests)
	}
	if !strings.Contains(printed, tm.Manifests[0].Digest.String()) {
		t.Errorf("the index digest %s is not printed:\n%s", tm.Manifests[0].Digest, printed)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s without a platform", d.Digest)
		}
		p := d.Platform.String()
		platforms = append(platforms, p)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.Platform().String(); got != p {
			t.Errorf("image %s: config platform %s, index says %s", d.Digest, got, p)
		}
		if got := cf.Created.Time.Unix(); got != 1700000000 {
			t.Errorf("%s: created %d, want SOURCE_DATE_EPOCH 1700000000", p, got)
		}
		file := filepath.Join(out, "tidal-v9.9.9-"+d.Platform.Architecture+".tar")
		ti, err := tarball.ImageFromPath(file, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		checkSameConfig(t, file, ti, img)
	}
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64" {
		t.Errorf("index platforms %s, want linux/amd64 linux/arm64", got)
	}
}

func checkSameConfig(t *testing.T, file string, a, b v1.Image) {
	t.Helper()
	ca, err := a.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if ca != cb {
		t.Errorf("%s: config %s, the layout's image has %s", file, ca, cb)
	}
}

func TestRunFlags(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	for _, args := range [][]string{
		{"-version", "v1", "-revision", "a", "-created", "1"},
		{"-version", "v1", "-revision", "a", "-binary", "linux/amd64=x"},
		{"-version", "v1", "-revision", "a", "-created", "yesterday", "-binary", "linux/amd64=x"},
		{"-binary", "linux"},
		{"-binary", "linux/amd64="},
	} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
