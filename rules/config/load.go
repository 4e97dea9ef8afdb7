package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// MaxFileBytes is the largest rule file Parse accepts (4 MiB). Real rule
// files are a few KiB; the bound keeps a wrong or hostile file from
// costing the adapter memory and parse time.
const MaxFileBytes = 4 << 20

// Load reads and parses the rule file at path. See Parse.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Message: fmt.Sprintf("cannot read the rule file: %v", err)}}
	}
	return Parse(path, data)
}

// ReadFile reads the rule file at path, but no more than one byte past
// MaxFileBytes: enough for Parse to reject a file that is too large
// without reading all of it.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// Parse decodes and validates a rule file; filename is only used in
// problems. The error, when not nil, is a Problems listing everything found.
// The returned Config is nil only when the YAML itself does not parse, the
// file is larger than MaxFileBytes, or its aliases expand past the decoding
// budget (see expansionBudget); otherwise it holds whatever could be
// decoded, for tools that want to show it alongside the problems.
func Parse(filename string, data []byte) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, Problems{{File: filename, Message: fmt.Sprintf(
			"the rule file is larger than the limit of %d bytes (%d MiB); a rule file is normally a few KiB: check that this is the right file, or split the rules across adapters", MaxFileBytes, MaxFileBytes>>20)}}
	}
	root, probs := parseYAML(filename, data)
	if root == nil {
		if len(probs) > 0 {
			return nil, probs
		}
		// An empty file is a valid config with no rules, as in prometheus-adapter.
		return &Config{File: filename, Pos: Positions{}}, nil
	}
	d := &decoder{file: filename, problems: probs, budget: expansionBudget(root)}
	cfg := d.config(root)
	if d.exhausted != nil {
		// The walk stopped anywhere: the problems it found are a random
		// sample and checking what it decoded would report things that
		// are not in the file, so only the YAML's own problems are kept.
		return nil, append(probs, *d.exhausted)
	}
	d.problems = append(d.problems, Validate(cfg)...)
	d.problems.Sort()
	return cfg, d.problems.Err()
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the content of the file's single document, or nil for
// an empty file.
func parseYAML(filename string, data []byte) (*yaml.Node, Problems) {
	var probs Problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, Problems{yamlProblem(filename, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		probs.Add(filename, posOf(&extra), "a second YAML document starts here; a rule file holds one document, so merge them or remove the \"---\" line")
	} else if !errors.Is(err, io.EOF) {
		probs = append(probs, yamlProblem(filename, err))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, probs
	}
	return doc.Content[0], probs
}

func yamlProblem(filename string, err error) Problem {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		// yaml.v3 reports the line where the enclosing block starts, which
		// may be above the actual mistake.
		return Problem{File: filename, Line: line, Column: 1, Message: "invalid YAML at or below this line: " + m[2] + "; fix the YAML syntax (indentation, quotes, stray commas)"}
	}
	return Problem{File: filename, Message: "invalid YAML: " + err.Error()}
}
