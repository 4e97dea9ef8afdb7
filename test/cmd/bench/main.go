// Command bench runs every performance comparison of Tidal against its
// references (issue 21) in one run and prints one table:
//
//	go run ./test/cmd/bench                 # every row, 3 rounds each
//	go run ./test/cmd/bench -rows pods,fleet-1k -rounds 5
//	go run ./test/cmd/bench -smoke          # tiny sizes: does it work?
//	go run ./test/cmd/bench -docs-only latest   # the last run's table into docs/performance.md
//
// Each job is one `go test -run '^$' -bench ... -benchtime 1x` process of
// test/bench/adapter, test/bench/autoscaler or test/bench/closedloop on
// the real harness, whose sides take turns (A B A B ...) for -rounds
// rounds and append every round's figures to a samples file
// (test/bench/samples). The table shows
// each figure's median and spread (min..max) and each goal's ratio of
// medians. A job that fails leaves its rows marked with why, with
// whatever figures it had; the run goes on.
//
// Output: _output/bench/<UTC date-time>/ with samples.jsonl, logs/ (each
// go test's output), machine.txt, table.md and table.txt. Nothing here
// asserts on time: the goals are reported, not enforced.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// options are the command's flags.
type options struct {
	rows     []string
	rounds   int
	smoke    bool
	out      string
	docs     bool
	docsOnly string
	judge    string
	// log receives progress lines.
	log io.Writer
}

func main() {
	var o options
	rowsFlag := flag.String("rows", "all", "Rows to run, comma-separated ids (-list shows them), or all.")
	list := flag.Bool("list", false, "List the rows and exit.")
	flag.IntVar(&o.rounds, "rounds", 3, "Rounds: how many times each row's sides take turns (A B A B ...).")
	flag.BoolVar(&o.smoke, "smoke", false, "Tiny sizes: checks that every row runs, never its figures.")
	flag.StringVar(&o.out, "out", "", "Output folder (default _output/bench/<UTC date-time>).")
	flag.BoolVar(&o.docs, "docs", false, "Copy the table into docs/performance.md between its marker comments.")
	flag.StringVar(&o.docsOnly, "docs-only", "", "Copy DIR/table.md (or the newest run's, with \"latest\") into docs/performance.md and exit.")
	flag.StringVar(&o.judge, "judge", "", "Judge the samples of DIR, a past run's folder, by this commit's rows and goals (-rows selects; default every row whose jobs left samples there), rewrite DIR/table.txt and DIR/table.md, and exit.")
	flag.Parse()
	o.log = os.Stderr
	if *rowsFlag != "all" {
		o.rows = strings.Split(*rowsFlag, ",")
	}
	if *list {
		for _, r := range rows(newPlan(fullSizes(), o.rounds, "", "")) {
			fmt.Printf("%-25s %s\n", r.id, r.title)
		}
		return
	}
	if err := mainErr(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr(ctx context.Context, o options) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if o.docsOnly != "" {
		return copyToDocs(root, o.docsOnly)
	}
	if o.judge != "" {
		text, err := judgeAgain(o.judge, o.rows, describeCommit(ctx, root))
		fmt.Print(text)
		return err
	}
	run, err := runBench(ctx, root, o)
	if err != nil {
		return err
	}
	fmt.Print(run.text)
	fmt.Fprintf(o.log, "bench: written to %s\n", run.dir)
	if o.docs {
		if err := copyToDocs(root, run.dir); err != nil {
			return err
		}
	}
	if n := run.failedRows(); n > 0 {
		return fmt.Errorf("%d rows did not finish (see the table and %s)", n, filepath.Join(run.dir, "logs"))
	}
	return nil
}

// benchRun is one run's outcome.
type benchRun struct {
	dir     string
	results []result
	text    string
}

func (r benchRun) failedRows() int {
	n := 0
	for _, res := range r.results {
		if res.Failure != "" {
			n++
		}
	}
	return n
}

// runBench runs the selected rows' jobs and writes the run's folder.
func runBench(ctx context.Context, root string, o options) (benchRun, error) {
	if o.rounds < 1 {
		return benchRun{}, errors.New("-rounds must be at least 1")
	}
	started := time.Now().UTC()
	dir := o.out
	if dir == "" {
		dir = filepath.Join(root, "_output", "bench", started.Format("20060102T150405Z"))
	}
	for _, sub := range []string{"logs", "samples", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return benchRun{}, err
		}
	}
	tools, err := toolsDir(root)
	if err != nil {
		return benchRun{}, err
	}
	peerBin := filepath.Join(tools, harness.PrometheusAdapterBinary)
	if _, err := os.Stat(peerBin); err != nil {
		peerBin = "build" // the benchmark builds it from test/bench/peer
	}
	noopBin, err := harness.BuildNoopAdapter(ctx, filepath.Join(dir, "bin", "noopadapter"))
	if err != nil {
		return benchRun{}, err
	}
	sz := fullSizes()
	if o.smoke {
		sz = smokeSizes()
	}
	p := newPlan(sz, o.rounds, peerBin, noopBin)
	selected, err := selectRows(rows(p), o.rows)
	if err != nil {
		return benchRun{}, err
	}
	commit := describeCommit(ctx, root)
	d := runJobs(ctx, root, tools, dir, p, selected, o.log)
	var results []result
	for _, r := range selected {
		results = append(results, r.eval(d))
	}
	machine := describeMachine(ctx, root, commit)
	head := header(started, o, machine)
	run := benchRun{dir: dir, results: results, text: renderText(head, results)}
	files := map[string]string{
		"table.txt":   run.text,
		"table.md":    renderMarkdown(head, results),
		"machine.txt": machine.text,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return run, err
		}
	}
	return run, mergeSamples(dir)
}

// selectRows keeps the rows named (all when none), in the table's order.
func selectRows(all []row, ids []string) ([]row, error) {
	if len(ids) == 0 {
		return all, nil
	}
	var out []row
	for _, id := range ids {
		i := slices.IndexFunc(all, func(r row) bool { return r.id == id })
		if i < 0 {
			var known []string
			for _, r := range all {
				known = append(known, r.id)
			}
			return nil, fmt.Errorf("no row %q (rows: %s)", id, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// toolsDir is where `make tools` put the binaries.
func toolsDir(root string) (string, error) {
	dir := os.Getenv("TIDAL_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join(root, "_output", "tools")
	}
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("tools folder %s: %w (run `make tools` first)", dir, err)
	}
	return abs, nil
}

// smokeMark marks a smoke run's header, whose table is never copied into
// the docs.
const smokeMark = "SMOKE sizes"

// header is the run's description above the table.
func header(started time.Time, o options, m machine) string {
	mode := "full sizes"
	if o.smoke {
		mode = smokeMark + " (checks the benchmark runs; the figures mean nothing)"
	}
	return fmt.Sprintf("Run %s, %s, %d rounds per row; commit %s; %s",
		started.Format("2006-01-02 15:04 UTC"), mode, o.rounds, m.commit, m.summary)
}
