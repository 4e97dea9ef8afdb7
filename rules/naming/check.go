package naming

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Check finds the problems of cfg that need resource names normalised:
// overrides naming unknown resources or two labels naming one resource, and
// rules whose resources leave requests unanswerable (a namespaced rule that
// cannot map the namespace, resource rules without pod, node or namespace
// labels). Run it after config.Parse.
//
// A custom or external rule that cannot answer is a warning, not an error:
// prometheus-adapter loads such a file and fails each request for that
// rule, so refusing it would stop a file that runs there from loading. The
// adapter leaves out what cannot answer (see Unanswerable).
//
// With a nil mapper, Check works offline: it uses Builtin, and resources
// Builtin does not know (custom resources) are not reported, only compared
// by name.
func Check(cfg *config.Config, mapper ResourceMapper) config.Problems {
	c := &checker{file: cfg.File, mapper: mapper}
	if mapper == nil {
		c.mapper, c.offline = Builtin, true
	}
	for i, r := range cfg.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		mapped := c.overrides(r.Resources, path+".resources")
		c.customRule(r, path, mapped)
	}
	for i, r := range cfg.ExternalRules {
		path := fmt.Sprintf("externalRules[%d]", i)
		mapped := c.overrides(r.Resources, path+".resources")
		if r.Resources.IsNamespaced() && !r.Resources.Pos.Invalid("namespaced") && r.Resources.Template == "" && !mapped[NamespacesResource] {
			c.warn(where(r.Resources.Pos, r.Pos), "%s: namespaced is true (the default) but no label maps to namespaces, so no request can be limited to the HPA's namespace (prometheus-adapter fails every one); the rule is not served: add overrides: {namespace: {resource: namespace}} or set namespaced: false", path)
		}
	}
	if rr := cfg.ResourceRules; rr != nil {
		for _, res := range []struct {
			key  string
			rule config.ResourceRule
		}{{"cpu", rr.CPU}, {"memory", rr.Memory}} {
			if !rr.Pos.Has(res.key) {
				continue
			}
			path := "resourceRules." + res.key + ".resources"
			mapped := c.overrides(res.rule.Resources, path)
			if res.rule.Resources.Template != "" {
				continue
			}
			for _, need := range []schema.GroupResource{PodsResource, NodesResource, NamespacesResource} {
				if !mapped[need] {
					singular := strings.TrimSuffix(need.Resource, "s")
					c.add(where(res.rule.Resources.Pos, res.rule.Pos), "%s: no label maps to %s, which metrics.k8s.io queries need; add %s: {resource: %s} to the overrides (with your label name)", path, need.Resource, singular, singular)
				}
			}
		}
	}
	c.problems.Sort()
	return c.problems
}

type checker struct {
	file     string
	mapper   ResourceMapper
	offline  bool
	problems config.Problems
}

func (c *checker) add(pos config.Pos, format string, args ...any) {
	c.problems.Add(c.file, pos, format, args...)
}

func (c *checker) warn(pos config.Pos, format string, args ...any) {
	c.problems.Warn(c.file, pos, format, args...)
}

// where returns the first known position.
func where(ps ...config.Positions) config.Pos {
	for _, p := range ps {
		if pos := p.Of(""); pos.Line > 0 {
			return pos
		}
	}
	return config.Pos{}
}

// overrides normalises the overrides of m, reports unknown resources and
// labels sharing a resource, and returns the (known) resources mapped.
func (c *checker) overrides(m config.ResourceMapping, path string) map[schema.GroupResource]bool {
	type item struct {
		label string
		gr    config.GroupResource
	}
	items := make([]item, 0, len(m.Overrides))
	for l, gr := range m.Overrides {
		items = append(items, item{l, gr})
	}
	// File order, so the later of two clashing labels is the one reported.
	slices.SortFunc(items, func(a, b item) int {
		pa, pb := a.gr.Pos.Of(""), b.gr.Pos.Of("")
		return cmp.Or(cmp.Compare(pa.Line, pb.Line), cmp.Compare(pa.Column, pb.Column), cmp.Compare(a.label, b.label))
	})
	mapped := map[schema.GroupResource]bool{}
	first := map[schema.GroupResource]string{}
	for _, it := range items {
		if strings.TrimSpace(it.gr.Resource) == "" {
			continue // config.Validate reports it
		}
		gr, err := Normalize(c.mapper, it.gr.Group, it.gr.Resource)
		if err != nil {
			if !c.offline || !meta.IsNoMatchError(err) {
				c.add(it.gr.Pos.Of("resource"), "%s.overrides.%s: unknown resource %q%s (%v); use a name from `kubectl api-resources`", path, it.label, it.gr.Resource, groupNote(it.gr.Group), err)
				continue
			}
			// Offline and not a built-in: compare by name only, and leave it
			// out of the result, since its scope is unknown.
			gr = schema.GroupResource{Group: it.gr.Group, Resource: strings.ToLower(it.gr.Resource)}
		} else {
			mapped[gr] = true
		}
		if other, dup := first[gr]; dup {
			c.add(it.gr.Pos.Of(""), "%s.overrides: labels %q and %q both map to %s; keep one of them (prometheus-adapter would use one of them at random)", path, other, it.label, gr)
			continue
		}
		first[gr] = it.label
	}
	return mapped
}

func groupNote(group string) string {
	if group == "" {
		return ""
	}
	return fmt.Sprintf(" in group %q", group)
}

func (c *checker) customRule(r config.Rule, path string, mapped map[schema.GroupResource]bool) {
	if r.Resources.Template != "" {
		return
	}
	if len(r.Resources.Overrides) == 0 {
		c.warn(where(r.Resources.Pos, r.Pos), "%s.resources maps no label to a resource, so the rule serves no metric; add overrides, e.g. {namespace: {resource: namespace}, pod: {resource: pod}}, or a template", path)
		return
	}
	var namespaced []string
	for gr := range mapped {
		if !IsClusterScoped(gr) {
			namespaced = append(namespaced, gr.String())
		}
	}
	if len(namespaced) > 0 && !mapped[NamespacesResource] {
		slices.Sort(namespaced)
		c.warn(where(r.Resources.Pos, r.Pos), "%s.resources maps %s but no label maps to namespaces, so requests for them cannot be limited to their namespace (prometheus-adapter fails every one); they are not served: add namespace: {resource: namespace} to the overrides (with your label name)", path, strings.Join(namespaced, ", "))
	}
}
