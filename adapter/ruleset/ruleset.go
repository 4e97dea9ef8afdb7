// Package ruleset compiles a rule file into what the adapter runs: per
// rule, its resource mapping, namer, query template and Prometheus
// backend. A Set is immutable; reloading the file builds a new one.
package ruleset

import (
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// Kind says which API a rule serves.
type Kind int

// The kinds: a rule of `rules` (custom.metrics.k8s.io) or of
// `externalRules` (external.metrics.k8s.io).
const (
	Custom Kind = iota
	External
)

// Rule is one compiled rule.
type Rule struct {
	// ID is the rule's place in the file ("rules[0]",
	// "externalRules[1]"), used in logs, errors and metric labels.
	ID          string
	Kind        Kind
	SeriesQuery string
	Resources   *naming.Resources
	Namer       *naming.Namer
	Query       *promql.Query
	// Client is the rule's backend.
	Client prom.Client
}

// Set is a compiled rule file.
type Set struct {
	Custom, External []*Rule
	// Resource are the resourceRules (metrics.k8s.io); nil when the file
	// has none.
	Resource *ResourceRules
	// File is the rule file's path; "" when no file was given.
	File string
	// Warnings are the problems the file loaded with: rules, or parts of
	// them, left out because they cannot answer (see naming.Check).
	Warnings config.Problems
}

// Empty serves nothing; the adapter runs with it when --config is unset.
func Empty() *Set { return &Set{} }

// BackendsFunc builds the backends of a rule file (see prom.NewBackends).
type BackendsFunc func(named []config.Backend) (*prom.Backends, error)

// Load checks and compiles the content of the rule file at path. The
// error lists every problem (a config.Problems) when the file is invalid:
// the same ones `tidal rules check` prints, all at once.
func Load(path string, data []byte, mapper naming.ResourceMapper, backends BackendsFunc) (*Set, error) {
	cfg, probs := naming.ParseAndCheck(path, data, mapper)
	if errs := probs.Errors(); len(errs) > 0 {
		return nil, errs
	}
	s, err := Compile(cfg, mapper, backends)
	if err != nil {
		return nil, err
	}
	s.Warnings = probs.Warnings()
	for _, w := range s.Warnings {
		klog.InfoS("Rule file warning", "problem", w.String())
	}
	return s, nil
}

// Compile builds a Set from a checked config.
func Compile(cfg *config.Config, mapper naming.ResourceMapper, backends BackendsFunc) (*Set, error) {
	b, err := backends(cfg.Backends)
	if err != nil {
		return nil, fmt.Errorf("%s: backends: %w", cfg.File, err)
	}
	s := &Set{File: cfg.File}
	var errs []error
	for i, r := range cfg.Rules {
		rule, err := compile(fmt.Sprintf("rules[%d]", i), Custom, r, mapper, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.File, err))
			continue
		}
		s.Custom = append(s.Custom, rule)
	}
	for i, r := range cfg.ExternalRules {
		rule, err := compile(fmt.Sprintf("externalRules[%d]", i), External, r, mapper, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.File, err))
			continue
		}
		if r.Resources.IsNamespaced() && !rule.Resources.MapsNamespaces() {
			continue // cannot limit a request to its namespace: a warning of naming.Check
		}
		s.External = append(s.External, rule)
	}
	if cfg.ResourceRules != nil {
		rr, err := compileResourceRules(cfg.ResourceRules, mapper, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.File, err))
		}
		s.Resource = rr
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func compile(id string, kind Kind, r config.Rule, mapper naming.ResourceMapper, b *prom.Backends) (*Rule, error) {
	res, err := naming.NewResources(r.Resources, mapper)
	if err != nil {
		return nil, fmt.Errorf("%s.resources: %w", id, err)
	}
	if kind == Custom && !res.MapsNamespaces() {
		res = res.ClusterScopedOnly() // a warning of naming.Check
	}
	namer, err := naming.NewNamer(r.SeriesFilters, r.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	var q *promql.Query
	if kind == External {
		q, err = promql.NewExternalQuery(r.MetricsQuery, res, r.Resources.IsNamespaced())
	} else {
		q, err = promql.NewQuery(r.MetricsQuery, res)
	}
	if err != nil {
		return nil, fmt.Errorf("%s.metricsQuery: %w", id, err)
	}
	client, err := b.Get(r.Backend)
	if err != nil {
		return nil, fmt.Errorf("%s.backend: %w", id, err)
	}
	return &Rule{ID: id, Kind: kind, SeriesQuery: r.SeriesQuery, Resources: res, Namer: namer, Query: q, Client: client}, nil
}

// Rules returns every rule, custom ones first.
func (s *Set) Rules() []*Rule {
	out := make([]*Rule, 0, len(s.Custom)+len(s.External))
	return append(append(out, s.Custom...), s.External...)
}
