// Package app holds the `tidal rules` command: tooling for rule files.
package app

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// NewCommand returns the `rules` command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Work with Tidal rule files (the prometheus-adapter format)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newCheckCommand())
	return cmd
}

func newCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "Validate rule files, printing every problem as file:line:col",
		Long: `Check loads each rule file as the adapter would and prints every problem,
one per line, as file:line:col: what is wrong; what to do. It exits with
status 1 when there is any problem, and prints a summary of each clean file
otherwise. "-" reads a file from standard input.

Resources are checked against the built-in Kubernetes resources, since no
cluster is asked: overrides naming custom resources are accepted.`,
		Args: cobra.MinimumNArgs(1),
		// The problems are the output; the error returned is only a summary
		// for the root command to print (cli.Run does) before exiting 1.
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return check(cmd.InOrStdin(), cmd.OutOrStdout(), args)
		},
	}
}

// ProblemsError is returned by `rules check` when rule files have
// problems. The problems were already printed, one per line; Error is a
// one-line summary for the root command to print before exiting with 1.
type ProblemsError struct {
	Problems config.Problems
	// Files and BadFiles count the files checked and those with problems.
	Files, BadFiles int
}

func (e *ProblemsError) Error() string {
	return fmt.Sprintf("%s in %d of %s checked", plural(len(e.Problems), "problem"), e.BadFiles, plural(e.Files, "file"))
}

func check(stdin io.Reader, out io.Writer, files []string) error {
	res := &ProblemsError{Files: len(files)}
	for _, file := range files {
		cfg, probs := checkFile(stdin, file)
		for _, p := range probs {
			fmt.Fprintln(out, p)
		}
		if len(probs) > 0 {
			res.BadFiles++
			res.Problems = append(res.Problems, probs...)
			continue
		}
		fmt.Fprintf(out, "%s: ok: %s\n", file, summary(cfg))
	}
	if len(res.Problems) > 0 {
		return res
	}
	return nil
}

func checkFile(stdin io.Reader, file string) (*config.Config, config.Problems) {
	var cfg *config.Config
	var err error
	if file == "-" {
		data, rerr := io.ReadAll(stdin)
		if rerr != nil {
			return nil, config.Problems{{File: file, Message: fmt.Sprintf("cannot read standard input: %v", rerr)}}
		}
		cfg, err = config.Parse("<stdin>", data)
	} else {
		cfg, err = config.Load(file)
	}
	var probs config.Problems
	if err != nil && !errors.As(err, &probs) {
		probs = config.Problems{{File: file, Message: err.Error()}}
	}
	if cfg != nil {
		probs = append(probs, naming.Check(cfg, nil)...)
		probs.Sort()
	}
	return cfg, probs
}

func summary(cfg *config.Config) string {
	parts := []string{plural(len(cfg.Rules), "rule"), plural(len(cfg.ExternalRules), "external rule")}
	if cfg.ResourceRules != nil {
		parts = append(parts, "resource rules")
	}
	if len(cfg.Backends) > 0 {
		parts = append(parts, plural(len(cfg.Backends), "backend"))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
