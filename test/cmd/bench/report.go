package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// renderText is the table as the terminal shows it.
func renderText(head string, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", head)
	for _, r := range results {
		fmt.Fprintf(&b, "\n== %s [%s]\n", r.Title, r.ID)
		if r.Failure != "" {
			fmt.Fprintf(&b, "   DID NOT FINISH: %s\n", r.Failure)
		}
		for _, c := range r.Cells {
			lo, hi := spread(c.Values)
			fmt.Fprintf(&b, "   %-20s %-32s %10s %-8s  %s..%s  (%d rounds)\n", c.Side, c.Metric, figure(c.Median()), c.Unit, figure(lo), figure(hi), len(c.Values))
		}
		for _, g := range r.Goals {
			fmt.Fprintf(&b, "   goal: %-75s ratio %-8s %s\n", g.Goal, figure(g.Ratio), g.Verdict)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "   note: %s\n", n)
		}
	}
	return b.String()
}

// renderMarkdown is the table docs/performance.md includes: figures, then
// goals, one row per line of the table.
func renderMarkdown(head string, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", head)
	b.WriteString("| row | side | figure | median | spread (min..max) | rounds |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		if len(r.Cells) == 0 {
			fmt.Fprintf(&b, "| %s | | | | | |\n", md(r.Title))
		}
		for i, c := range r.Cells {
			title := ""
			if i == 0 {
				title = md(r.Title)
			}
			lo, hi := spread(c.Values)
			fmt.Fprintf(&b, "| %s | %s | %s | %s %s | %s..%s | %d |\n", title, c.Side, c.Metric, figure(c.Median()), c.Unit, figure(lo), figure(hi), len(c.Values))
		}
	}
	b.WriteString("\n| row | goal | ratio of medians | verdict |\n| --- | --- | --- | --- |\n")
	for _, r := range results {
		for _, g := range r.Goals {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", md(r.Title), md(g.Goal), figure(g.Ratio), g.Verdict)
		}
		if r.Failure != "" {
			fmt.Fprintf(&b, "| %s | did not finish | | %s |\n", md(r.Title), md(r.Failure))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "| %s | %s | | |\n", md(r.Title), md(n))
		}
	}
	return b.String()
}

func md(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// machine is what ran the benchmark.
type machine struct {
	text, summary, commit string
}

// describeCommit names the commit measured: read before the rows run,
// since the tree may change during a run of hours (the binaries are built
// at each row's start).
func describeCommit(ctx context.Context, root string) string {
	commit := command(ctx, root, "git", "rev-parse", "--short", "HEAD")
	if command(ctx, root, "git", "status", "--porcelain", "--untracked-files=no") != "" {
		commit += " (with uncommitted changes)"
	}
	return commit
}

// describeMachine reads the CPU model, cores, memory, kernel and Go
// version, for machine.txt and the table's header, with commit (see
// describeCommit).
func describeMachine(ctx context.Context, root, commit string) machine {
	cpu := field("/proc/cpuinfo", "model name")
	mem := field("/proc/meminfo", "MemTotal")
	kernel := command(ctx, root, "uname", "-srm")
	load, _ := os.ReadFile("/proc/loadavg")
	m := machine{commit: commit}
	m.summary = fmt.Sprintf("%d cores (%s), %s memory, %s, %s", runtime.NumCPU(), cpu, mem, kernel, runtime.Version())
	lines := map[string]string{
		"cpu": cpu, "cores": fmt.Sprint(runtime.NumCPU()), "memory": mem, "kernel": kernel,
		"go": command(ctx, root, "go", "version"), "commit": commit, "load average at the end": strings.TrimSpace(string(load)),
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, lines[k])
	}
	m.text = b.String()
	return m
}

// field is the value of the first "name: value" line of a /proc file.
func field(file, name string) string {
	body, err := os.ReadFile(file)
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(body), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == name {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown"
}

func command(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Markers bound the generated table in docs/performance.md.
const (
	beginMarker = "<!-- bench-table:begin (written by go run ./test/cmd/bench -docs; do not edit by hand) -->"
	endMarker   = "<!-- bench-table:end -->"
)

// copyToDocs puts dir's table.md between the markers of
// docs/performance.md; dir "latest" is the newest run under _output/bench.
func copyToDocs(root, dir string) error {
	if dir == "latest" {
		runs, _ := filepath.Glob(filepath.Join(root, "_output", "bench", "*", "table.md"))
		if len(runs) == 0 {
			return fmt.Errorf("no run under %s", filepath.Join(root, "_output", "bench"))
		}
		sort.Strings(runs)
		dir = filepath.Dir(runs[len(runs)-1])
	}
	table, err := os.ReadFile(filepath.Join(dir, "table.md"))
	if err != nil {
		return err
	}
	if strings.Contains(string(table), smokeMark) {
		return fmt.Errorf("%s is a smoke run's table, whose figures mean nothing: not copied", dir)
	}
	doc := filepath.Join(root, "docs", "performance.md")
	body, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(body), beginMarker, endMarker, string(table))
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}

// replaceBetween replaces what lies between the lines begin and end.
func replaceBetween(doc, begin, end, with string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q block", begin, end)
	}
	return doc[:i+len(begin)] + "\n" + strings.TrimSpace(with) + "\n" + doc[j:], nil
}
