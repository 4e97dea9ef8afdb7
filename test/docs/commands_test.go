package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCommandBlocks holds every command block of the repository's
// Markdown to the convention of docs/development.md: the line before its
// fence is `<!-- run: <package dir> <TestName> -->` naming a test that
// reads the block with RunBy and runs it, `<!-- run: <script> -->` naming
// a script that holds each of its commands, or `<!-- not run: <reason> -->`.
func TestCommandBlocks(t *testing.T) {
	root := repoRoot(t)
	blocks, err := RepoBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	var run, notRun, unmarked int
	for _, b := range blocks {
		m, err := ParseMarker(b.Before)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		if !b.IsCommand() {
			if m.Kind != "" {
				t.Errorf("%s: a %q block is not a command block; remove the marker before it", b, b.Info)
			}
			continue
		}
		switch m.Kind {
		case "":
			unmarked++
			t.Errorf("%s: command block (%s) with no marker on the line before its fence", b, firstCommand(b))
		case "not run":
			notRun++
		case "run":
			run++
			if err := checkRunner(root, b, m.Text); err != nil {
				t.Errorf("%s: <!-- run: %s -->: %v", b, m.Text, err)
			}
		}
	}
	if unmarked > 0 {
		t.Errorf("mark each block above <!-- run: <package dir> <TestName> --> naming the test that runs it (with docs.RunBy), " +
			"or <!-- not run: <reason> --> (docs/development.md#commands-in-the-docs)")
	}
	t.Logf("%d fenced blocks; command blocks: %d run by a test or script, %d marked not run, %d unmarked", len(blocks), run, notRun, unmarked)
}

func firstCommand(b Block) string {
	if c := b.Commands(); len(c) > 0 {
		s := stripComment(c[0])
		if len(s) > 60 {
			s = s[:57] + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	return "no command"
}

var testName = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)

// checkRunner checks what a run marker names: a Go test that exists and
// reads its blocks with RunBy, or a script of the repository that holds
// every command of the block.
func checkRunner(root string, b Block, runner string) error {
	f := strings.Fields(runner)
	switch {
	case len(f) == 2 && testName.MatchString(f[1]):
		dir := strings.TrimPrefix(strings.TrimSuffix(f[0], "/"), "./")
		dir = strings.TrimPrefix(dir, "github.com/tidal-autoscaler/tidal/")
		body, err := testFunc(filepath.Join(root, filepath.FromSlash(dir)), f[1])
		if err != nil {
			return err
		}
		if !strings.Contains(body, "RunBy(") {
			return fmt.Errorf("%s does not read the blocks it runs with docs.RunBy(root, %q), so the docs could drift from what it runs", f[1], dir+" "+f[1])
		}
		return nil
	case len(f) == 1:
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f[0])))
		if err != nil {
			return fmt.Errorf("names neither a Go test (<package dir> <TestName>) nor a script of the repository: %v", err)
		}
		var missing []string
		for _, c := range b.Commands() {
			if !scriptRuns(string(raw), stripComment(c)) {
				missing = append(missing, fmt.Sprintf("%q", stripComment(c)))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s does not run %s: name the test that does, or mark the block <!-- not run: <reason> -->", f[0], strings.Join(missing, ", "))
		}
		return nil
	}
	return fmt.Errorf("write <!-- run: <package dir> <TestName> --> (e.g. test/docs TestAutoscaleDryRun) or <!-- run: <script path> -->")
}

// testFunc returns the source of func name in the _test.go files of dir,
// up to the next top-level declaration.
func testFunc(dir, name string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no package with tests in %s", dir)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		src := string(raw)
		i := strings.Index(src, "\nfunc "+name+"(t *testing.T)")
		if i < 0 {
			continue
		}
		body := src[i+1:]
		if j := strings.Index(body, "\n}\n"); j >= 0 {
			body = body[:j]
		}
		return body, nil
	}
	return "", fmt.Errorf("no func %s(t *testing.T) in %s/*_test.go", name, dir)
}

// scriptRuns says whether a line of script is command, alone or with more
// arguments.
func scriptRuns(script, command string) bool {
	for _, l := range strings.Split(script, "\n") {
		l = stripComment(strings.TrimSpace(l))
		if l == command || strings.HasPrefix(l, command+" ") {
			return true
		}
	}
	return false
}

// stripComment drops a trailing shell comment written the docs' way, after
// whitespace.
func stripComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	for _, sep := range []string{" #", "\t#"} {
		if i := strings.Index(s, sep); i >= 0 {
			s = s[:i]
		}
	}
	return strings.TrimSpace(s)
}

// TestScanBlocks pins what counts as a command block, what its marker
// says and what its commands are, so the rule above cannot pass blocks it
// should not.
func TestScanBlocks(t *testing.T) {
	type want struct {
		info     string
		command  bool
		marker   Marker
		commands []string
	}
	for _, tc := range []struct {
		name      string
		doc       string
		want      []want
		markerErr string
	}{
		{
			name: "unmarked sh block",
			doc:  "Text.\n\n```sh\nmake test\n```\n",
			want: []want{{info: "sh", command: true, commands: []string{"make test"}}},
		},
		{
			name: "not run, with its reason",
			doc:  "<!-- not run: needs your cluster -->\n```bash\nkubectl apply -k manifests/\n```\n",
			want: []want{{info: "bash", command: true, marker: Marker{"not run", "needs your cluster"}, commands: []string{"kubectl apply -k manifests/"}}},
		},
		{
			name: "run by a test, continuation lines joined, comments dropped",
			doc:  "<!-- run: test/docs TestX -->\n```shell\n# a comment\ntidal autoscale deployment/web \\\n  --min=2   # two\n\n```\n",
			want: []want{{info: "shell", command: true, marker: Marker{"run", "test/docs TestX"}, commands: []string{"tidal autoscale deployment/web --min=2   # two"}}},
		},
		{
			name: "a marker two lines up does not count",
			doc:  "<!-- not run: too far -->\n\n```sh\nmake sandbox\n```\n",
			want: []want{{info: "sh", command: true, commands: []string{"make sandbox"}}},
		},
		{
			name: "indented fence in a list item with an indented marker",
			doc:  "1. Step:\n\n   <!-- not run: needs a release -->\n   ```sh\n   helm upgrade tidal x\n   ```\n",
			want: []want{{info: "sh", command: true, marker: Marker{"not run", "needs a release"}, commands: []string{"helm upgrade tidal x"}}},
		},
		{
			name: "console block: only prompt lines are commands",
			doc:  "```console\n$ tidal version\ntidal v1.0.0\n$ make help\n  build  Build.\n```\n",
			want: []want{{info: "console", command: true, commands: []string{"tidal version", "make help"}}},
		},
		{
			name: "no info string, a known command",
			doc:  "```\ntidal autoscale deployment/web --dry-run=client -o yaml\n```\n",
			want: []want{{command: true, commands: []string{"tidal autoscale deployment/web --dry-run=client -o yaml"}}},
		},
		{
			name: "no info string, a prompt",
			doc:  "```\n$ go test ./test/docs\nok\n```\n",
			want: []want{{command: true, commands: []string{"go test ./test/docs"}}},
		},
		{
			name: "no info string, output or a diagram",
			doc:  "```\nHorizontalAutoscaler shop/web\nTarget:    Deployment/web\n```\n\n```\n  Prometheus  (/api/v1/series)\n      ^  |\n```\n",
			want: []want{{}, {}},
		},
		{
			name: "output blocks are not commands",
			doc:  "```yaml\nkind: HorizontalAutoscaler\n```\n```text\nmake: done\n```\n```json\n{}\n```\n```promql\nrate(x[2m])\n```\n",
			want: []want{{info: "yaml"}, {info: "text"}, {info: "json"}, {info: "promql"}},
		},
		{
			name: "a longer fence holds a shorter one: one markdown block",
			doc:  "````markdown\n<!-- not run: example -->\n```sh\nmake test\n```\n````\n\n```sh\ngo vet ./...\n```\n",
			want: []want{{info: "markdown"}, {info: "sh", command: true, commands: []string{"go vet ./..."}}},
		},
		{
			name: "tilde fence is not closed by backticks",
			doc:  "~~~sh\nmake build\n```\nmake lint\n~~~\n",
			want: []want{{info: "sh", command: true, commands: []string{"make build", "```", "make lint"}}},
		},
		{
			name: "a code span at the start of a line is no fence",
			doc:  "```sh` is not a fence\n\n```sh\nmake lint\n```\n",
			want: []want{{info: "sh", command: true, commands: []string{"make lint"}}},
		},
		{
			name: "an unclosed fence runs to the end",
			doc:  "```sh\nmake tools\n",
			want: []want{{info: "sh", command: true, commands: []string{"make tools"}}},
		},
		{
			name:      "empty reason is an error",
			doc:       "<!-- not run:   -->\n```sh\nmake bench\n```\n",
			want:      []want{{info: "sh", command: true, commands: []string{"make bench"}}},
			markerErr: "needs a text",
		},
		{
			name:      "misspelt marker is an error, not a missing marker",
			doc:       "<!-- notrun: cluster -->\n```sh\nmake bench\n```\n",
			want:      []want{{info: "sh", command: true, commands: []string{"make bench"}}},
			markerErr: "is not a marker",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks := ScanBlocks("x.md", tc.doc)
			if len(blocks) != len(tc.want) {
				t.Fatalf("%d blocks, want %d: %+v", len(blocks), len(tc.want), blocks)
			}
			for i, b := range blocks {
				w := tc.want[i]
				if b.Info != w.info || b.IsCommand() != w.command {
					t.Errorf("block %d: info %q command %v, want %q %v", i, b.Info, b.IsCommand(), w.info, w.command)
				}
				m, err := ParseMarker(b.Before)
				if tc.markerErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.markerErr) {
						t.Errorf("block %d: marker error %v, want one with %q", i, err, tc.markerErr)
					}
				} else if err != nil || m != w.marker {
					t.Errorf("block %d: marker %+v (%v), want %+v", i, m, err, w.marker)
				}
				if !w.command {
					continue
				}
				if got := b.Commands(); strings.Join(got, "\n") != strings.Join(w.commands, "\n") {
					t.Errorf("block %d: commands %q, want %q", i, got, w.commands)
				}
			}
		})
	}
}

// TestCheckRunner pins what a run marker may name.
func TestCheckRunner(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("test/x/x_test.go", "package x\n\nfunc TestReads(t *testing.T) {\n\tblocks, err := docs.RunBy(root, \"test/x TestReads\")\n}\n\nfunc TestIgnores(t *testing.T) {\n\trun(\"make test\")\n}\n\nfunc TestAfter(t *testing.T) {\n\tdocs.RunBy(root, \"\")\n}\n")
	write(".ci/run", "#!/bin/sh\nmake lint\nmake test   # everything\n")
	block := Block{Info: "sh", Lines: []string{"make test   # every test", "make lint"}}
	for _, tc := range []struct {
		name, runner string
		block        Block
		err          string
	}{
		{name: "a test that reads its blocks", runner: "test/x TestReads", block: block},
		{name: "the same with ./", runner: "./test/x TestReads", block: block},
		{name: "a test that does not read them", runner: "test/x TestIgnores", block: block, err: "does not read the blocks"},
		{name: "a test that does not exist", runner: "test/x TestNone", block: block, err: "no func TestNone"},
		{name: "a package that does not exist", runner: "test/y TestReads", block: block, err: "no package with tests"},
		{name: "a script holding every command", runner: ".ci/run", block: block},
		{name: "a script missing a command", runner: ".ci/run", block: Block{Info: "sh", Lines: []string{"make test", "make sandbox"}}, err: `does not run "make sandbox"`},
		{name: "a command only the prefix of the script's", runner: ".ci/run", block: Block{Info: "sh", Lines: []string{"make tes"}}, err: "does not run"},
		{name: "a script that does not exist", runner: ".ci/none", block: block, err: "names neither"},
		{name: "neither form", runner: "the CI, somehow", block: block, err: "write <!-- run:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRunner(root, tc.block, tc.runner)
			if tc.err == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}
