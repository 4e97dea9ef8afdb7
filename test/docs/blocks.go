package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File   string   // the file, relative to the repository's root, with slashes
	Line   int      // the opening fence's line, from 1
	Info   string   // the info string's first word, in lower case
	Lines  []string // the lines between the fences, the fence's indentation removed
	Before string   // the line just before the opening fence, trimmed
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// ScanBlocks returns the fenced code blocks of a Markdown document, in
// order. A fence is three or more backticks or tildes; it closes on a
// fence of the same character at least as long with nothing after it, so
// a block may show a shorter fence inside it. An unclosed block runs to
// the end of the document, as CommonMark has it.
func ScanBlocks(file, doc string) []Block {
	var out []Block
	lines := strings.Split(doc, "\n")
	var open *Block
	var fence, indent string
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if open != nil {
			if run := fenceRun(trimmed); run != "" && run[0] == fence[0] && len(run) >= len(fence) && strings.TrimSpace(trimmed[len(run):]) == "" {
				out = append(out, *open)
				open = nil
				continue
			}
			open.Lines = append(open.Lines, strings.TrimPrefix(line, indent))
			continue
		}
		run := fenceRun(trimmed)
		if run == "" {
			continue
		}
		info := strings.TrimSpace(trimmed[len(run):])
		if run[0] == '`' && strings.Contains(info, "`") {
			continue // not a fence: a code span at the start of a line
		}
		fence, indent = run, line[:len(line)-len(trimmed)]
		open = &Block{File: file, Line: i + 1}
		if f := strings.Fields(info); len(f) > 0 {
			open.Info = strings.ToLower(f[0])
		}
		if i > 0 {
			open.Before = strings.TrimSpace(lines[i-1])
		}
	}
	if open != nil {
		out = append(out, *open)
	}
	return out
}

// fenceRun returns the run of three or more backticks or tildes line
// starts with, or "".
func fenceRun(line string) string {
	if line == "" || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return line[:n]
}

// shellInfo are the info strings of command blocks.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true}

// knownCommands start the first line of a block without an info string
// that is a command block all the same.
var knownCommands = map[string]bool{
	"make": true, "kubectl": true, "helm": true, "tidal": true, "go": true, "docker": true,
	"podman": true, "crane": true, "skopeo": true, "promtool": true, "kustomize": true,
	"curl": true, "git": true, "export": true, "cd": true, "sudo": true, "apt-get": true,
	"cp": true, "ln": true, "kubectl-tidal": true,
}

// IsCommand says whether b shows commands to run: a shell info string, or
// none and a first line that is a prompt (`$ `) or starts with a known
// command. Output, YAML, PromQL and the like are not commands.
func (b Block) IsCommand() bool {
	if shellInfo[b.Info] {
		return true
	}
	if b.Info != "" {
		return false
	}
	for _, l := range b.Lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "$ ") {
			return true
		}
		first, _, _ := strings.Cut(l, " ")
		envPrefix := strings.Contains(first, "=") && strings.Contains(l, " ") // VAR=value cmd
		return knownCommands[first] || envPrefix
	}
	return false
}

// Marker is what the line before a command block says about it.
type Marker struct {
	Kind string // "run", "not run", or "" when there is no marker
	Text string // who runs the block, or why it is not run
}

var markerRE = regexp.MustCompile(`^<!--\s*(run|not run):(.*?)-->$`)

// ParseMarker reads a `<!-- run: ... -->` or `<!-- not run: ... -->`
// line. A comment that mentions running but is neither is an error, so a
// misspelt marker does not read as a missing one.
func ParseMarker(line string) (Marker, error) {
	line = strings.TrimSpace(line)
	if m := markerRE.FindStringSubmatch(line); m != nil {
		text := strings.TrimSpace(m[2])
		if text == "" {
			return Marker{}, fmt.Errorf("%q: the marker needs a text after %q", line, m[1]+":")
		}
		return Marker{Kind: m[1], Text: text}, nil
	}
	if strings.HasPrefix(line, "<!--") && strings.Contains(strings.ToLower(line), "run") {
		return Marker{}, fmt.Errorf("%q is not a marker: write <!-- run: <package dir> <TestName> --> or <!-- not run: <reason> -->", line)
	}
	return Marker{}, nil
}

// Commands returns the commands of a command block, one string each: a
// line ending in a backslash continues on the next, comment and blank
// lines are dropped, and in a console block, or one with a `$ ` prompt,
// only the prompt lines count (the rest is output). Trailing comments
// stay: the shell drops them.
func (b Block) Commands() []string {
	prompts := b.Info == "console" || b.Info == "shell-session"
	for _, l := range b.Lines {
		prompts = prompts || strings.HasPrefix(strings.TrimSpace(l), "$ ")
	}
	var out []string
	cur := ""
	for _, l := range b.Lines {
		t := strings.TrimSpace(l)
		if cur == "" {
			if prompts && !strings.HasPrefix(t, "$ ") {
				continue
			}
			t = strings.TrimPrefix(t, "$ ")
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\")
			continue
		}
		out = append(out, cur+t)
		cur = ""
	}
	if cur != "" {
		out = append(out, strings.TrimSpace(cur))
	}
	return out
}

// Script is the block as a bash script that stops at the first failing
// command.
func (b Block) Script() string {
	return "set -euo pipefail\n" + strings.Join(b.Commands(), "\n") + "\n"
}

// RunBy returns every command block of the repository at root whose
// marker is `<!-- run: runner -->`, for the test named there to run: it
// reads the commands from the Markdown, so the docs cannot drift from what
// is run. runner is "<package dir> <TestName>", as in the marker.
func RunBy(root, runner string) ([]Block, error) {
	blocks, err := RepoBlocks(root)
	if err != nil {
		return nil, err
	}
	want := strings.Join(strings.Fields(runner), " ")
	var out []Block
	for _, b := range blocks {
		if !b.IsCommand() {
			continue
		}
		m, err := ParseMarker(b.Before)
		if err == nil && m.Kind == "run" && normalizeRunner(m.Text) == normalizeRunner(want) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no command block in the repository's Markdown is marked <!-- run: %s -->", want)
	}
	return out, nil
}

// normalizeRunner makes "./test/docs TestX" and "test/docs TestX" one.
func normalizeRunner(s string) string {
	f := strings.Fields(s)
	if len(f) > 0 {
		f[0] = strings.TrimPrefix(strings.TrimSuffix(f[0], "/"), "./")
	}
	return strings.Join(f, " ")
}

// RepoBlocks returns the fenced blocks of every Markdown file under root.
func RepoBlocks(root string) ([]Block, error) {
	files, err := MarkdownFiles(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, ScanBlocks(filepath.ToSlash(rel), string(raw))...)
	}
	return out, nil
}

// MarkdownFiles lists every .md file under root but build output, VCS
// metadata, dependencies and test data.
func MarkdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "_output" || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}
