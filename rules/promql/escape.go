// Package promql renders a rule's query template for one request, exactly
// as prometheus-adapter builds .LabelMatchers, .LabelValuesByName, .GroupBy
// and .GroupBySlice, and converts Kubernetes label selectors to PromQL label
// matchers.
//
// Everything a request supplies (object names, namespaces, selector label
// names and values) goes through this package's escaping, so no request can
// change the structure of the query: values are quoted for the PromQL lexer,
// values joined into a regular expression are regex-escaped first, and label
// names must be plain Prometheus label names.
package promql

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote returns s as a PromQL double-quoted string literal that the PromQL
// lexer reads back as exactly s. It escapes `\`, `"` and every character
// that is not printable, including newlines (which end a string in PromQL)
// and U+FFFD (which the PromQL lexer rejects when written literally). Bytes
// that are not UTF-8 become \x escapes; callers reject such values first,
// since Prometheus label values are UTF-8.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	writeEscaped(&b, s)
	b.WriteByte('"')
	return b.String()
}

// Escape returns s escaped for use between the double quotes of a PromQL
// string, i.e. Quote(s) without the quotes. Templates receive
// .LabelValuesByName in this form, since they place it inside `"..."`.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	writeEscaped(&b, s)
	return b.String()
}

func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(b, `\x%02x`, s[i])
			i++
			continue
		}
		i += size
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r == utf8.RuneError || !unicode.IsPrint(r):
				if r <= 0xFFFF {
					fmt.Fprintf(b, `\u%04x`, r)
				} else {
					fmt.Fprintf(b, `\U%08x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
}

// RegexAlternation returns a regular expression (RE2, as Prometheus uses)
// that matches exactly the given values, each regex-escaped: a "." in an
// object name matches only a ".".
func RegexAlternation(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = regexp.QuoteMeta(v)
	}
	return strings.Join(quoted, "|")
}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// IsLabelName reports whether s is a Prometheus label name in the classic
// syntax, which can be written into a query without quoting.
func IsLabelName(s string) bool { return labelNameRE.MatchString(s) }
