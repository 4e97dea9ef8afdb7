// Package kubeconfig loads the client configuration tidal's components use
// to reach the cluster, the same way for every component.
package kubeconfig

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tidal-autoscaler/tidal/internal/version"
)

// Load reads the kubeconfig at path, or the in-cluster configuration when
// path is empty, and names component in the user agent. Errors tell the
// user about the --kubeconfig flag.
func Load(path, component string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %q: %w", path, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("not running in a cluster and --kubeconfig is empty: pass --kubeconfig to point %s at a cluster", component)
		}
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (or pass --kubeconfig): %w", err)
		}
	}
	cfg.UserAgent = fmt.Sprintf("%s/%s", component, version.Get().Version)
	return cfg, nil
}
