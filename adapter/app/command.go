// Package app builds the `tidal adapter` command: an aggregated API server
// that serves custom.metrics.k8s.io, external.metrics.k8s.io and, later,
// metrics.k8s.io from Prometheus.
//
// The flow is the Kubernetes components' one: NewOptions, flags, Validate
// (every error at once), Config, Run.
package app

import (
	"context"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
)

// NewCommand returns the `adapter` command. It serves until ctx is
// cancelled.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "adapter",
		Short: "Serve Kubernetes metrics APIs from Prometheus",
		Long: `The tidal adapter is an aggregated API server. It serves custom.metrics.k8s.io
(v1beta1, v1beta2) and external.metrics.k8s.io (v1beta1) to the horizontal pod
autoscaler, from Prometheus series selected by a rule file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := o.Validate(); len(errs) > 0 {
				return utilerrors.NewAggregate(errs)
			}
			if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			cfg, err := o.Config()
			if err != nil {
				return err
			}
			return cfg.Run(ctx)
		},
	}
	nfs := o.Flags()
	cmdutil.AddFlagSections(cmd, &nfs)
	return cmd
}
