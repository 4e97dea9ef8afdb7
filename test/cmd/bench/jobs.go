package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidal-autoscaler/tidal/test/bench/samples"
)

// runJobs runs every job the rows need, once per distinct job, and
// returns their samples and failures by job id.
func runJobs(ctx context.Context, root, tools, dir string, p plan, selected []row, log io.Writer) data {
	d := data{samples: map[string][]samples.Sample{}, failed: map[string]string{}}
	done := map[string]string{} // job key -> id of the job that ran it
	for _, r := range selected {
		for _, id := range r.jobs() {
			if _, ok := d.samples[id]; ok {
				continue
			}
			if _, ok := d.failed[id]; ok {
				continue
			}
			j := p.jobs[id]
			if first, ok := done[j.key()]; ok {
				d.samples[id] = d.samples[first]
				if msg, ok := d.failed[first]; ok {
					d.failed[id] = msg
				}
				continue
			}
			done[j.key()] = id
			began := time.Now()
			fmt.Fprintf(log, "bench: %s: go test -bench '%s' %s (%s)\n", id, j.bench, j.pkg, envString(j.env))
			ss, err := runJob(ctx, root, tools, dir, j)
			d.samples[id] = ss
			if err != nil {
				d.failed[id] = err.Error()
				fmt.Fprintf(log, "bench: %s FAILED after %s: %v\n", id, time.Since(began).Round(time.Second), err)
				continue
			}
			fmt.Fprintf(log, "bench: %s done in %s, %d samples\n", id, time.Since(began).Round(time.Second), len(ss))
		}
	}
	return d
}

func envString(env map[string]string) string {
	return strings.TrimPrefix(job{env: env}.key(), "  ")
}

// runJob runs one go test process; its output goes to logs/ID.log and
// its samples to samples/ID.jsonl.
func runJob(ctx context.Context, root, tools, dir string, j job) ([]samples.Sample, error) {
	sampleFile := filepath.Join(dir, "samples", j.id+".jsonl")
	logFile := filepath.Join(dir, "logs", j.id+".log")
	_ = os.Remove(sampleFile)
	logOut, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logOut.Close()
	ctx, cancel := context.WithTimeout(ctx, j.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", j.bench, "-benchtime", "1x", "-count", "1",
		"-timeout", j.timeout.String(), j.pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TIDAL_TOOLS_DIR="+tools, samples.Env+"="+sampleFile)
	for k, v := range j.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logOut, logOut
	runErr := cmd.Run()
	ss, readErr := readSamples(sampleFile)
	if runErr != nil {
		return ss, fmt.Errorf("%v; %s", runErr, failureLines(logFile))
	}
	if readErr != nil {
		return ss, readErr
	}
	if len(ss) == 0 {
		return ss, fmt.Errorf("no samples written; %s", failureLines(logFile))
	}
	return ss, nil
}

func readSamples(file string) ([]samples.Sample, error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return samples.Read(f)
}

// failureLines quotes the first failure of a go test log: the lines after
// its first "--- FAIL", else its last lines.
func failureLines(logFile string) string {
	body, err := os.ReadFile(logFile)
	if err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	pick := lines[max(0, len(lines)-3):]
	for i, l := range lines {
		if strings.Contains(l, "--- FAIL") {
			pick = lines[i:min(len(lines), i+4)]
			break
		}
	}
	for i := range pick {
		pick[i] = strings.TrimSpace(pick[i])
		if len(pick[i]) > 300 {
			pick[i] = pick[i][:300] + "..."
		}
	}
	return "log " + logFile + ": " + strings.Join(pick, " | ")
}

// mergeSamples writes every job's samples into samples.jsonl, each line
// with its job.
func mergeSamples(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "samples", "*.jsonl"))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			fmt.Fprintf(&out, "{\"job\":%q,%s\n", id, line[1:])
		}
	}
	return os.WriteFile(filepath.Join(dir, "samples.jsonl"), out.Bytes(), 0o644)
}
