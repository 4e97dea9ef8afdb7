package promql

import (
	"regexp"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

var promParser = parser.NewParser(parser.Options{})

// parseValue reads back a quoted string with the real PromQL parser, as the
// value of an equality matcher.
func parseValue(t *testing.T, quoted string) string {
	t.Helper()
	ms, err := promParser.ParseMetricSelector(`{l=` + quoted + `}`)
	if err != nil {
		t.Fatalf("PromQL does not parse %s: %v", quoted, err)
	}
	if len(ms) != 1 || ms[0].Name != "l" || ms[0].Type != labels.MatchEqual {
		t.Fatalf("unexpected matchers %v", ms)
	}
	return ms[0].Value
}

func TestQuote(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"plain", "frontend-server-abcd-0123", `"frontend-server-abcd-0123"`},
		{"empty", "", `""`},
		{"double quote", `a"b`, `"a\"b"`},
		{"backslash", `a\b`, `"a\\b"`},
		{"backslash before quote", `\"`, `"\\\""`},
		{"newline ends a PromQL string, so it is escaped", "a\nb", `"a\nb"`},
		{"carriage return and tab", "a\r\tb", `"a\r\tb"`},
		{"control character", "a\x00b\x7f", `"a\u0000b\u007f"`},
		{"printable unicode kept", "café-日本", `"café-日本"`},
		{"U+FFFD is rejected by the PromQL lexer when literal", "a\uFFFDb", `"a\ufffdb"`},
		{"line separator", "a\u2028b", `"a\u2028b"`},
		{"outside the BMP", "a\U0001F600b\U000E0001", `"a` + "\U0001F600" + `b\U000e0001"`},
		{"single quote and backquote are plain", "it's `x`", "\"it's `x`\""},
		{"regex escapes survive", `a\.b`, `"a\\.b"`},
		{"closing brace and comma", `"} or vector(1) or {a="`, `"\"} or vector(1) or {a=\""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Quote(tt.value)
			if got != tt.want {
				t.Errorf("Quote(%q) = %s, want %s", tt.value, got, tt.want)
			}
			if back := parseValue(t, got); back != tt.value {
				t.Errorf("PromQL reads %s back as %q, want %q", got, back, tt.value)
			}
			if inner := Escape(tt.value); `"`+inner+`"` != got {
				t.Errorf("Escape(%q) = %s, want Quote without the quotes", tt.value, inner)
			}
		})
	}
}

func TestQuoteInvalidUTF8(t *testing.T) {
	// Not a value we render (callers reject it), but quoting must still
	// keep it inside the string.
	got := Quote("a\xffb\"")
	if got != `"a\xffb\""` {
		t.Errorf("Quote = %s", got)
	}
	if _, err := promParser.ParseMetricSelector(`{l=` + got + `}`); err != nil {
		t.Errorf("quoted invalid UTF-8 does not lex: %v", err)
	}
}

func TestRegexAlternation(t *testing.T) {
	tests := []struct {
		name      string
		values    []string
		want      string
		matches   []string
		noMatches []string
	}{
		{"one", []string{"web-1"}, `web-1`, []string{"web-1"}, []string{"web-10", "xweb-1"}},
		{"several", []string{"a", "b"}, `a|b`, []string{"a", "b"}, []string{"a|b", "ab", ""}},
		{"dots are literal", []string{"web.1"}, `web\.1`, []string{"web.1"}, []string{"webx1"}},
		{"metacharacters", []string{`a|b`, `.*`, `(x)`, `[y]`, `{2}`, `^$`, `+?`, `\d`}, `a\|b|\.\*|\(x\)|\[y\]|\{2\}|\^\$|\+\?|\\d`,
			[]string{`a|b`, `.*`, `(x)`, `[y]`, `{2}`, `^$`, `+?`, `\d`}, []string{"a", "b", "x", "y", "1", ""}},
		{"empty value", []string{""}, ``, []string{""}, []string{"a"}},
		{"unicode", []string{"日本.x"}, `日本\.x`, []string{"日本.x"}, []string{"日本yx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RegexAlternation(tt.values)
			if got != tt.want {
				t.Fatalf("RegexAlternation(%q) = %s, want %s", tt.values, got, tt.want)
			}
			// Prometheus anchors regex matchers: check with its own matcher.
			m, err := labels.NewMatcher(labels.MatchRegexp, "l", got)
			if err != nil {
				t.Fatalf("Prometheus rejects %s: %v", got, err)
			}
			for _, v := range tt.matches {
				if !m.Matches(v) {
					t.Errorf("%s does not match %q", got, v)
				}
			}
			for _, v := range tt.noMatches {
				if m.Matches(v) {
					t.Errorf("%s matches %q", got, v)
				}
			}
			if _, err := regexp.Compile(got); err != nil {
				t.Errorf("RE2 rejects %s: %v", got, err)
			}
		})
	}
}

func TestIsLabelName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"simple", "pod", true},
		{"underscore and digits", "_kube_pod_2", true},
		{"reserved is still a name", "__name__", true},
		{"empty", "", false},
		{"leading digit", "2pod", false},
		{"kubernetes label key", "app.kubernetes.io/name", false},
		{"dash", "pod-name", false},
		{"colon is for metric names only", "a:b", false},
		{"space", "a b", false},
		{"unicode", "pöd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLabelName(tt.in); got != tt.want {
				t.Errorf("IsLabelName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
