package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

const (
	valuesTableStart = "<!-- values table: generated from values.yaml by TestChartDocsValues; TIDAL_UPDATE_DOCS=1 go test ./test/manifests -run TestChartDocsValues rewrites it -->\n"
	valuesTableEnd   = "<!-- end of the values table -->\n"
)

// valueDoc is a values.yaml comment block's description: the lines from
// the first "# -- " on (earlier lines and commented-out examples are not
// descriptions).
func valueDoc(comment string) string {
	var lines []string
	started := false
	for _, l := range strings.Split(comment, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if strings.HasPrefix(l, "-- ") {
			started, l = true, strings.TrimPrefix(l, "-- ")
		}
		if started {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}

// documented reports whether a node or anything under it has a description.
func documented(v *yaml.Node) bool {
	if v.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		if valueDoc(v.Content[i].HeadComment) != "" || documented(v.Content[i+1]) {
			return true
		}
	}
	return false
}

// valuesTable renders values.yaml as a Markdown table: a row per value with
// its default and description. A map nothing under which is described is
// one row (resources, the security contexts).
func valuesTable(t *testing.T) (table string, undocumented []string) {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir(t), "values.yaml")), &root); err != nil {
		t.Fatal(err)
	}
	cell := func(s string) string {
		return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
	}
	var b strings.Builder
	b.WriteString("| value | default | meaning |\n| --- | --- | --- |\n")
	var walk func(prefix string, m *yaml.Node)
	walk = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			path, doc := prefix+k.Value, valueDoc(k.HeadComment)
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 && documented(v) {
				if doc != "" {
					b.WriteString("| `" + path + "` | | " + cell(doc) + " |\n")
				}
				walk(path+".", v)
				continue
			}
			var def any
			if err := v.Decode(&def); err != nil {
				t.Fatalf("values.yaml %s: %v", path, err)
			}
			js, err := json.Marshal(def)
			if err != nil {
				t.Fatalf("values.yaml %s: %v", path, err)
			}
			if doc == "" {
				undocumented = append(undocumented, path)
			}
			b.WriteString("| `" + path + "` | `" + cell(string(js)) + "` | " + cell(doc) + " |\n")
		}
	}
	walk("", root.Content[0])
	return b.String(), undocumented
}

// TestChartDocsValues: docs/chart.md's values table is values.yaml's, and
// every row is described.
func TestChartDocsValues(t *testing.T) {
	table, undocumented := valuesTable(t)
	if len(undocumented) > 0 {
		t.Errorf("values.yaml values without a `# -- ` description: %v", undocumented)
	}
	path := filepath.Join(repoRoot(t), "docs", "chart.md")
	doc := string(readFile(t, path))
	start, end := strings.Index(doc, valuesTableStart), strings.Index(doc, valuesTableEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/chart.md lacks the markers %q and %q", valuesTableStart, valuesTableEnd)
	}
	want := doc[:start+len(valuesTableStart)] + table + doc[end:]
	if want == doc {
		return
	}
	if os.Getenv("TIDAL_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("docs/chart.md: values table rewritten")
		return
	}
	t.Error("docs/chart.md's values table differs from values.yaml: TIDAL_UPDATE_DOCS=1 go test ./test/manifests -run TestChartDocsValues rewrites it")
}
