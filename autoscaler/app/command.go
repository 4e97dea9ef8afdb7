// Package app builds the `tidal autoscaler` command: the horizontal pod
// autoscaler controller, with kube-controller-manager's HPA flags and
// leader election.
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

// NewCommand returns the `autoscaler` command. It runs until ctx is
// cancelled.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "autoscaler",
		Short: "Run the horizontal pod autoscaler controller",
		Long: `The tidal autoscaler is a horizontal pod autoscaler controller. It takes the
same tuning flags as kube-controller-manager's HPA controller, and runs one
active replica at a time through leader election.`,
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
