package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// Formats are the values of -o.
var Formats = []string{"text", "yaml", "json"}

// Encode writes r as format: text (Text), yaml or json.
func Encode(w io.Writer, r Report, format string) error {
	switch format {
	case "", "text":
		_, err := io.WriteString(w, Text(r))
		return err
	case "json":
		b, err := json.MarshalIndent(r, "", "    ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("-o/--output=%s: expected one of %s", format, strings.Join(Formats, ", "))
}

// Text is r for a terminal: the object, the replica counts, a table of
// metrics, the result and what limited it, and the conditions.
func Text(r Report) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s/%s\n", r.Kind, r.Namespace, r.Name)
	fmt.Fprintf(&b, "Target:    %s, %d to %d replicas\n", r.Target, r.MinReplicas, r.MaxReplicas)
	fmt.Fprintf(&b, "Replicas:  current %d, desired %d\n", r.CurrentReplicas, r.DesiredReplicas)
	if r.LastScaleTime != nil {
		fmt.Fprintf(&b, "Scaled:    %s\n", r.LastScaleTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "Note:      %s\n", n)
	}

	b.WriteString("\nMetrics")
	if r.Decision != nil {
		fmt.Fprintf(&b, " (decided at %d replicas)", r.Decision.CurrentReplicas)
	}
	b.WriteString(":\n")
	if len(r.Metrics) == 0 {
		b.WriteString("  <none>\n")
	} else {
		// Without a decision there are no proposals: no PROPOSES column.
		header := []string{"METRIC", "CURRENT", "TARGET", "PROPOSES"}
		if r.Decision == nil {
			header = header[:3]
		}
		table(&b, header, func(row func(...string)) {
			for _, m := range r.Metrics {
				cells := []string{m.Name, m.Current, orUnknown(m.Target), proposes(m)}
				row(cells[:len(header)]...)
			}
		})
	}

	b.WriteString("\n")
	if r.Decision == nil {
		fmt.Fprintf(&b, "Result: not available: %s\n", r.Unavailable)
	} else {
		fmt.Fprintf(&b, "Result: %s\n", result(*r.Decision))
	}
	// With no proposal there is nothing a limit could have changed.
	proposed := r.Decision != nil && r.Decision.ProposedReplicas >= 0
	if proposed || len(r.Limits) > 0 {
		b.WriteString("Limited by:")
		if len(r.Limits) == 0 {
			b.WriteString(" nothing: the chosen proposal is the desired count\n")
		} else {
			b.WriteString("\n")
			table(&b, nil, func(row func(...string)) {
				for _, l := range r.Limits {
					msg := l.Message
					if l.From != nil && l.To != nil {
						msg = fmt.Sprintf("%d→%d: %s", *l.From, *l.To, msg)
					}
					row(l.Reason, msg)
				}
			})
		}
	}

	b.WriteString("\nConditions:")
	if len(r.Conditions) == 0 {
		b.WriteString(" <none>\n")
		return b.String()
	}
	b.WriteString("\n")
	table(&b, []string{"TYPE", "STATUS", "REASON", "MESSAGE"}, func(row func(...string)) {
		for _, c := range r.Conditions {
			row(c.Type, c.Status, c.Reason, c.Message)
		}
	})
	return b.String()
}

// result is the decision's chain: proposal, stabilized, desired.
func result(d v1alpha1.Decision) string {
	if d.ProposedReplicas < 0 {
		return fmt.Sprintf("no metric produced a proposal; desired %d", d.DesiredReplicas)
	}
	s := fmt.Sprintf("proposed %d", d.ProposedReplicas)
	if d.Winner != "" {
		s += " (" + d.Winner + ")"
	}
	if d.StabilizedReplicas != nil {
		s += fmt.Sprintf(", stabilized %d", *d.StabilizedReplicas)
	}
	return s + fmt.Sprintf(", desired %d", d.DesiredReplicas)
}

// proposes is the PROPOSES column: the count with its qualifiers, or why
// there is none.
func proposes(m Metric) string {
	switch {
	case m.Error != "":
		return "failed: " + m.Error
	case m.Proposal == nil:
		return "-"
	}
	s := fmt.Sprint(*m.Proposal)
	if m.WithinTolerance {
		s += ", within tolerance"
	}
	if m.Winner {
		s += ", chosen"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// table writes rows aligned in columns, indented by two spaces, under
// header (none when nil).
func table(w io.Writer, header []string, rows func(row func(...string))) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) {
		// A tab or newline in a message would break the columns.
		for i, c := range cells {
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		}
		fmt.Fprintf(tw, "  %s\n", strings.TrimRight(strings.Join(cells, "\t"), "\t"))
	}
	if header != nil {
		row(header...)
	}
	rows(row)
	tw.Flush()
}
