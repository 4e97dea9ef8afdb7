package discovery

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
)

// Explanation is one discovery pass run for a person rather than for the
// server: the Snapshot the adapter would serve, plus, for every series
// shape each rule's seriesQuery found, what became of it and why.
type Explanation struct {
	// Snapshot is what the adapter would serve after this pass, built by
	// the same code as the running adapter's.
	Snapshot *Snapshot
	// Queries are the distinct (backend, seriesQuery) requests sent, in
	// rule order.
	Queries []QueryOutcome
	// Series are the outcomes per rule and series shape, in rule order and
	// then in the order the backend returned the series.
	Series []SeriesOutcome
}

// QueryOutcome is one discovery request.
type QueryOutcome struct {
	Backend     string
	SeriesQuery string
	// Rules are the IDs of the rules sharing the request.
	Rules []string
	// Shapes is how many distinct (name, label names) pairs came back.
	Shapes   int
	Duration time.Duration
	Err      error
}

// SeriesOutcome is what a rule made of one series shape.
type SeriesOutcome struct {
	Rule  *ruleset.Rule
	Shape prom.Shape
	// Metric is the API metric name ("" when the namer rejected the series).
	Metric string
	// Resources are the resources the labels map to (custom rules).
	Resources  []schema.GroupResource
	Namespaced bool
	// Served are the resources (custom rules) for which this rule and
	// series answer Metric; for an external rule, one empty GroupResource
	// when it answers Metric.
	Served []schema.GroupResource
	// Skipped says why the series serves nothing, or why some of its
	// resources are served by another rule or series; "" when it serves
	// all it maps to.
	Skipped string
}

// Explain runs one discovery pass over set, sequentially and without
// touching any Discoverer, and explains it. Series are looked for between
// start and end, as --metrics-max-age does for the adapter.
func Explain(ctx context.Context, set *ruleset.Set, start, end time.Time) *Explanation {
	keys, owners := groupQueries(set)
	results := make(map[queryKey][]prom.Shape, len(keys))
	e := &Explanation{}
	for _, k := range keys {
		began := time.Now()
		shapes, err := k.backend.Series(ctx, []string{k.query}, start, end)
		e.Queries = append(e.Queries, QueryOutcome{
			Backend: k.backend.Name(), SeriesQuery: k.query, Rules: owners[k],
			Shapes: len(shapes), Duration: time.Since(began), Err: err,
		})
		if err == nil {
			results[k] = shapes
		}
	}
	e.Snapshot = build(set, results)
	e.Series = explainSeries(set, results, e.Snapshot)
	return e
}

// explainSeries retraces build's decisions for every series and checks
// them against the snapshot build made, so that what it says served is
// what is served.
func explainSeries(set *ruleset.Set, results map[queryKey][]prom.Shape, snap *Snapshot) []SeriesOutcome {
	var out []SeriesOutcome
	for _, r := range set.Rules() {
		for _, sh := range results[queryKey{r.Client, r.SeriesQuery}] {
			o := SeriesOutcome{Rule: r, Shape: sh}
			if why := r.Namer.Rejection(sh.Name); why != "" {
				o.Skipped = why
				out = append(out, o)
				continue
			}
			o.Metric, _ = r.Namer.MetricName(sh.Name)
			if r.Kind == ruleset.External {
				b, ok := snap.External(o.Metric)
				switch {
				case ok && b.Rule == r && b.Series == sh.Name:
					o.Served = []schema.GroupResource{{}}
				case ok:
					o.Skipped = fmt.Sprintf("external metric %q is served by %s from series %q (the first rule in the file, then the first series, wins)", o.Metric, b.Rule.ID, b.Series)
				default:
					o.Skipped = fmt.Sprintf("external metric %q is not served", o.Metric)
				}
				out = append(out, o)
				continue
			}
			o.Resources, o.Namespaced = r.Resources.ResourcesForSeries(sh.Labels)
			if len(o.Resources) == 0 {
				o.Skipped = fmt.Sprintf("no label maps to a resource (labels: %s); add an override or a template naming one of them", labelList(sh.Labels))
				out = append(out, o)
				continue
			}
			var shadowed []string
			for _, gr := range o.Resources {
				b, ok := snap.Custom(gr, o.Metric)
				if ok && b.Rule == r && b.Series == sh.Name {
					o.Served = append(o.Served, gr)
					continue
				}
				if ok {
					shadowed = append(shadowed, fmt.Sprintf("%s/%s is served by %s from series %q", resourceString(gr), o.Metric, b.Rule.ID, b.Series))
				}
			}
			if len(shadowed) > 0 {
				o.Skipped = strings.Join(shadowed, "; ") + " (the first rule in the file, then the first series, wins)"
			}
			out = append(out, o)
		}
	}
	return out
}

func labelList(labels []string) string {
	if len(labels) == 0 {
		return "none"
	}
	l := append([]string(nil), labels...)
	sort.Strings(l)
	return strings.Join(l, ", ")
}

func resourceString(gr schema.GroupResource) string {
	return gr.String()
}
