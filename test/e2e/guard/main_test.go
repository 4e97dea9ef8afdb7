// Package guard tests the other-writer guard and the shadow comparison
// (autoscaler/controller/guard.go) on the real harness, beside the real
// HPA controller of kube-controller-manager.
package guard

import (
	"os"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestMain removes the tidal binary the tests build.
func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }
