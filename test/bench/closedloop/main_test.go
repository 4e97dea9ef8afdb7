package closedloop

import (
	"os"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestMain removes the tidal binary the benchmark builds.
func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }
