package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu   sync.Mutex
	buildDone bool
	buildPath string
	buildErr  error
)

// TidalBinary builds ./cmd/tidal once per process and returns its path.
// Tests run the real binary, flags and all, the way users do. The binary
// (about 115 MB) lives in a temporary directory until RemoveTidalBinary:
// a process that builds it must call that before it exits (RunTests does),
// or every test run leaves a copy behind.
func TidalBinary(ctx context.Context) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDone {
		return buildPath, buildErr
	}
	buildDone = true
	root, err := RepoRoot()
	if err != nil {
		buildErr = err
		return "", err
	}
	dir, err := os.MkdirTemp("", "tidal-bin-")
	if err != nil {
		buildErr = err
		return "", err
	}
	buildPath = filepath.Join(dir, "tidal")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "./cmd/tidal")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build ./cmd/tidal: %w\n%s", err, out)
	}
	return buildPath, buildErr
}

// TidalBinaryAsync starts TidalBinary and returns a function that waits
// for it, so that a test builds tidal while its control plane starts.
// The function may be called more than once.
func TidalBinaryAsync(ctx context.Context) func() (string, error) {
	type built struct {
		bin string
		err error
	}
	c := make(chan built, 1)
	go func() {
		bin, err := TidalBinary(ctx)
		c <- built{bin, err}
	}()
	return sync.OnceValues(func() (string, error) {
		b := <-c
		return b.bin, b.err
	})
}

// RemoveTidalBinary deletes the binary TidalBinary built, if any; a later
// TidalBinary builds it again.
func RemoveTidalBinary() error {
	buildMu.Lock()
	defer buildMu.Unlock()
	path := buildPath
	buildDone, buildPath, buildErr = false, "", nil
	if path == "" {
		return nil
	}
	return os.RemoveAll(filepath.Dir(path))
}

// RunTests runs m and then removes the binary TidalBinary built; a test
// package's TestMain passes its result to os.Exit.
func RunTests(m *testing.M) int {
	code := m.Run()
	if err := RemoveTidalBinary(); err != nil {
		fmt.Fprintf(os.Stderr, "remove the tidal binary: %v\n", err)
	}
	return code
}
