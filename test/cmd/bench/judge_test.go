package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

// TestJudgeAgain: a past run's samples judged by this commit's goals keep
// the run's first line, name the judging commit, and give this commit's
// verdicts (the 22:24 UTC round of 2026-11-29, per object reconciled:
// 0.185, met; its table had said 0.202 per period, not met).
func TestJudgeAgain(t *testing.T) {
	dir := run1k(t, "Run 2026-11-29 22:24 UTC, full sizes, 1 rounds per row; commit 057a252")
	if _, err := judgeAgain(dir, nil, "abc1234"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Run 2026-11-29 22:24 UTC, full sizes, 1 rounds per row; commit 057a252; judged by the goals of commit abc1234\n",
		"| CPU per object reconciled <= 0.2 of kcm's | 0.185 | met |",
		"| API requests per object reconciled <= 0.33 of kcm's | 0.309 | met |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("table.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "old table") || strings.Contains(string(md), "fleet-10k") {
		t.Errorf("table.md keeps the old table or judges rows without samples:\n%s", md)
	}
	if txt, err := os.ReadFile(filepath.Join(dir, "table.txt")); err != nil || !strings.Contains(string(txt), "ratio 0.185") {
		t.Errorf("table.txt: %v\n%s", err, txt)
	}

	// Judged again: the run's line names only the last judge.
	if _, err := judgeAgain(dir, nil, "def5678"); err != nil {
		t.Fatal(err)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, "table.md")); !strings.HasPrefix(string(md), "Run 2026-11-29 22:24 UTC, full sizes, 1 rounds per row; commit 057a252; judged by the goals of commit def5678\n") {
		t.Errorf("judged twice, table.md begins %q", strings.SplitN(string(md), "\n", 2)[0])
	}

	// A row named without its samples, and a folder that is no run's.
	if _, err := judgeAgain(dir, []string{"fleet-3k"}, "abc1234"); err == nil || !strings.Contains(err.Error(), "row fleet-3k") {
		t.Errorf("judging a row without samples: %v, want an error naming it", err)
	}
	if _, err := judgeAgain(t.TempDir(), nil, "abc1234"); err == nil || !strings.Contains(err.Error(), "not a run's folder") {
		t.Errorf("judging an empty folder: %v, want an error saying it is not a run's", err)
	}
}

// TestJudgeAgainSmoke: a smoke run's folder is judged with the rows at
// its own sizes, so its titles name them, not the full sizes'.
func TestJudgeAgainSmoke(t *testing.T) {
	dir := run1k(t, "Run 2026-11-30 02:00 UTC, "+smokeMark+" (checks the benchmark runs; the figures mean nothing), 1 rounds per row; commit 057a252")
	text, err := judgeAgain(dir, nil, "abc1234")
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 autoscalers x 1 pods, 3s sync, usage moving"; !strings.Contains(text, want) || strings.Contains(text, "1k autoscalers") {
		t.Errorf("a smoke run judged again lacks its own row title %q:\n%s", want, text)
	}
}

// run1k writes a run's folder with the table's first line head and the
// 1k row's samples of the 22:24 UTC round of 2026-11-29.
func run1k(t *testing.T, head string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("table.md", head+"\n\n| old table |\n")
	var lines []string
	for side, f := range map[string][3]float64{tidal: {0.48, 885, 1000}, kcm: {2.3767, 2628.33, 916.33}, bounded: {0.2867, 261.33, 1000}, native: {0.4067, 852, 1000}} {
		for i, metric := range []string{"cpu-per-period", "requests-per-period", "reconciles-per-period"} {
			b, err := json.Marshal(samples.Sample{Row: "fleet", Side: side, Round: 1, Metric: metric, Value: f[i], Unit: "x"})
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(b))
		}
	}
	write("samples/fleet-1k-moving.jsonl", strings.Join(lines, "\n")+"\n")
	return dir
}
