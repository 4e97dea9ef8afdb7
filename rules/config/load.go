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

// Load reads and parses the rule file at path. See Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Message: fmt.Sprintf("cannot read the rule file: %v", err)}}
	}
	return Parse(path, data)
}

// Parse decodes and validates a rule file; filename is only used in
// problems. The error, when not nil, is a Problems listing everything found.
// The returned Config is nil only when the YAML itself does not parse;
// otherwise it holds whatever could be decoded, for tools that want to show
// it alongside the problems.
func Parse(filename string, data []byte) (*Config, error) {
	root, probs := parseYAML(filename, data)
	if root == nil {
		if len(probs) > 0 {
			return nil, probs
		}
		// An empty file is a valid config with no rules, as in prometheus-adapter.
		return &Config{File: filename, Pos: Positions{}}, nil
	}
	d := &decoder{file: filename, problems: probs}
	cfg := d.config(root)
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
