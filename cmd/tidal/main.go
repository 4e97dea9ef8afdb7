// Command tidal runs tidal's components: `tidal adapter`, `tidal
// autoscaler`, `tidal autoscale`, `tidal explain`, `tidal rules` and
// `tidal version`.
// Installed as kubectl-tidal it is also a kubectl plugin (`kubectl tidal`).
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on the adapter's /metrics

	"github.com/tidal-autoscaler/tidal/cmd/tidal/app"
)

func main() {
	// The first SIGTERM or SIGINT cancels the context so components shut
	// down cleanly; a second one exits at once.
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(app.NewCommand(ctx)))
}
