package harness_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestMain removes the tidal binary the tests build.
func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }

// TestRemoveTidalBinary: the binary's temporary directory goes away, so
// test runs do not fill the disk with 115 MB copies. It runs after the
// other tests of the package (files run in name order), which reuse the
// binary.
func TestRemoveTidalBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("built binary: %v", err)
	}
	if err := harness.RemoveTidalBinary(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(bin)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveTidalBinary, %s: %v, want it gone", filepath.Dir(bin), err)
	}
	if err := harness.RemoveTidalBinary(); err != nil {
		t.Fatalf("a second RemoveTidalBinary: %v", err)
	}
}
