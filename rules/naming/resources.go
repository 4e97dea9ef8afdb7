package naming

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/tmpl"
)

// groupSanitizer turns an API group into label-name characters, as
// prometheus-adapter does ("networking.k8s.io" -> "networking_k8s_io").
var groupSanitizer = strings.NewReplacer(".", "_", "-", "_")

// SanitizeGroup returns the form of group a resources.template sees.
func SanitizeGroup(group string) string { return groupSanitizer.Replace(group) }

// Resources maps labels to group-resources and back for one rule. Build it
// with NewResources; it is immutable and safe for concurrent use (the
// mapper must be too).
type Resources struct {
	mapper     ResourceMapper
	byLabel    map[string]schema.GroupResource
	byResource map[schema.GroupResource]string
	template   *template.Template
	// extractors match the labels the template can render, with groups
	// named "resource" and (when the label holds one) "group".
	extractors []*regexp.Regexp
	hasGroup   bool // the template uses .Group
	// clusterOnly leaves namespaced resources out (see ClusterScopedOnly).
	clusterOnly bool
}

// MapsNamespaces reports whether a label can name a namespace, which every
// request for a namespaced resource needs: a template can, overrides only
// when one maps namespaces.
func (r *Resources) MapsNamespaces() bool {
	_, ok := r.byResource[NamespacesResource]
	return ok || r.template != nil
}

// ClusterScopedOnly returns r serving only cluster-scoped resources: what
// a rule that cannot name a namespace can still answer (prometheus-adapter
// lists its namespaced resources and fails every request for them).
func (r *Resources) ClusterScopedOnly() *Resources {
	c := *r
	c.clusterOnly = true
	return &c
}

// NewResources normalises the overrides of m and compiles its template.
// It fails when an override names a resource the mapper does not know, or
// when two labels name the same resource (prometheus-adapter would then
// use one of them at random).
func NewResources(m config.ResourceMapping, mapper ResourceMapper) (*Resources, error) {
	r := &Resources{
		mapper:     mapper,
		byLabel:    map[string]schema.GroupResource{},
		byResource: map[schema.GroupResource]string{},
	}
	labels := make([]string, 0, len(m.Overrides))
	for l := range m.Overrides {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		o := m.Overrides[l]
		gr, err := Normalize(mapper, o.Group, o.Resource)
		if err != nil {
			return nil, fmt.Errorf("override %q: unknown resource %q in group %q: %w", l, o.Resource, o.Group, err)
		}
		if other, dup := r.byResource[gr]; dup {
			return nil, fmt.Errorf("overrides %q and %q both map to %s; keep one", other, l, gr)
		}
		r.byLabel[l] = gr
		r.byResource[gr] = l
	}
	if m.Template != "" {
		t, err := tmpl.Parse("resources.template", m.Template)
		if err != nil {
			return nil, fmt.Errorf("resources.template: %w", err)
		}
		// Extract with the group both present and empty: a template such as
		// `<<if .Group>><<.Group>>_<<end>><<.Resource>>` renders core
		// resources differently.
		withGroup, err := extractor(t, groupSentinel)
		if err != nil {
			return nil, fmt.Errorf("resources.template: %w", err)
		}
		r.template, r.extractors = t, []*regexp.Regexp{withGroup}
		r.hasGroup = withGroup.SubexpIndex("group") >= 0
		if r.hasGroup {
			if core, err := extractor(t, ""); err == nil && core.String() != withGroup.String() {
				r.extractors = append(r.extractors, core)
			}
		}
	}
	return r, nil
}

// Sentinels stand for the fields while turning the template into a regular
// expression; they cannot occur in a template's literal text by accident.
const (
	groupSentinel    = "\x00group\x00"
	resourceSentinel = "\x00resource\x00"
)

// extractor builds the regular expression matching the labels t renders
// when .Group is group (groupSentinel for any group). Unlike
// prometheus-adapter, the template's literal text is escaped, so a "." in
// it matches only a ".".
func extractor(t *template.Template, group string) (*regexp.Regexp, error) {
	out, err := tmpl.Execute(t, tmpl.ResourceArgs{Group: group, Resource: resourceSentinel})
	if err != nil {
		return nil, err
	}
	if !strings.Contains(out, resourceSentinel) {
		return nil, fmt.Errorf("the template must use <<.Resource>>")
	}
	var b strings.Builder
	b.WriteString("^")
	named := map[string]bool{}
	for out != "" {
		gi, ri := strings.Index(out, groupSentinel), strings.Index(out, resourceSentinel)
		next, name, sentinel := -1, "", ""
		switch {
		case gi >= 0 && (ri < 0 || gi < ri):
			next, name, sentinel = gi, "group", groupSentinel
		case ri >= 0:
			next, name, sentinel = ri, "resource", resourceSentinel
		}
		if next < 0 {
			b.WriteString(regexp.QuoteMeta(out))
			break
		}
		b.WriteString(regexp.QuoteMeta(out[:next]))
		// The group is greedy and the resource lazy: resource names have no
		// "_", sanitised groups often do ("kube_networking_k8s_io_ingress").
		expr := ".+?"
		if name == "group" {
			expr = ".+"
		}
		if named[name] {
			// A field used twice: the round trip in ResourceFor checks
			// that both places agree.
			fmt.Fprintf(&b, "(?:%s)", expr)
		} else {
			fmt.Fprintf(&b, "(?P<%s>%s)", name, expr)
			named[name] = true
		}
		out = out[next+len(sentinel):]
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// LabelFor returns the label naming gr: its override, or else the template
// rendered with the singular resource and the sanitised group.
func (r *Resources) LabelFor(gr schema.GroupResource) (string, error) {
	if l, ok := r.byResource[gr]; ok {
		return l, nil
	}
	if r.template == nil {
		return "", fmt.Errorf("no label maps to %s: the rule has no override for it and no template", gr)
	}
	singular, err := r.mapper.ResourceSingularizer(gr.Resource)
	if err != nil {
		return "", fmt.Errorf("no label maps to %s: %w", gr, err)
	}
	l, err := tmpl.Execute(r.template, tmpl.ResourceArgs{Group: SanitizeGroup(gr.Group), Resource: singular})
	if err != nil {
		return "", fmt.Errorf("no label maps to %s: %w", gr, err)
	}
	if !config.IsLabelName(l) {
		return "", fmt.Errorf("no label maps to %s: the template renders %q, which is not a label name", gr, l)
	}
	if other, ok := r.byLabel[l]; ok && other != gr {
		return "", fmt.Errorf("no label maps to %s: the template renders %q, which an override maps to %s", gr, l, other)
	}
	return l, nil
}

// ResourceFor returns the group-resource label names, if any: its
// override, or the resource whose template rendering is exactly label.
// As in prometheus-adapter, any label naming a resource the mapper knows
// maps to it, Prometheus' own target labels included: with
// `<<.Resource>>`, `job` is batch/v1 jobs, and `instance` is whatever
// resource is called instance, if the cluster has one. Labels starting
// with "__" are skipped without asking the mapper: no resource name has
// an underscore.
func (r *Resources) ResourceFor(label string) (schema.GroupResource, bool) {
	if gr, ok := r.byLabel[label]; ok {
		return gr, true
	}
	if r.template == nil || strings.HasPrefix(label, "__") {
		return schema.GroupResource{}, false
	}
	for _, re := range r.extractors {
		if gr, ok := r.extractResource(re, label); ok {
			return gr, true
		}
	}
	return schema.GroupResource{}, false
}

func (r *Resources) extractResource(re *regexp.Regexp, label string) (schema.GroupResource, bool) {
	m := re.FindStringSubmatch(label)
	if m == nil {
		return schema.GroupResource{}, false
	}
	resource := m[re.SubexpIndex("resource")]
	var gr schema.GroupResource
	if r.hasGroup {
		// The label holds the sanitised group ("networking_k8s_io"), which
		// the mapper cannot look up: find the candidate that sanitises to
		// it ("" for the core group when the extractor has no group).
		group := ""
		if i := re.SubexpIndex("group"); i >= 0 {
			group = m[i]
		}
		candidates, err := r.mapper.ResourcesFor(schema.GroupVersionResource{Resource: resource})
		if err != nil {
			return schema.GroupResource{}, false
		}
		found := false
		for _, c := range candidates {
			if SanitizeGroup(c.Group) == group {
				gr, found = c.GroupResource(), true
				break
			}
		}
		if !found {
			return schema.GroupResource{}, false
		}
	} else {
		// No group in the label: the mapper's priority decides, as with
		// `kubectl get deployment`.
		gvr, err := r.mapper.ResourceFor(schema.GroupVersionResource{Resource: resource})
		if err != nil {
			return schema.GroupResource{}, false
		}
		gr = gvr.GroupResource()
	}
	// Only the label the template renders for gr names it: "pods" is not
	// the pod label of `<<.Resource>>`, and a resource with an override is
	// named by the override only.
	if l, err := r.LabelFor(gr); err != nil || l != label {
		return schema.GroupResource{}, false
	}
	return gr, true
}

// ResourcesForSeries returns the resources a series with the given label
// names maps to, in label order, and whether the series is namespaced
// (it maps to a resource that is not cluster-scoped).
func (r *Resources) ResourcesForSeries(labels []string) (resources []schema.GroupResource, namespaced bool) {
	sorted := append([]string(nil), labels...)
	sort.Strings(sorted)
	seen := map[schema.GroupResource]bool{}
	for _, l := range sorted {
		gr, ok := r.ResourceFor(l)
		if !ok || seen[gr] || (r.clusterOnly && !IsClusterScoped(gr)) {
			continue
		}
		seen[gr] = true
		resources = append(resources, gr)
		if !IsClusterScoped(gr) {
			namespaced = true
		}
	}
	return resources, namespaced
}
