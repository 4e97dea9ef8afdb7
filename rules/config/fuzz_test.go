package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// FuzzParse feeds arbitrary bytes (seeded with every test file) to Parse:
// it must not panic or hang, and every problem must name the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../testdata/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data)
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no problems")
			}
			return
		}
		probs, ok := err.(config.Problems)
		if !ok || len(probs) == 0 {
			t.Fatalf("error %v is not Problems", err)
		}
		for _, p := range probs {
			if p.File != "fuzz.yaml" || p.Message == "" || p.Line < 0 || p.Column < 0 {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}
