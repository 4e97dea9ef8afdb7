package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a 1-based line and column in a rule file; zero means unknown.
type Pos struct {
	Line   int
	Column int
}

// Positions records where the fields of one YAML mapping were written:
// field name -> position of its value; "" -> the mapping (or, for an
// override, its label key) itself. It lets checks that run after loading
// point at the offending text.
type Positions map[string]Pos

// Of returns the position of field, or of the mapping when the field was
// not written.
func (p Positions) Of(field string) Pos {
	if pos, ok := p[field]; ok {
		return pos
	}
	return p[""]
}

// Has reports whether field was written in the file.
func (p Positions) Has(field string) bool {
	_, ok := p[field]
	return ok
}

// Invalid reports whether field was written but could not be decoded (or
// was misspelled), so a problem was already reported for it and checks for
// its absence should stay quiet.
func (p Positions) Invalid(field string) bool {
	_, ok := p["!"+field]
	return ok
}

// Problem is one thing wrong with a rule file.
type Problem struct {
	File    string
	Line    int
	Column  int
	Message string
	// Warning marks a rule that prometheus-adapter loads but that cannot
	// answer (every request for it fails there): the file still loads,
	// with that rule's unanswerable part left out, so a file that runs
	// under prometheus-adapter runs unchanged.
	Warning bool
}

// String formats the problem as `file:line:col: message`, the form editors
// and CI log parsers recognise (`file: message` when the place is unknown),
// with "warning: " before the message of a warning.
func (p Problem) String() string {
	msg := p.Message
	if p.Warning {
		msg = "warning: " + msg
	}
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, msg)
}

// Problems is every problem found in one or more rule files. As an error it
// prints one problem per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error, or nil when there are none (a nil Problems in
// an error interface would not compare equal to nil).
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Errors returns the problems that stop a file from loading.
func (ps Problems) Errors() Problems { return ps.filter(false) }

// Warnings returns the problems a file loads with.
func (ps Problems) Warnings() Problems { return ps.filter(true) }

func (ps Problems) filter(warning bool) Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning == warning {
			out = append(out, p)
		}
	}
	return out
}

// Sort orders problems by file, line and column, keeping the order of
// problems at the same place.
func (ps Problems) Sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// Add appends a problem at pos in file.
func (ps *Problems) Add(file string, pos Pos, format string, args ...any) {
	*ps = append(*ps, Problem{File: file, Line: pos.Line, Column: pos.Column, Message: fmt.Sprintf(format, args...)})
}

// Warn appends a warning at pos in file.
func (ps *Problems) Warn(file string, pos Pos, format string, args ...any) {
	*ps = append(*ps, Problem{File: file, Line: pos.Line, Column: pos.Column, Message: fmt.Sprintf(format, args...), Warning: true})
}
