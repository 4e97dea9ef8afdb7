package naming_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
)

// FuzzParseAndCheck feeds arbitrary bytes (seeded with every rule file
// under rules/testdata) to ParseAndCheck, offline (nil mapper) and with a
// mapper: it must not panic, it returns a config or problems (the config is
// nil only with problems), every problem names the file and says something,
// and the problems come sorted by place.
func FuzzParseAndCheck(f *testing.F) {
	files, _ := filepath.Glob("../testdata/*/*.yaml")
	if len(files) == 0 {
		f.Fatal("no seed files in ../testdata")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		f.Add(data, true)
	}
	f.Add([]byte(""), false)
	f.Add([]byte("rules: [{}]\nexternalRules: [{}]\nresourceRules: {cpu: {}, memory: {}}\n"), true)

	f.Fuzz(func(t *testing.T, data []byte, withMapper bool) {
		var mapper naming.ResourceMapper
		if withMapper {
			mapper = naming.Builtin
		}
		cfg, probs := naming.ParseAndCheck("fuzz.yaml", data, mapper)
		if cfg == nil && len(probs) == 0 {
			t.Fatal("no config and no problems")
		}
		for _, p := range probs {
			if p.File != "fuzz.yaml" || p.Message == "" || p.Line < 0 || p.Column < 0 {
				t.Fatalf("bad problem %+v", p)
			}
		}
		if !slices.IsSortedFunc(probs, func(a, b config.Problem) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		}) {
			t.Fatalf("problems not sorted by place: %v", probs)
		}
	})
}
