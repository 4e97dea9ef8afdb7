package sandbox

import (
	"fmt"
	"math"
	"strings"
)

// modeNote is the chart title's mention of --dry-run and --fallback.
func modeNote(cfg Config) string {
	var parts []string
	if cfg.DryRun {
		parts = append(parts, "dry run")
	}
	if cfg.Fallback {
		parts = append(parts, "fallback demo")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// modeSummary is the summary's section on --dry-run and --fallback.
func modeSummary(cfg Config, res *Result) string {
	var b strings.Builder
	samples := res.Samples
	if cfg.DryRun {
		b.WriteString("\nDry run (--dry-run): spec.dryRun is true, so the autoscaler decides every sync but never writes /scale.\n")
		lo, hi, wouldHi := int32(math.MaxInt32), int32(0), int32(0)
		reasons := map[string]bool{}
		var order []string
		for _, s := range samples {
			if s.Spec > 0 {
				lo, hi = min(lo, s.Spec), max(hi, s.Spec)
			}
			wouldHi = max(wouldHi, s.Desired)
			if s.DryRun != "" && !reasons[s.DryRun] {
				reasons[s.DryRun] = true
				order = append(order, s.DryRun)
			}
		}
		if hi == 0 {
			lo = 0
		}
		fmt.Fprintf(&b, "  Deployment replicas: %d..%d over the run (it started at %d); would-be count (status.desiredReplicas): up to %d.\n",
			lo, hi, res.Started, wouldHi)
		fmt.Fprintf(&b, "  DryRun condition seen: %s. %s\n", orDash(strings.Join(order, ", ")), gaugeLine(res.Dashboard))
	}
	if cfg.Fallback {
		from, to := OutageWindow(cfg.Duration)
		fmt.Fprintf(&b, "\nFallback (--fallback): spec.fallback {failureThreshold: %d, replicas: %d, behavior: static}; Prometheus stopped\n",
			FallbackThreshold, FallbackReplicas)
		if res.Outage.From > 0 {
			fmt.Fprintf(&b, "  from %.0fs to %.0fs (planned %.0fs to %.0fs), so every metric failed.\n", res.Outage.From.Seconds(), res.Outage.To.Seconds(), from.Seconds(), to.Seconds())
		} else {
			fmt.Fprintf(&b, "  from %.0fs to %.0fs was planned but did not happen (the run ended first).\n", from.Seconds(), to.Seconds())
		}
		spans := fallbackSpans(samples)
		if len(spans) == 0 {
			b.WriteString("  The Fallback condition was never True.\n")
		}
		for _, sp := range spans {
			var during []string
			seen := map[int32]bool{}
			for _, s := range samples {
				if s.T >= sp[0] && (sp[1] < 0 || s.T < sp[1]) && !seen[s.Spec] {
					seen[s.Spec] = true
					during = append(during, fmt.Sprint(s.Spec))
				}
			}
			end := "the end of the run"
			if sp[1] >= 0 {
				end = fmt.Sprintf("%.0fs", sp[1].Seconds())
				for _, s := range samples {
					if s.T == sp[1] {
						end += " (Fallback " + s.Fallback + ")"
					}
				}
			}
			fmt.Fprintf(&b, "  Fallback=True from %.0fs to %s; Deployment replicas meanwhile: %s.\n", sp[0].Seconds(), end, strings.Join(during, ", "))
		}
		if n := len(samples); n > 0 {
			last := samples[n-1]
			fmt.Fprintf(&b, "  At the end: %d replicas, Fallback %s, the metrics' last decision: %s.\n", last.Spec, orDash(last.Fallback), orDash(last.Reason))
		}
	}
	return b.String()
}

// rulesSummary shows the app's rules: the rule file up to its
// resourceRules, which are the chart's with a shorter window.
func rulesSummary(rules []byte) string {
	text := string(rules)
	if i := strings.Index(text, "\nresourceRules:"); i >= 0 {
		text = text[:i+1] + "resourceRules: ...   (CPU and memory as the chart's defaults, window 10s; the whole file: rules.yaml)\n"
	}
	var b strings.Builder
	b.WriteString("\nThe app's rule file (" + RuleFile + ", copied to rules.yaml), which the adapter serves:\n\n")
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// dashboardSummary says whether every dashboard query returned data and
// compares the dashboard's replica counts with the report's.
func dashboardSummary(d *DashboardResult, samples []Sample, fallback bool) string {
	var b strings.Builder
	b.WriteString("\nDashboard (dashboard.txt, dashboard.png): ")
	problems := d.Problems()
	if len(problems) == 0 {
		fmt.Fprintf(&b, "all %d queries of the chart's dashboard returned data over the run.\n", len(d.Results))
	} else {
		fmt.Fprintf(&b, "%d queries returned no data or failed:\n  %s\n", len(problems), strings.Join(problems, "\n  "))
		if !fallback {
			b.WriteString("  (Error and fallback panels get data only when something fails: --fallback stops Prometheus for a while.)\n")
		}
	}
	if d == nil {
		return b.String()
	}
	var desired int32
	for _, s := range samples {
		desired = max(desired, s.Desired)
	}
	for _, r := range d.Results {
		if !strings.HasPrefix(r.Query.Expr, "tidal_autoscaler_hpa_status_desired_replicas{") {
			continue
		}
		for _, s := range r.Series {
			hi := 0.0
			for _, p := range s.Points {
				hi = math.Max(hi, p.V)
			}
			fmt.Fprintf(&b, "  Its panel %q: %s peaked at %s; the report's status.desiredReplicas peaked at %d.\n",
				r.Query.Panel, Legend(r.Query.Legend, s.Labels), trimNum(hi), desired)
		}
	}
	return b.String()
}

// gaugeLine says what tidal_autoscaler_dry_run_desired_replicas read.
func gaugeLine(d *DashboardResult) string {
	if d == nil || d.Err != nil {
		return "The gauge was not queried."
	}
	g := d.DryRunGauge
	switch {
	case g.Err != nil:
		return "The gauge: " + g.Err.Error() + "."
	case g.Samples() == 0:
		return "The gauge " + g.Query.Expr + " had no sample."
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range g.Series {
		for _, p := range s.Points {
			lo, hi = math.Min(lo, p.V), math.Max(hi, p.V)
		}
	}
	return fmt.Sprintf("The gauge tidal_autoscaler_dry_run_desired_replicas read %s to %s.", trimNum(lo), trimNum(hi))
}
