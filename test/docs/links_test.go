// Package docs checks the project's Markdown: every relative link in every
// .md file of the repository (README.md, docs/, the packages' READMEs)
// points at a file or directory that exists, and every #anchor at a
// heading of the target file. It reads files only: no server, no network.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// TestRelativeLinks fails on each relative link whose file does not exist,
// or whose anchor names no heading of the Markdown file it points at.
func TestRelativeLinks(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no Markdown files found under " + root)
	}
	anchors := map[string]map[string]bool{} // by absolute path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(raw))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, l := range links(string(raw)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: link %q", rel, l.line, l.target)
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					t.Errorf("%s: an absolute path; write it relative to %s", where, filepath.Dir(rel))
					continue
				}
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if r, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s: points outside the repository", where)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: %s does not exist", where, filepath.ToSlash(mustRel(root, target)))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(strings.ToLower(target), ".md") {
				continue
			}
			if !anchorsOf(target)[anchor] {
				t.Errorf("%s: %s has no heading with the anchor #%s (it has: %s)", where,
					filepath.ToSlash(mustRel(root, target)), anchor, strings.Join(sorted(anchorsOf(target)), ", "))
			}
		}
	}
	t.Logf("%d relative links in %d Markdown files", checked, len(files))
}

// TestLinkParsing pins what the checker reads as a link and as an anchor.
func TestLinkParsing(t *testing.T) {
	doc := "# Title\n" +
		"See [a](a.md), ![img](x/y.png \"t\") and [b](b.md#sec-two).\n" +
		"`[not](code.md)` and ``[nor](this.md)``, and `a span\nacross [lines](no.md)`.\n" +
		"```\n[fenced](no.md)\n# not a heading\n```\n" +
		"<!-- [commented](no.md) -->\n" +
		"[ref]: docs/ref.md\n" +
		"## `tidal explain` and status.tidal.decision\n" +
		"## spec: the autoscaling/v2 fields\n" +
		"## Twice\n## Twice\n" +
		"## [Linked](x.md) *heading* (optional)\n"
	var got []string
	for _, l := range links(doc) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"2:a.md", "2:x/y.png", "2:b.md#sec-two", "10:docs/ref.md", "15:x.md"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links: got %v, want %v", got, want)
	}
	a := headingAnchors(doc)
	for _, w := range []string{"title", "tidal-explain-and-statustidaldecision", "spec-the-autoscalingv2-fields", "twice", "twice-1", "linked-heading-optional"} {
		if !a[w] {
			t.Errorf("no anchor %q in %v", w, sorted(a))
		}
	}
	if a["not-a-heading"] {
		t.Error("a # line inside a fenced block counted as a heading")
	}
}

type link struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the link targets of a Markdown document, outside fenced
// code blocks, code spans and HTML comments, with their line numbers.
func links(doc string) []link {
	text := prose(doc)
	var out []link
	lineOf := func(offset int) int { return strings.Count(text[:offset], "\n") + 1 }
	for _, m := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, link{lineOf(m[2]), text[m[2]:m[3]]})
	}
	for _, m := range refDef.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, link{lineOf(m[2]), text[m[2]:m[3]]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// prose blanks fenced code blocks, code spans and HTML comments out of doc,
// keeping every newline so that offsets map to the same lines.
func prose(doc string) string {
	var b strings.Builder
	fence := ""
	for _, line := range strings.SplitAfter(doc, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			b.WriteString(blank(line))
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			b.WriteString(blank(line))
			continue
		}
		b.WriteString(line)
	}
	text := b.String()
	text = blankCodeSpans(text)
	for {
		i := strings.Index(text, "<!--")
		if i < 0 {
			break
		}
		j := strings.Index(text[i:], "-->")
		if j < 0 {
			j = len(text) - i
		} else {
			j += len("-->")
		}
		text = text[:i] + blank(text[i:i+j]) + text[i+j:]
	}
	return text
}

// blankCodeSpans blanks each code span: a run of n backticks up to the next
// run of exactly n, which may be on a later line of the same paragraph.
func blankCodeSpans(text string) string {
	out := []byte(text)
	run := func(i int) int {
		n := 0
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		return n
	}
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := run(i)
		end := -1
		for j := i + n; j < len(text); {
			if text[j] == '`' {
				m := run(j)
				if m == n {
					end = j + m
					break
				}
				j += m
				continue
			}
			if strings.HasPrefix(text[j:], "\n\n") {
				break // a paragraph ends: no closing run
			}
			j++
		}
		if end < 0 {
			i += n
			continue
		}
		copy(out[i:end], blank(text[i:end]))
		i = end
	}
	return string(out)
}

func blank(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, s)
}

// headingAnchors returns the anchors GitHub gives the ATX headings of doc
// (outside fenced blocks), and explicit <a name|id="..."> anchors.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		level := 0
		for level < len(trimmed) && trimmed[level] == '#' {
			level++
		}
		if level == 0 || level > 6 || (level < len(trimmed) && trimmed[level] != ' ') {
			continue
		}
		slug := slugify(strings.TrimRight(strings.TrimSpace(trimmed[level:]), "#"))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

var headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slugify is GitHub's anchor for a heading's text: the rendered text in
// lower case, without punctuation but hyphens and underscores, spaces as
// hyphens.
func slugify(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	heading = strings.NewReplacer("`", "", "*", "").Replace(strings.TrimSpace(heading))
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isExternal(target string) bool {
	return schemeRE.MatchString(target) || strings.HasPrefix(target, "//")
}

// markdownFiles lists every .md file under root (MarkdownFiles).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func mustRel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}

func sorted(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
