// Package tmpl is the template dialect of rule files: Go text/template with
// `<<` and `>>` delimiters (so PromQL's braces need no escaping), the data
// each kind of template is executed with, and a static check of which fields
// a template uses. It is shared by the loader (which validates templates) and
// the renderer (which executes them), so both agree on what a field is.
package tmpl

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// Delimiters of every rule template, as in prometheus-adapter.
const (
	LeftDelim  = "<<"
	RightDelim = ">>"
)

// QueryArgs is the data of metricsQuery, containerQuery and nodeQuery
// templates. Field names and meanings are prometheus-adapter's.
type QueryArgs struct {
	// Series is the Prometheus metric name.
	Series string
	// LabelMatchers is the comma-joined PromQL label matchers of the request.
	LabelMatchers string
	// LabelValuesByName maps each matched label to its values, regex-escaped
	// and joined with "|", ready to be placed inside a `=~"..."` string.
	LabelValuesByName map[string]string
	// GroupBy is the comma-joined list of labels to aggregate by.
	GroupBy string
	// GroupBySlice is GroupBy as a slice.
	GroupBySlice []string
}

// ResourceArgs is the data of a resources.template: the singular resource
// and the group with "." and "-" replaced by "_".
type ResourceArgs struct {
	Group    string
	Resource string
}

// QueryFields and ResourceFields are the top-level fields each kind of
// template may use (kept in sync with the structs by a test).
var (
	QueryFields    = []string{"Series", "LabelMatchers", "LabelValuesByName", "GroupBy", "GroupBySlice"}
	ResourceFields = []string{"Group", "Resource"}
)

// MaxOutput bounds what a template may render. Queries are short; the
// bound keeps a mistaken or hostile rule file from exhausting memory.
const MaxOutput = 1 << 20

// funcs replaces builtins that could allocate without bound.
var funcs = template.FuncMap{"printf": boundedSprintf}

// Parse parses a rule template. A missing map key renders as "" (the same
// as `index`), not as "<no value>", which would only make broken PromQL.
//
// Rule templates are expressions over their data, so Parse refuses what
// could make one run without bound: `define`, `block` and `template`
// (recursion), `range` over anything but a field of the data (Go templates
// can range over an integer), and printf widths above 9999.
func Parse(name, text string) (*template.Template, error) {
	t, err := template.New(name).Delims(LeftDelim, RightDelim).Option("missingkey=zero").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template: %s: define and block are not supported in rule templates", name)
	}
	if err := checkBounded(t.Tree.Root); err != nil {
		return nil, fmt.Errorf("template: %s: %w", name, err)
	}
	return t, nil
}

// checkBounded rejects `template` calls and `range` over anything but a
// field of the data (`.GroupBySlice`, `$.LabelValuesByName`).
func checkBounded(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkBounded(c); err != nil {
				return err
			}
		}
	case *parse.TemplateNode:
		return fmt.Errorf("template calls are not supported in rule templates")
	case *parse.RangeNode:
		if !isDataField(n.Pipe) {
			return fmt.Errorf("range %s: range only over a field of the template data, e.g. <<range .GroupBySlice>>", n.Pipe)
		}
		if err := checkBounded(n.List); err != nil {
			return err
		}
		return checkBounded(n.ElseList)
	case *parse.IfNode:
		if err := checkBounded(n.List); err != nil {
			return err
		}
		return checkBounded(n.ElseList)
	case *parse.WithNode:
		if err := checkBounded(n.List); err != nil {
			return err
		}
		return checkBounded(n.ElseList)
	}
	return nil
}

func isDataField(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1 && a.Ident[0] == "$"
	}
	return false
}

// boundedSprintf is printf without `*` and with widths and precisions
// below 10000, since fmt allocates the padded result before writing it.
func boundedSprintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		digits := 0
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return "", fmt.Errorf("printf: * widths are not supported")
			case c >= '0' && c <= '9':
				if digits++; digits > 4 {
					return "", fmt.Errorf("printf: widths and precisions above 9999 are not supported")
				}
				continue
			case strings.IndexByte("+-# .[]", c) >= 0:
				digits = 0
				continue
			}
			break // the verb
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// Execute runs t on data and returns the output. It never panics (a
// template is user input, and text/template re-panics on runtime errors)
// and stops at MaxOutput bytes.
func Execute(t *template.Template, data any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("template %s failed: %v", t.Name(), r)
		}
	}()
	var w limitedWriter
	if err := t.Execute(&w, data); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

type limitedWriter struct{ b strings.Builder }

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxOutput {
		return 0, fmt.Errorf("the output exceeds %d bytes", MaxOutput)
	}
	return w.b.Write(p)
}

// FieldRef is a reference to a top-level field of the template's data.
type FieldRef struct {
	Name string
}

// RootFields returns the references t makes to fields of its data (the
// dot at top level, and `$` anywhere), in text order. References inside
// `range` and `with` bodies, where the dot is something else, are skipped:
// execution with sample data catches those.
func RootFields(t *template.Template) []FieldRef {
	if t == nil || t.Tree == nil {
		return nil
	}
	var refs []FieldRef
	walk(t.Tree.Root, true, &refs)
	return refs
}

func walk(n parse.Node, dotIsRoot bool, refs *[]FieldRef) {
	switch n := n.(type) {
	case nil:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, dotIsRoot, refs)
		}
	case *parse.ActionNode:
		walk(n.Pipe, dotIsRoot, refs)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, dotIsRoot, refs)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, dotIsRoot, refs)
		}
	case *parse.ChainNode:
		walk(n.Node, dotIsRoot, refs)
	case *parse.FieldNode:
		if dotIsRoot && len(n.Ident) > 0 {
			*refs = append(*refs, FieldRef{Name: n.Ident[0]})
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			*refs = append(*refs, FieldRef{Name: n.Ident[1]})
		}
	case *parse.IfNode:
		walk(n.Pipe, dotIsRoot, refs)
		walk(n.List, dotIsRoot, refs)
		walk(n.ElseList, dotIsRoot, refs)
	case *parse.RangeNode:
		walk(n.Pipe, dotIsRoot, refs)
		walk(n.List, false, refs)
		walk(n.ElseList, dotIsRoot, refs)
	case *parse.WithNode:
		walk(n.Pipe, dotIsRoot, refs)
		walk(n.List, false, refs)
		walk(n.ElseList, dotIsRoot, refs)
	case *parse.TemplateNode:
		walk(n.Pipe, dotIsRoot, refs)
	}
}

// StringConstants returns the string literals in t's actions, in text
// order, e.g. "pod" in <<index .LabelValuesByName "pod">>.
func StringConstants(t *template.Template) []string {
	if t == nil || t.Tree == nil {
		return nil
	}
	var out []string
	inspect(t.Tree.Root, func(n parse.Node) {
		if s, ok := n.(*parse.StringNode); ok {
			out = append(out, s.Text)
		}
	})
	return out
}

// inspect calls f for n and every node below it.
func inspect(n parse.Node, f func(parse.Node)) {
	if n == nil {
		return
	}
	f(n)
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			inspect(c, f)
		}
	case *parse.ActionNode:
		inspect(n.Pipe, f)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, v := range n.Decl {
			inspect(v, f)
		}
		for _, c := range n.Cmds {
			inspect(c, f)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			inspect(a, f)
		}
	case *parse.ChainNode:
		inspect(n.Node, f)
	case *parse.IfNode:
		inspect(n.Pipe, f)
		inspect(n.List, f)
		inspect(n.ElseList, f)
	case *parse.RangeNode:
		inspect(n.Pipe, f)
		inspect(n.List, f)
		inspect(n.ElseList, f)
	case *parse.WithNode:
		inspect(n.Pipe, f)
		inspect(n.List, f)
		inspect(n.ElseList, f)
	case *parse.TemplateNode:
		inspect(n.Pipe, f)
	}
}
