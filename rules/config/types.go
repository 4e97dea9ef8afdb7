// Package config is the rule file: its types, strict loading with a
// position for every value, and validation that reports every problem at
// once as `file:line:col: what is wrong; what to do`.
//
// The format is prometheus-adapter's (v0.12): a file that loads there loads
// here unchanged and means the same. Tidal's additions are optional and
// marked "Tidal extension" below.
//
// Checks that need to know the cluster's resources (normalising "pod",
// "pods" and "Pod" to one resource) live in package naming; this package
// needs nothing but the file.
package config

import "github.com/prometheus/common/model"

// Config is one rule file.
type Config struct {
	// Rules expose series as custom metrics (custom.metrics.k8s.io).
	Rules []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`
	// ExternalRules expose series as external metrics (external.metrics.k8s.io).
	ExternalRules []Rule `json:"externalRules,omitempty" yaml:"externalRules,omitempty"`
	// ResourceRules serve CPU and memory for metrics.k8s.io; nil when absent.
	ResourceRules *ResourceRules `json:"resourceRules,omitempty" yaml:"resourceRules,omitempty"`
	// Backends names Prometheus-compatible servers that rules can query
	// instead of the default one (set by the adapter's flags).
	// Tidal extension.
	Backends []Backend `json:"backends,omitempty" yaml:"backends,omitempty"`

	// File is the name the config was loaded from, used in problems.
	File string `json:"-" yaml:"-"`
	// Pos records where the top-level keys were written.
	Pos Positions `json:"-" yaml:"-"`
}

// Rule maps a family of Prometheus series to metrics. The same type serves
// rules and externalRules, as in prometheus-adapter.
type Rule struct {
	// SeriesQuery is a Prometheus series selector used for discovery
	// (`/api/v1/series`), e.g. `{__name__=~"^container_.*",namespace!=""}`.
	SeriesQuery string `json:"seriesQuery" yaml:"seriesQuery"`
	// SeriesFilters further filter the discovered series by name; all must pass.
	SeriesFilters []SeriesFilter `json:"seriesFilters,omitempty" yaml:"seriesFilters,omitempty"`
	// Resources maps series labels to Kubernetes resources.
	Resources ResourceMapping `json:"resources,omitempty" yaml:"resources,omitempty"`
	// Name turns a series name into the metric name shown in the API.
	Name NameMapping `json:"name,omitempty" yaml:"name,omitempty"`
	// MetricsQuery is the PromQL template run for a request; see package tmpl
	// for its fields.
	MetricsQuery string `json:"metricsQuery,omitempty" yaml:"metricsQuery,omitempty"`
	// Backend is the name of an entry of Config.Backends to query for this
	// rule (discovery and requests). Empty means the default backend.
	// Tidal extension.
	Backend string `json:"backend,omitempty" yaml:"backend,omitempty"`

	Pos Positions `json:"-" yaml:"-"`
}

// SeriesFilter keeps series whose name matches Is, or does not match IsNot.
// Exactly one of the two is set.
type SeriesFilter struct {
	Is    string `json:"is,omitempty" yaml:"is,omitempty"`
	IsNot string `json:"isNot,omitempty" yaml:"isNot,omitempty"`

	Pos Positions `json:"-" yaml:"-"`
}

// ResourceMapping maps Prometheus labels to Kubernetes group-resources.
// Template and Overrides may be combined; an override wins for its label.
type ResourceMapping struct {
	// Template renders a label name from `.Group` and `.Resource`, e.g.
	// `kube_<<.Group>>_<<.Resource>>`; it is also matched backwards to find
	// which labels name resources.
	Template string `json:"template,omitempty" yaml:"template,omitempty"`
	// Overrides maps a label name to a group-resource.
	Overrides map[string]GroupResource `json:"overrides,omitempty" yaml:"overrides,omitempty"`
	// Namespaced (externalRules only; default true) adds the requesting HPA's
	// namespace to the query. false leaves the namespace to the metric selector.
	Namespaced *bool `json:"namespaced,omitempty" yaml:"namespaced,omitempty"`

	Pos Positions `json:"-" yaml:"-"`
}

// IsNamespaced returns Namespaced with its default (true) applied.
func (m ResourceMapping) IsNamespaced() bool {
	return m.Namespaced == nil || *m.Namespaced
}

// GroupResource is the target of an override. Resource may be written
// singular, plural or as a kind ("pod", "pods", "Pod"): it is normalised
// against the cluster's resources by package naming.
type GroupResource struct {
	Group    string `json:"group,omitempty" yaml:"group,omitempty"`
	Resource string `json:"resource" yaml:"resource"`

	// Pos[""] is the position of the label key of this override.
	Pos Positions `json:"-" yaml:"-"`
}

// NameMapping turns series names into API metric names.
type NameMapping struct {
	// Matches is a regular expression (RE2) on the series name; empty means
	// `.*`. Series that don't match are skipped.
	Matches string `json:"matches,omitempty" yaml:"matches,omitempty"`
	// As is the API name, with `$1`/`${name}` expanding capture groups of
	// Matches. Empty means `$0` with no capture group and `$1` with one.
	As string `json:"as,omitempty" yaml:"as,omitempty"`

	Pos Positions `json:"-" yaml:"-"`
}

// ResourceRules serve metrics.k8s.io (what `kubectl top` and CPU/memory HPAs
// read). Both CPU and Memory are required when the section is present.
type ResourceRules struct {
	CPU    ResourceRule `json:"cpu" yaml:"cpu"`
	Memory ResourceRule `json:"memory" yaml:"memory"`
	// Window is reported as the metrics' window; it should match the range
	// used by the queries' rate().
	Window model.Duration `json:"window" yaml:"window"`

	Pos Positions `json:"-" yaml:"-"`
}

// ResourceRule queries one resource (CPU or memory) for containers and nodes.
type ResourceRule struct {
	// ContainerQuery is a query template returning one sample per container,
	// grouped by the pod label and ContainerLabel.
	ContainerQuery string `json:"containerQuery" yaml:"containerQuery"`
	// NodeQuery is a query template returning one sample per node.
	NodeQuery string `json:"nodeQuery" yaml:"nodeQuery"`
	// Resources must map the pod, node and namespace labels.
	Resources ResourceMapping `json:"resources" yaml:"resources"`
	// ContainerLabel is the label holding the container name.
	ContainerLabel string `json:"containerLabel" yaml:"containerLabel"`

	Pos Positions `json:"-" yaml:"-"`
}

// Backend is a Prometheus-compatible server (Prometheus, Thanos, Mimir,
// Cortex...). Tidal extension.
type Backend struct {
	// Name is how rules refer to the backend.
	Name string `json:"name" yaml:"name"`
	// URL is the base URL of the Prometheus HTTP API (without /api/v1).
	URL string `json:"url" yaml:"url"`
	// Headers are sent with every request, e.g. a tenant header
	// `X-Scope-OrgID: team-a` for Mimir, Cortex or Thanos.
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`

	// How the backend is authenticated and its certificate verified. The
	// default backend's credentials, CA and headers (the --prometheus-*
	// flags) are not sent to a named backend unless InheritAuth says so:
	// a rule file may name any URL. Files are absolute paths, read by the
	// adapter (the token file on every request, so rotation works).

	// TokenFile holds a bearer token sent in the Authorization header.
	TokenFile string `json:"tokenFile,omitempty" yaml:"tokenFile,omitempty"`
	// CAFile is a PEM bundle verifying the backend's serving certificate;
	// empty means the system's roots.
	CAFile string `json:"caFile,omitempty" yaml:"caFile,omitempty"`
	// ClientCertFile and ClientKeyFile are a client certificate for mutual
	// TLS; set both or neither.
	ClientCertFile string `json:"clientCertFile,omitempty" yaml:"clientCertFile,omitempty"`
	ClientKeyFile  string `json:"clientKeyFile,omitempty" yaml:"clientKeyFile,omitempty"`
	// HTTPConfig is a prometheus/common http_config file (basic_auth,
	// authorization, oauth2, tls_config, proxy_url, http_headers), as
	// --prometheus-http-config, for what the fields above cannot say. It
	// must not set what they set.
	HTTPConfig string `json:"httpConfig,omitempty" yaml:"httpConfig,omitempty"`
	// InheritAuth sends the default backend's credentials, TLS settings
	// and headers to this backend, as if it were the default one. Not
	// together with the fields above.
	InheritAuth bool `json:"inheritAuth,omitempty" yaml:"inheritAuth,omitempty"`

	Pos Positions `json:"-" yaml:"-"`
}

// HasOwnAuth reports whether the backend says how to authenticate or
// verify it itself.
func (b Backend) HasOwnAuth() bool {
	return b.TokenFile != "" || b.CAFile != "" || b.ClientCertFile != "" || b.ClientKeyFile != "" || b.HTTPConfig != ""
}
