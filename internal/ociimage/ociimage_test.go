package ociimage

import (
	"bytes"
	"debug/elf"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestLabels(t *testing.T) {
	o := Options{Version: "v1.0.0", Revision: "abc", Created: time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}
	want := map[string]string{
		LabelTitle:    "tidal",
		LabelVersion:  "v1.0.0",
		LabelRevision: "abc",
		LabelCreated:  "2024-01-02T02:04:05Z",
		LabelSource:   DefaultSource,
	}
	if got := Labels(o); !maps.Equal(got, want) {
		t.Errorf("Labels = %v, want %v (no licenses label when none is given)", got, want)
	}
	o.Licenses, o.Source = "Apache-2.0", "https://example.invalid/tidal"
	want[LabelLicenses], want[LabelSource] = "Apache-2.0", "https://example.invalid/tidal"
	if got := Labels(o); !maps.Equal(got, want) {
		t.Errorf("Labels = %v, want %v", got, want)
	}
}

// dynamicELF returns a dynamically linked executable of the machine, or
// skips.
func dynamicELF(t *testing.T) (string, elf.Machine) {
	t.Helper()
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh", "/usr/bin/env"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return p, f.Machine
			}
		}
	}
	t.Skip("no dynamically linked executable found on this machine")
	return "", 0
}

func TestCheckStaticELF(t *testing.T) {
	if err := CheckStaticELF(strings.NewReader("#!/bin/sh\n"), runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script: %v, want not an ELF executable", err)
	}
	path, machine := dynamicELF(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	arch, other := "amd64", "arm64"
	if machine == elf.EM_AARCH64 {
		arch, other = "arm64", "amd64"
	} else if machine != elf.EM_X86_64 {
		t.Skipf("%s is for %s", path, machine)
	}
	if err := CheckStaticELF(bytes.NewReader(b), arch); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("%s: %v, want dynamically linked", path, err)
	}
	if err := CheckStaticELF(bytes.NewReader(b), other); err == nil || !strings.Contains(err.Error(), "ELF machine") {
		t.Errorf("%s as %s: %v, want the wrong machine", path, other, err)
	}
	if err := CheckStaticELF(bytes.NewReader(b), "mips64"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("%s as mips64: %v, want unknown architecture", path, err)
	}
}

// TestBuildRejects: Build refuses inputs that would give a broken or
// unlabelled image, before reading a layer.
func TestBuildRejects(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "tidal")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := Options{
		Binary: script, CABundle: notPEM, Platform: v1.Platform{OS: "linux", Architecture: "amd64"},
		Version: "v1", Revision: "abc", Created: time.Unix(1, 0),
	}
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"windows":     {func(o *Options) { o.Platform.OS = "windows" }, "only linux"},
		"no version":  {func(o *Options) { o.Version = "" }, "required"},
		"no revision": {func(o *Options) { o.Revision = "" }, "required"},
		"no created":  {func(o *Options) { o.Created = time.Time{} }, "SOURCE_DATE_EPOCH"},
		"no binary":   {func(o *Options) { o.Binary = filepath.Join(dir, "missing") }, "no such file"},
		"script":      {func(*Options) {}, "not an ELF"},
	} {
		o := good
		tc.mutate(&o)
		if _, err := Build(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build = %v, want an error with %q", name, err, tc.want)
		}
	}

	path, machine := dynamicELF(t)
	arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[machine]
	if arch == "" {
		t.Skipf("%s is for %s", path, machine)
	}
	o := good
	o.Binary, o.Platform.Architecture = path, arch
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic binary: Build = %v, want an error naming CGO_ENABLED=0", err)
	}
}
