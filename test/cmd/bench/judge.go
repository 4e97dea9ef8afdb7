package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

// judgeAgain evaluates the samples a past run left in dir (dir/samples,
// one file per job) by this commit's rows, the ids named (none: every
// row whose jobs all left samples there), and rewrites dir's table.txt
// and table.md: their first line stays the run's own, with the commit
// whose goals judged it added. For a run made before a goal's definition
// changed (e.g. per object reconciled instead of per period), so that the
// docs show its figures under the goals the table states.
func judgeAgain(dir string, ids []string, commit string) (string, error) {
	table, err := os.ReadFile(filepath.Join(dir, "table.md"))
	if err != nil {
		return "", fmt.Errorf("%s is not a run's folder: %w", dir, err)
	}
	head, _, _ := strings.Cut(string(table), "\n")
	head, _, _ = strings.Cut(head, judgedBy) // judged before: the run's own line
	files, err := filepath.Glob(filepath.Join(dir, "samples", "*.jsonl"))
	if err != nil {
		return "", err
	}
	d := data{samples: map[string][]samples.Sample{}, failed: map[string]string{}}
	for _, f := range files {
		ss, err := readSamples(f)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		if len(ss) > 0 {
			d.samples[strings.TrimSuffix(filepath.Base(f), ".jsonl")] = ss
		}
	}
	// The rows at the run's own sizes: their titles and notes name them.
	sz := fullSizes()
	if strings.Contains(head, smokeMark) {
		sz = smokeSizes()
	}
	all := rows(newPlan(sz, 1, "", ""))
	var selected []row
	if len(ids) > 0 {
		if selected, err = selectRows(all, ids); err != nil {
			return "", err
		}
		for _, r := range selected {
			if !hasAll(d, r.jobs()) {
				return "", fmt.Errorf("row %s: %s holds no samples of its jobs %v", r.id, filepath.Join(dir, "samples"), r.jobs())
			}
		}
	} else {
		for _, r := range all {
			if hasAll(d, r.jobs()) {
				selected = append(selected, r)
			}
		}
	}
	if len(selected) == 0 {
		return "", fmt.Errorf("no row of this commit has all its jobs' samples in %s", filepath.Join(dir, "samples"))
	}
	var results []result
	for _, r := range selected {
		results = append(results, r.eval(d))
	}
	head += judgedBy + commit
	text := renderText(head, results)
	for name, body := range map[string]string{"table.txt": text, "table.md": renderMarkdown(head, results)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return text, err
		}
	}
	return text, nil
}

// judgedBy starts what judgeAgain adds to a run's first line.
const judgedBy = "; judged by the goals of commit "

// hasAll reports whether d holds samples of every job.
func hasAll(d data, jobs []string) bool {
	for _, j := range jobs {
		if len(d.samples[j]) == 0 {
			return false
		}
	}
	return len(jobs) > 0
}
