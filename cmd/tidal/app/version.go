package app

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of tidal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			out := cmd.OutOrStdout()
			switch output {
			case "":
				_, err := fmt.Fprintln(out, info.String())
				return err
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(out, string(b))
				return err
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return err
				}
				_, err = out.Write(b)
				return err
			default:
				return fmt.Errorf("--output must be json or yaml (or unset for one line), got %q", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml. Unset prints one line.")
	return cmd
}
