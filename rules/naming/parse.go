package naming

import (
	"errors"
	"slices"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// ParseAndCheck is config.Parse followed by Check on whatever could be
// decoded, so `tidal rules check` and the adapter report the same complete
// set of problems at once rather than the naming ones only after the
// others are fixed. The problems are sorted by place; the Config is nil
// only when the YAML itself does not parse.
func ParseAndCheck(filename string, data []byte, mapper ResourceMapper) (*config.Config, config.Problems) {
	cfg, err := config.Parse(filename, data)
	probs := asProblems(filename, err)
	if cfg == nil {
		return nil, probs
	}
	probs = append(probs, Check(cfg, mapper)...)
	probs.Sort()
	return cfg, probs
}

// asProblems returns err's problems in a slice of their own (appending to
// the one inside err would share its array).
func asProblems(filename string, err error) config.Problems {
	if err == nil {
		return nil
	}
	var probs config.Problems
	if errors.As(err, &probs) {
		return slices.Clone(probs)
	}
	return config.Problems{{File: filename, Message: err.Error()}}
}
