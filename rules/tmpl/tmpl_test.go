package tmpl

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The field lists are what config validation allows; they must be exactly
// the fields of the structs templates run on.
func TestFieldListsMatchStructs(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		typ    reflect.Type
	}{
		{"query", QueryFields, reflect.TypeFor[QueryArgs]()},
		{"resource", ResourceFields, reflect.TypeFor[ResourceArgs]()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for i := range tt.typ.NumField() {
				names = append(names, tt.typ.Field(i).Name)
			}
			if !slices.Equal(names, tt.fields) {
				t.Errorf("fields %v, struct has %v", tt.fields, names)
			}
		})
	}
}

func TestRootFields(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"plain", `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, []string{"Series", "LabelMatchers", "GroupBy"}},
		{"map field", `<<.LabelValuesByName.pod>>`, []string{"LabelValuesByName"}},
		{"index", `<<index .LabelValuesByName "pod">>`, []string{"LabelValuesByName"}},
		{"unknown fields are reported too", `<<.Serie>> <<.LabelMatchersByName>>`, []string{"Serie", "LabelMatchersByName"}},
		{"range body has another dot", `<<range .GroupBySlice>><<.Foo>><<end>>`, []string{"GroupBySlice"}},
		{"dollar is the root everywhere", `<<range .GroupBySlice>><<$.Series>><<end>>`, []string{"GroupBySlice", "Series"}},
		{"with body has another dot but else does not", `<<with .Series>><<.X>><<else>><<.GroupBy>><<end>>`, []string{"Series", "GroupBy"}},
		{"if", `<<if .GroupBy>>by (<<.GroupBy>>)<<end>>`, []string{"GroupBy", "GroupBy"}},
		{"variables are not fields", `<<$x := .Series>><<$x>>`, []string{"Series"}},
		{"chain", `<<(.LabelValuesByName).pod>>`, []string{"LabelValuesByName"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.name, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range RootFields(tp) {
				got = append(got, f.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("RootFields = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExecute(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		data    any
		want    string
		wantErr string
	}{
		{"query", `<<.Series>>{<<.LabelMatchers>>}`, QueryArgs{Series: "up", LabelMatchers: `a="b"`}, `up{a="b"}`, ""},
		{"missing map key is empty, like index", `[<<.LabelValuesByName.pod>>]`, QueryArgs{LabelValuesByName: map[string]string{}}, "[]", ""},
		{"unknown field is an error", `<<.Nope>>`, QueryArgs{}, "", "can't evaluate field Nope"},
		{"index out of range is an error", `<<index .GroupBySlice 2>>`, QueryArgs{GroupBySlice: []string{"a"}}, "", "index out of range"},
		{"calling a non-function is an error", `<<call .Series>>`, QueryArgs{Series: "x"}, "", "non-function"},
		{"resource", `kube_<<.Group>>_<<.Resource>>`, ResourceArgs{Group: "apps", Resource: "deployment"}, "kube_apps_deployment", ""},
		{"printf works", `<<printf "%s_%03d" .Series 7>>`, QueryArgs{Series: "x"}, "x_007", ""},
		{"printf huge width is refused", `<<printf "%01000000000d" 1>>`, QueryArgs{}, "", "above 9999"},
		{"printf star width is refused", `<<printf "%*d" 1000000000 1>>`, QueryArgs{}, "", "* widths"},
		{"output is bounded", `<<range .GroupBySlice>><<printf "%9999s" "">><<printf "%9999s" "">><<end>>`, QueryArgs{GroupBySlice: make([]string, 100)}, "", "output exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.name, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Execute(tp, tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Execute = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseDelimiters(t *testing.T) {
	tests := []struct {
		name string
		text string
		ok   bool
	}{
		{"PromQL braces are text", `sum(x{a="b"}) by (c)`, true},
		{"Go delimiters are text", `{{.Series}}`, true},
		{"unclosed action", `<<.Series`, false},
		{"unknown function", `<<lower .Series>>`, false},
		{"range over a field", `<<range $i, $l := .GroupBySlice>><<$l>><<end>>`, true},
		{"range over the root's field", `<<range $.GroupBySlice>><<.>><<end>>`, true},
		{"range over an integer could run forever", `<<range 1000000000>><<end>>`, false},
		{"range over a variable", `<<$n := 5>><<range $n>>x<<end>>`, false},
		{"nested range over an integer", `<<if .Series>><<range 10>><<end>><<end>>`, false},
		{"define could recurse", `<<define "a">><<template "a">><<end>><<template "a">>`, false},
		{"template call", `<<template "x">>`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.name, tt.text)
			if (err == nil) != tt.ok {
				t.Errorf("Parse(%q) error = %v, want ok=%v", tt.text, err, tt.ok)
			}
		})
	}
}
