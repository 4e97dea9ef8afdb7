package podselection

import (
	"os"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestMain removes the tidal binary the tests build.
func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }
