package promql

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

func TestMatchersFromSelector(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     string // matchers joined by ","
	}{
		{"empty", "", ""},
		{"equals", "verb=GET", `verb="GET"`},
		{"double equals", "verb==GET", `verb="GET"`},
		{"not equals (prometheus-adapter answers 500 here)", "verb!=GET", `verb!="GET"`},
		{"in", "verb in (GET,POST)", `verb=~"GET|POST"`},
		{"in with one value", "verb in (GET)", `verb=~"GET"`},
		{"in escapes regex characters", "host in (a.example.com,b.example.com)", `host=~"a\\.example\\.com|b\\.example\\.com"`},
		{"notin", "verb notin (GET,POST)", `verb!~"GET|POST"`},
		{"exists", "verb", `verb!=""`},
		{"does not exist", "!verb", `verb=""`},
		{"sorted by key, values sorted", "z=1,a in (y,x),m", `a=~"x|y",m!="",z="1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := MatchersFromSelector(sel)
			if err != nil {
				t.Fatalf("MatchersFromSelector(%q): %v", tt.selector, err)
			}
			got := make([]string, len(ms))
			for i, m := range ms {
				got[i] = m.String()
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("MatchersFromSelector(%q) = %s, want %s", tt.selector, strings.Join(got, ","), tt.want)
			}
		})
	}
}

func TestMatchersFromSelectorNil(t *testing.T) {
	ms, err := MatchersFromSelector(nil)
	if err != nil || len(ms) != 0 {
		t.Errorf("MatchersFromSelector(nil) = %v, %v; want no matchers", ms, err)
	}
}

func TestMatchersFromSelectorErrors(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     string
	}{
		{"greater than", "replicas>3", `operator gt compares numbers`},
		{"less than", "replicas<3", `operator lt compares numbers`},
		{"kubernetes label key with a prefix", "app.kubernetes.io/name=web", `"app.kubernetes.io/name": not a Prometheus label name`},
		{"dash in the key", "pod-template-hash=abc", `not a Prometheus label name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			_, err = MatchersFromSelector(sel)
			var se *SelectorError
			if !errors.As(err, &se) {
				t.Fatalf("MatchersFromSelector(%q) error = %v, want a *SelectorError", tt.selector, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// Selectors built in code skip Kubernetes' validation: "__name__" would
// select another metric, so it is refused.
func TestMatchersFromSelectorReservedName(t *testing.T) {
	sel := labels.SelectorFromValidatedSet(labels.Set{"__name__": "secret_metric"})
	_, err := MatchersFromSelector(sel)
	var se *SelectorError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "reserved by Prometheus") {
		t.Errorf("error = %v, want a *SelectorError about reserved names", err)
	}
}

// Requirements built in code (not parsed) are not validated by Kubernetes;
// every operator and value count must still be handled.
func TestRequirementMatcher(t *testing.T) {
	tests := []struct {
		name    string
		op      selection.Operator
		values  []string
		want    string
		wantErr string
	}{
		{"equals", selection.Equals, []string{`a"b`}, `l="a\"b"`, ""},
		{"equals with two values", selection.Equals, []string{"a", "b"}, "", "takes one value"},
		{"not equals without value", selection.NotEquals, nil, "", "takes one value"},
		{"in without values", selection.In, nil, "", "needs at least one value"},
		{"notin escapes", selection.NotIn, []string{"a|b", "c"}, `l!~"a\\|b|c"`, ""},
		{"exists with a value", selection.Exists, []string{"x"}, "", "takes no value"},
		{"does not exist", selection.DoesNotExist, nil, `l=""`, ""},
		{"invalid UTF-8", selection.Equals, []string{"\xff"}, "", "not UTF-8"},
		{"unknown operator", selection.Operator("~="), []string{"x"}, "", "unsupported operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := requirementMatcher("l", tt.op, tt.values)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.want {
				t.Errorf("matcher = %s, want %s", m, tt.want)
			}
		})
	}
}
