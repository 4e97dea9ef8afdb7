// Package wants checks rule-file problems against expectations written in
// the files themselves: a comment `# want "text" ...` on a line says that a
// problem reported at that line contains each quoted text (Go string syntax,
// double quotes or backquotes). Every problem must be wanted and every want
// must be met, so a bad test file documents exactly what it tests.
package wants

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Parse returns line number -> wanted substrings.
func Parse(data []byte) (map[int][]string, error) {
	wants := map[int][]string{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		idx := bytes.LastIndex(line, []byte("# want "))
		if idx < 0 {
			continue
		}
		rest := strings.TrimSpace(string(line[idx+len("# want "):]))
		for rest != "" {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: bad want %q: %v", i+1, rest, err)
			}
			s, _ := strconv.Unquote(q)
			wants[i+1] = append(wants[i+1], s)
			rest = strings.TrimSpace(rest[len(q):])
		}
	}
	return wants, nil
}

// Check reports (as test errors) problems of file that no want on their
// line matches, and wants that no problem matches.
func Check(t testing.TB, file string, data []byte, problems config.Problems) {
	t.Helper()
	wants, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	met := map[int][]bool{}
	for line, ws := range wants {
		met[line] = make([]bool, len(ws))
	}
	for _, p := range problems {
		if p.File != file {
			t.Errorf("problem for another file: %s", p)
			continue
		}
		matched := false
		for i, w := range wants[p.Line] {
			if strings.Contains(p.Message, w) {
				met[p.Line][i] = true
				matched = true
			}
		}
		if !matched {
			t.Errorf("unexpected problem: %s", p)
		}
	}
	for line, ws := range wants {
		for i, w := range ws {
			if !met[line][i] {
				t.Errorf("%s:%d: no problem containing %q; got:\n%s", file, line, w, problems.Error())
			}
		}
	}
}
