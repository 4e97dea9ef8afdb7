// Package app holds the `tidal rules` command: tooling for rule files.
package app

import (
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

A warning ("file:line:col: warning: ...") is a rule prometheus-adapter
loads but cannot answer: the file loads (exit status 0) and the adapter
leaves that rule, or its namespaced resources, out.

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
		if len(probs.Errors()) > 0 {
			res.BadFiles++
			res.Problems = append(res.Problems, probs...)
			continue
		}
		fmt.Fprintf(out, "%s: ok: %s\n", file, summary(cfg, len(probs)))
	}
	if len(res.Problems) > 0 {
		return res
	}
	return nil
}

func checkFile(stdin io.Reader, file string) (*config.Config, config.Problems) {
	name, data, err := read(stdin, file)
	if err != nil {
		return nil, config.Problems{{File: file, Message: err.Error()}}
	}
	// The adapter loads rule files through the same function, so both
	// report the same problems; offline here (nil mapper).
	return naming.ParseAndCheck(name, data, nil)
}

// read returns the content of file ("-" for stdin) and the name its
// problems carry.
func read(stdin io.Reader, file string) (string, []byte, error) {
	if file == "-" {
		data, err := io.ReadAll(io.LimitReader(stdin, config.MaxFileBytes+1))
		if err != nil {
			return "", nil, fmt.Errorf("cannot read standard input: %w", err)
		}
		return "<stdin>", data, nil
	}
	data, err := config.ReadFile(file)
	if err != nil {
		return "", nil, fmt.Errorf("cannot read the rule file: %w", err)
	}
	return file, data, nil
}

func summary(cfg *config.Config, warnings int) string {
	parts := []string{plural(len(cfg.Rules), "rule"), plural(len(cfg.ExternalRules), "external rule")}
	if cfg.ResourceRules != nil {
		parts = append(parts, "resource rules")
	}
	if len(cfg.Backends) > 0 {
		parts = append(parts, plural(len(cfg.Backends), "backend"))
	}
	if warnings > 0 {
		parts = append(parts, plural(warnings, "warning"))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
