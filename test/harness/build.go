package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// TidalBinary builds ./cmd/tidal once per test process and returns its path.
// Tests run the real binary, flags and all, the way users do.
func TidalBinary(ctx context.Context) (string, error) {
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "tidal-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "tidal")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "./cmd/tidal")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/tidal: %w\n%s", err, out)
		}
	})
	return buildPath, buildErr
}
