package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// DashboardFile is the chart's Grafana dashboard, relative to the
// repository.
const DashboardFile = "manifests/charts/tidal/files/dashboard.json"

// PanelQuery is one query of a dashboard panel, variables substituted.
type PanelQuery struct {
	Row, Panel, Type string
	RefID, Legend    string
	Expr             string
}

// Name is how a problem names the query: "panel "Replicas" query A".
func (q PanelQuery) Name() string {
	return fmt.Sprintf("panel %q query %s", q.Panel, q.RefID)
}

type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// grafanaVar matches $name, ${name} and ${name:format} and [[name]].
var grafanaVar = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\[\[([A-Za-z0-9_]+)\]\]|\$([A-Za-z0-9_]+)`)

// DashboardQueries lists every query of every panel of a Grafana dashboard
// (rows' collapsed panels included), in order, with the variables set to
// vars (name without $: "namespace", "__rate_interval"). A query using a
// variable vars lacks is an error naming the panel and the variable.
func DashboardQueries(data []byte, vars map[string]string) ([]PanelQuery, error) {
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var out []PanelQuery
	var problems []string
	var walk func(row string, ps []grafanaPanel)
	walk = func(row string, ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(row, p.Panels)
				continue
			}
			for i, t := range p.Targets {
				ref := t.RefID
				if ref == "" {
					ref = string(rune('A' + i))
				}
				q := PanelQuery{Row: row, Panel: p.Title, Type: p.Type, RefID: ref, Legend: t.LegendFormat}
				q.Expr = grafanaVar.ReplaceAllStringFunc(t.Expr, func(m string) string {
					sub := grafanaVar.FindStringSubmatch(m)
					name := sub[1] + sub[2] + sub[3]
					v, ok := vars[name]
					if !ok {
						problems = append(problems, fmt.Sprintf("%s uses $%s, which the sandbox does not set", q.Name(), name))
						return m
					}
					return v
				})
				out = append(out, q)
			}
		}
	}
	walk("", d.Panels)
	if len(problems) > 0 {
		return out, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the dashboard has no panel queries")
	}
	return out, nil
}

// DashboardVars are the variables the sandbox sets: the demo's namespace
// and autoscaler, and $__rate_interval as Grafana computes it for a
// scrape interval (four of them).
func DashboardVars() map[string]string {
	rate := fmt.Sprintf("%ds", 4*tidalScrapeInterval)
	return map[string]string{
		"namespace": Namespace, "hpa": App, "datasource": "prometheus",
		"__rate_interval": rate, "__interval": fmt.Sprintf("%ds", tidalScrapeInterval), "__range": rate,
	}
}

// Series is one series of a range query's answer.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one value at a time since the start of the curve.
type Point struct {
	T time.Duration
	V float64
}

// QueryResult is a query's answer over the run.
type QueryResult struct {
	Query  PanelQuery
	Series []Series
	Err    error
}

// Samples counts the points of every series.
func (r QueryResult) Samples() int {
	n := 0
	for _, s := range r.Series {
		n += len(s.Points)
	}
	return n
}

// DashboardResult is every dashboard query run over the curve.
type DashboardResult struct {
	Results []QueryResult
	// DryRunGauge is tidal_autoscaler_dry_run_desired_replicas of the
	// demo autoscaler over the run (not a dashboard query).
	DryRunGauge QueryResult
	// Err is why the queries could not be run at all.
	Err error
}

// Problems names each query that failed or returned no sample.
func (d *DashboardResult) Problems() []string {
	if d == nil {
		return []string{"the dashboard was not queried"}
	}
	if d.Err != nil {
		return []string{d.Err.Error()}
	}
	var out []string
	for _, r := range d.Results {
		switch {
		case r.Err != nil:
			out = append(out, fmt.Sprintf("%s (%s): %v", r.Query.Name(), r.Query.Expr, r.Err))
		case r.Samples() == 0:
			out = append(out, fmt.Sprintf("%s returned no data over the run: %s", r.Query.Name(), r.Query.Expr))
		}
	}
	return out
}

// queryDashboard runs every dashboard query against the harness
// Prometheus from start until a scrape interval from now, and at least
// three scrape intervals after Prometheus was up again (upAt, when it was
// stopped), so that rates have two samples of what it scraped since.
func queryDashboard(h *harness.Harness, curve Curve, start, upAt time.Time) *DashboardResult {
	root, err := harness.RepoRoot()
	if err != nil {
		return &DashboardResult{Err: err}
	}
	data, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		return &DashboardResult{Err: fmt.Errorf("the chart's dashboard: %w", err)}
	}
	queries, err := DashboardQueries(data, DashboardVars())
	if err != nil {
		return &DashboardResult{Err: fmt.Errorf("%s: %w", DashboardFile, err)}
	}
	interval := time.Duration(tidalScrapeInterval) * time.Second
	wait := interval + time.Second
	if !upAt.IsZero() {
		wait = max(wait, time.Until(upAt.Add(3*interval+time.Second)))
	}
	time.Sleep(wait)
	end := time.Now()
	res := &DashboardResult{}
	client := &http.Client{Timeout: 20 * time.Second}
	step := max(time.Second, curve.Duration/300).Round(time.Second)
	for _, q := range queries {
		series, err := queryRange(client, h.PrometheusURL, q.Expr, start, end, step)
		res.Results = append(res.Results, QueryResult{Query: q, Series: series, Err: err})
	}
	gauge := PanelQuery{Panel: "(dry run)", RefID: "A", Expr: fmt.Sprintf("tidal_autoscaler_dry_run_desired_replicas{namespace=%q,hpa_name=%q}", Namespace, App)}
	series, err := queryRange(client, h.PrometheusURL, gauge.Expr, start, end, step)
	res.DryRunGauge = QueryResult{Query: gauge, Series: series, Err: err}
	return res
}

// queryRange runs /api/v1/query_range; point times are since start.
func queryRange(client *http.Client, base, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := url.Values{
		"query": {expr}, "start": {unixString(start)}, "end": {unixString(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query_range?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("the query range answer (%s) is no readable JSON: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query range refused by Prometheus: %s", body.Error)
	}
	var out []Series
	for _, r := range body.Data.Result {
		s := Series{Labels: r.Metric}
		for _, p := range r.Values {
			ts, _ := p[0].(float64)
			str, _ := p[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				continue
			}
			at := time.Unix(0, int64(ts*1e9)).Sub(start)
			s.Points = append(s.Points, Point{T: at, V: f})
		}
		out = append(out, s)
	}
	return out, nil
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// legendRE matches Grafana's {{label}} in a legend format.
var legendRE = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// Legend names a series as the panel's legend format would.
func Legend(format string, labels map[string]string) string {
	if format == "" {
		var parts []string
		for _, k := range sortedKeys(labels) {
			if k != "__name__" && k != "job" && k != "instance" {
				parts = append(parts, k+"="+labels[k])
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return legendRE.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendRE.FindStringSubmatch(m)[1]]
	})
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DashboardText lists every panel's queries with what they returned: the
// series by legend, with their last value and range over the run.
func DashboardText(d *DashboardResult) string {
	var b strings.Builder
	b.WriteString("The chart's Grafana dashboard (" + DashboardFile + "), every query run over the curve\n" +
		"against the sandbox's Prometheus, which scrapes tidal adapter, tidal autoscaler and\n" +
		"kube-apiserver as the chart's ServiceMonitors would ($namespace=" + Namespace + ", $hpa=" + App +
		", $__rate_interval=" + DashboardVars()["__rate_interval"] + ").\n")
	if d == nil || d.Err != nil {
		fmt.Fprintf(&b, "\nNot queried: %v\n", d.Problems())
		return b.String()
	}
	row, panel := "\x00", "\x00"
	for _, r := range d.Results {
		q := r.Query
		if q.Row != row {
			row = q.Row
			fmt.Fprintf(&b, "\n== %s ==\n", orDash(row))
		}
		if q.Panel != panel {
			panel = q.Panel
			fmt.Fprintf(&b, "\n%s (%s)\n", panel, q.Type)
		}
		fmt.Fprintf(&b, "  %s: %s\n", q.RefID, q.Expr)
		switch {
		case r.Err != nil:
			fmt.Fprintf(&b, "    ERROR %v\n", r.Err)
			continue
		case r.Samples() == 0:
			b.WriteString("    NO DATA\n")
			continue
		}
		for _, s := range r.Series {
			if len(s.Points) == 0 {
				continue
			}
			lo, hi := s.Points[0].V, s.Points[0].V
			for _, p := range s.Points {
				lo, hi = min(lo, p.V), max(hi, p.V)
			}
			last := s.Points[len(s.Points)-1]
			fmt.Fprintf(&b, "    %-60s last %s (at %.0fs), range %s..%s\n", Legend(q.Legend, s.Labels),
				trimNum(last.V), last.T.Seconds(), trimNum(lo), trimNum(hi))
		}
	}
	if p := d.Problems(); len(p) > 0 {
		fmt.Fprintf(&b, "\n%d queries returned no data or failed:\n  %s\n", len(p), strings.Join(p, "\n  "))
	} else {
		fmt.Fprintf(&b, "\nEvery one of the %d queries returned data.\n", len(d.Results))
	}
	return b.String()
}
