// Package app assembles the `tidal` command from the components' commands.
package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"

	adapterapp "github.com/tidal-autoscaler/tidal/adapter/app"
	"github.com/tidal-autoscaler/tidal/adapter/explain"
	autoscalerapp "github.com/tidal-autoscaler/tidal/autoscaler/app"
	"github.com/tidal-autoscaler/tidal/autoscaler/autoscale"
	autoscalerexplain "github.com/tidal-autoscaler/tidal/autoscaler/explain"
	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
	rulesapp "github.com/tidal-autoscaler/tidal/rules/app"
)

// PluginName is the executable name under which kubectl runs tidal as a
// plugin: `kubectl tidal autoscale ...` runs kubectl-tidal autoscale ...
const PluginName = "kubectl-tidal"

// NewCommand returns the root `tidal` command. Long-running subcommands stop
// when ctx is cancelled. Run as kubectl-tidal (os.Args[0]), it is the same
// command, shown in help as `kubectl tidal`.
func NewCommand(ctx context.Context) *cobra.Command {
	return newCommand(ctx, os.Args[0])
}

// displayName is how the root command names itself for the executable
// argv0: "kubectl tidal" when it is kubectl-tidal (kubectl's plugin
// name, with .exe on Windows), else "" (the command's own name, tidal).
func displayName(argv0 string) string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginName {
		return "kubectl tidal"
	}
	return ""
}

func newCommand(ctx context.Context, argv0 string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tidal",
		Short: "Kubernetes autoscaling from Prometheus metrics",
		Long: `tidal autoscales Kubernetes workloads on Prometheus metrics. One binary runs
each component: the metrics adapter (an aggregated API server), the
autoscaler controller, and the rule file tooling.`,
		Args: cobra.NoArgs,
		// Without a subcommand there is nothing to run: show the help.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	// `tidal rules explain` runs the adapter's discovery and rendering, so
	// it is attached here: rules/ does not import adapter/.
	rules := rulesapp.NewCommand()
	rules.AddCommand(explain.NewCommand())
	cmd.AddCommand(
		adapterapp.NewCommand(ctx),
		autoscalerapp.NewCommand(ctx),
		autoscale.NewCommand(),
		autoscalerexplain.NewCommand(),
		rules,
		newVersionCommand(),
	)

	if name := displayName(argv0); name != "" {
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
	}

	// The root's own flags; the components print their own sections. The
	// klog flags (-v, --vmodule) are persistent: they serve the
	// subcommands without a LoggingConfiguration (rules, version), and the
	// components' own logging flags take precedence over them.
	var nfs cliflag.NamedFlagSets
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	logs.AddFlags(nfs.FlagSet("logs"))
	cmd.Flags().AddFlagSet(nfs.FlagSet("global"))
	cmd.PersistentFlags().AddFlagSet(nfs.FlagSet("logs"))
	cols := cmdutil.TerminalWidth(cmd.OutOrStdout())
	// Subcommands without help of their own (rules explain, version)
	// inherit these: they get cobra's, which lists their own flags, not the
	// root's sections.
	defaultUsage, defaultHelp := cmd.UsageFunc(), cmd.HelpFunc()
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		if c != cmd {
			return defaultUsage(c)
		}
		printRootUsage(c, nfs, cols)
		return nil
	})
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c != cmd {
			defaultHelp(c, args)
			return
		}
		fmt.Fprintf(c.OutOrStdout(), "%s\n\n", c.Long)
		printRootUsage(c, nfs, cols)
	})
	return cmd
}

// printRootUsage prints the usage line, the subcommands and the flag
// sections, in the style of cliflag.SetUsageAndHelpFunc (which does not
// list subcommands).
func printRootUsage(cmd *cobra.Command, nfs cliflag.NamedFlagSets, cols int) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Usage:\n  %s [command]\n\nAvailable Commands:\n", cmd.CommandPath())
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			fmt.Fprintf(out, "  %-*s %s\n", cmd.NamePadding(), sub.Name(), sub.Short)
		}
	}
	cliflag.PrintSections(out, nfs, cols)
	fmt.Fprintf(out, "\nUse \"%s [command] --help\" for more information about a command.\n", cmd.CommandPath())
}
