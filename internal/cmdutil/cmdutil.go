// Package cmdutil holds the command-line plumbing shared by tidal's
// component commands, so each one prints its flags the same way the
// Kubernetes components do.
package cmdutil

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
)

// AddFlagSections adds the "global" section (--help and the klog flags not
// covered by a LoggingConfiguration) to nfs, registers every section on cmd
// and makes --help and usage print the flags grouped by section.
//
// Components that call this must add their LoggingConfiguration flags to a
// section themselves (logsapi.AddFlags), as kube-controller-manager does.
func AddFlagSections(cmd *cobra.Command, nfs *cliflag.NamedFlagSets) {
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	fs := cmd.Flags()
	for _, name := range nfs.Order {
		fs.AddFlagSet(nfs.FlagSets[name])
	}
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, TerminalWidth(cmd.OutOrStdout()))
}

// TerminalWidth returns the width of the terminal behind w, or 0 (do not
// wrap) when w is not a terminal.
func TerminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// CheckFile reports when flag names a file that cannot be read. An empty
// path is fine: required flags are checked by their owners.
func CheckFile(flag, path string) []error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", flag, err)}
	}
	if fi.IsDir() {
		return []error{fmt.Errorf("%s %q is a directory, want a file", flag, path)}
	}
	return nil
}
