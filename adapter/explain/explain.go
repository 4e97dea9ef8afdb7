// Package explain holds `tidal rules explain`: it runs the adapter's own
// discovery and query rendering once against a Prometheus and prints what
// the rules serve, which series they skip and why, and the PromQL a given
// request would send.
//
// It lives under adapter/ (not rules/) because it runs the adapter's
// packages; rules/ never imports adapter/. The root command attaches it
// under `tidal rules`.
package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/tidal-autoscaler/tidal/adapter/delegate"
	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/objects"
	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/internal/kubeconfig"
	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// Options are the flags of `tidal rules explain`.
type Options struct {
	File       string
	Prometheus prom.FlagOptions
	// MaxAge is how far back series are looked for (--metrics-max-age).
	MaxAge time.Duration
	// Kubeconfig, when set, resolves resources with the cluster's API
	// discovery and lists the objects a --selector matches.
	Kubeconfig string

	// A custom-metrics request: Resource, Namespace, Names or Selector,
	// Metric, MetricSelector.
	Resource       string
	Namespace      string
	Names          []string
	Selector       string
	Metric         string
	MetricSelector string
	// External names an external metric to render instead.
	External string
	// NoQuery renders the request's query without sending it.
	NoQuery bool
	// DelegateExternal, DelegateCustom and DelegateCAFile are the
	// adapter's flags of the same names: explain lists each delegate's
	// metrics and the collisions with the rules (Tidal's rule answers).
	DelegateExternal, DelegateCustom, DelegateCAFile string
}

// NewOptions returns the options with the adapter's defaults.
func NewOptions() *Options {
	return &Options{Prometheus: prom.NewFlagOptions(), MaxAge: time.Minute}
}

// NewCommand returns the `explain` command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "explain --config FILE --prometheus-url URL [request]",
		Short: "Show what a rule file discovers from a Prometheus, what it skips and why, and a request's PromQL",
		Long: `Explain runs the adapter's discovery once against a Prometheus, through the
adapter's own code, and prints per rule: each seriesQuery sent and what it
found, each metric served (API, resources, namespaced), and each series that
was skipped with the reason (a seriesFilter, name.matches, no label mapping
to a resource, or another rule or series serving the same metric first).

With a request it prints the PromQL the adapter would send for it, then the
result (unless --no-query):

  --resource pods --namespace NS (--name N... | --selector SEL) --metric M [--metric-selector SEL]
  --external M [--namespace NS] [--metric-selector SEL]

Without --kubeconfig resources are resolved against the built-in
Kubernetes resources, and --selector needs --kubeconfig to list the
objects it matches.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := o.Validate(); len(errs) > 0 {
				return utilerrors.NewAggregate(errs)
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.File, "config", o.File, "The rule file. Required.")
	o.Prometheus.AddFlags(fs)
	fs.DurationVar(&o.MaxAge, "metrics-max-age", o.MaxAge, "How far back to look for series, as the adapter's --metrics-max-age.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Optional kubeconfig: resolve resources with the cluster's API discovery and list the objects --selector matches.")
	fs.StringVar(&o.Resource, "resource", o.Resource, "Resource of a custom-metrics request, e.g. pods or deployments.apps.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the request.")
	fs.StringArrayVar(&o.Names, "name", o.Names, "Object name of a custom-metrics request; repeat for several (as the adapter renders a wildcard).")
	fs.StringVar(&o.Selector, "selector", o.Selector, "Label selector of a wildcard custom-metrics request (needs --kubeconfig).")
	fs.StringVar(&o.Metric, "metric", o.Metric, "Custom metric name of the request.")
	fs.StringVar(&o.MetricSelector, "metric-selector", o.MetricSelector, "The request's metricLabelSelector.")
	fs.StringVar(&o.External, "external", o.External, "External metric name of the request (instead of --resource/--metric).")
	fs.BoolVar(&o.NoQuery, "no-query", o.NoQuery, "Render the request's PromQL without sending it.")
	fs.StringVar(&o.DelegateExternal, "delegate-external-metrics", o.DelegateExternal, "The adapter's delegate for external metrics: list its metrics and the collisions with the rules (needs --kubeconfig for the credentials).")
	fs.StringVar(&o.DelegateCustom, "delegate-custom-metrics", o.DelegateCustom, "The same for custom metrics.")
	fs.StringVar(&o.DelegateCAFile, "delegate-ca-file", o.DelegateCAFile, "CA bundle verifying the delegates, as the adapter's flag.")
	return cmd
}

// Validate reports every problem with the flags.
func (o *Options) Validate() []error {
	var errs []error
	if o.File == "" {
		errs = append(errs, errors.New("--config is required"))
	} else if _, err := os.Stat(o.File); err != nil {
		errs = append(errs, fmt.Errorf("--config: %w", err))
	}
	errs = append(errs, o.Prometheus.Validate()...)
	if o.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-age must be positive, got %s", o.MaxAge))
	}
	custom := o.Resource != "" || o.Metric != "" || len(o.Names) > 0 || o.Selector != ""
	switch {
	case custom && o.External != "":
		errs = append(errs, errors.New("--external cannot be combined with --resource, --metric, --name or --selector"))
	case custom:
		if o.Resource == "" || o.Metric == "" {
			errs = append(errs, errors.New("a custom-metrics request needs --resource and --metric"))
		}
		if (len(o.Names) > 0) == (o.Selector != "") {
			errs = append(errs, errors.New("a custom-metrics request needs either --name or --selector"))
		}
		if o.Selector != "" && o.Kubeconfig == "" {
			errs = append(errs, errors.New("--selector needs --kubeconfig to list the objects it matches; or name the objects with --name"))
		}
	case o.MetricSelector != "" && o.External == "":
		errs = append(errs, errors.New("--metric-selector needs a request (--resource and --metric, or --external)"))
	}
	if (o.DelegateExternal != "" || o.DelegateCustom != "") && o.Kubeconfig == "" {
		errs = append(errs, errors.New("--delegate-external-metrics and --delegate-custom-metrics need --kubeconfig: the delegate is asked with those credentials, as the adapter asks it with its own"))
	}
	return errs
}

// resolver is what explain needs of the cluster: resource normalisation
// and scope, and (with a cluster) the objects a selector matches.
type resolver struct {
	mapper naming.ResourceMapper
	rest   meta.RESTMapper // nil offline
	meta   metadata.Interface
}

func (r *resolver) resolve(resource string) (schema.GroupVersionResource, bool, error) {
	gr := schema.ParseGroupResource(resource)
	gvr, err := r.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return gvr, false, fmt.Errorf("unknown resource %q: %w", resource, err)
	}
	clustered, err := r.clusterScoped(gvr)
	return gvr, clustered, err
}

// clusterScoped asks the cluster for gvr's scope; offline it knows the
// built-in cluster-scoped resources (naming.IsClusterScoped).
func (r *resolver) clusterScoped(gvr schema.GroupVersionResource) (bool, error) {
	if r.rest == nil {
		return naming.IsClusterScoped(gvr.GroupResource()), nil
	}
	kind, err := r.rest.KindFor(gvr)
	if err != nil {
		return false, err
	}
	mapping, err := r.rest.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return false, err
	}
	return mapping.Scope.Name() == meta.RESTScopeNameRoot, nil
}

// scope is the scope discovery lists gr with: the cluster's, and the
// built-in one when the cluster cannot say.
func (r *resolver) scope(gr schema.GroupResource) string {
	clustered, err := r.clusterScoped(gr.WithVersion(""))
	if err != nil {
		clustered = naming.IsClusterScoped(gr)
	}
	if clustered {
		return "cluster-scoped"
	}
	return "namespaced"
}

// Run loads the rules, runs discovery once and writes the explanation.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	pc, err := o.Prometheus.Config()
	if err != nil {
		return err
	}
	res := &resolver{mapper: naming.Builtin}
	var kc *rest.Config
	if o.Kubeconfig != "" {
		if kc, err = kubeconfig.Load(o.Kubeconfig, "tidal-rules-explain"); err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(kc)
		if err != nil {
			return err
		}
		if res.meta, err = metadata.NewForConfig(kc); err != nil {
			return err
		}
		m := objects.NewMapper(kube.Discovery())
		res.mapper, res.rest = m, m
	}
	data, err := config.ReadFile(o.File)
	if err != nil {
		return err
	}
	defOpts := prom.Options{
		Name: prom.DefaultBackend, URL: pc.URL, HTTPClient: pc.Client, Verb: pc.Verb,
		Timeout: pc.Timeout, MaxResponseBytes: pc.MaxResponseBytes, MaxSeriesResponseBytes: pc.MaxSeriesResponseBytes,
	}
	def, err := prom.New(defOpts)
	if err != nil {
		return err
	}
	set, err := ruleset.Load(o.File, data, res.mapper, func(named []config.Backend) (*prom.Backends, error) {
		return prom.NewBackends(def, defOpts, named)
	})
	if err != nil {
		return fmt.Errorf("loading the rule file: %w", err)
	}
	end := time.Now()
	e := discovery.Explain(ctx, set, end.Add(-o.MaxAge), end)
	Write(out, set, e, res.scope)
	for _, w := range set.Warnings {
		fmt.Fprintln(out, w)
	}
	for _, d := range []struct{ group, url string }{{delegate.ExternalGroup, o.DelegateExternal}, {delegate.CustomGroup, o.DelegateCustom}} {
		if d.url != "" {
			if err := explainDelegate(out, d.group, d.url, o.DelegateCAFile, kc, pc.Timeout, ownNames(d.group, e.Snapshot)); err != nil {
				return err
			}
		}
	}

	switch {
	case o.External != "":
		return o.explainExternal(ctx, out, e.Snapshot)
	case o.Metric != "":
		return o.explainCustom(ctx, out, res, e.Snapshot)
	}
	return nil
}

// Write prints the discovery part of an explanation, rule by rule: per
// served metric, each resource with the label that maps to it and its
// scope ("namespaced" or "cluster-scoped", from scope).
func Write(out io.Writer, set *ruleset.Set, e *discovery.Explanation, scope func(schema.GroupResource) string) {
	byQuery := map[string]discovery.QueryOutcome{}
	for _, q := range e.Queries {
		byQuery[q.Backend+"\x00"+q.SeriesQuery] = q
	}
	bySeries := map[*ruleset.Rule][]discovery.SeriesOutcome{}
	for _, s := range e.Series {
		bySeries[s.Rule] = append(bySeries[s.Rule], s)
	}
	for _, r := range set.Rules() {
		api := "custom.metrics.k8s.io"
		if r.Kind == ruleset.External {
			api = "external.metrics.k8s.io"
		}
		q := byQuery[r.Client.Name()+"\x00"+r.SeriesQuery]
		fmt.Fprintf(out, "%s (%s): seriesQuery %s on backend %q: ", r.ID, api, r.SeriesQuery, r.Client.Name())
		if q.Err != nil {
			fmt.Fprintf(out, "FAILED: %v\n", q.Err)
			continue
		}
		fmt.Fprintf(out, "%d series shapes\n", q.Shapes)
		for _, s := range bySeries[r] {
			if len(s.Served) > 0 {
				if r.Kind == ruleset.External {
					scope := "namespaced"
					if !r.Query.Namespaced() {
						scope = "not namespaced"
					}
					fmt.Fprintf(out, "  metric %s (%s, %s) from series %s\n", s.Metric, api, scope, s.Shape.Name)
				} else {
					fmt.Fprintf(out, "  metric %s (%s) for %s from series %s\n", s.Metric, api, servedList(r, s.Served, scope), s.Shape.Name)
				}
			}
			if s.Skipped != "" {
				fmt.Fprintf(out, "  skipped series %s {%s}: %s\n", s.Shape.Name, strings.Join(s.Shape.Labels, ", "), s.Skipped)
			}
		}
	}
	custom, external := e.Snapshot.CustomMetrics(), e.Snapshot.ExternalMetrics()
	fmt.Fprintf(out, "served: %d custom metrics, %d external metrics\n", len(custom), len(external))
}

// servedList names each resource with the label that maps to it and its
// scope: "jobs.batch (label job, namespaced), namespaces (label
// namespace, cluster-scoped)".
func servedList(r *ruleset.Rule, grs []schema.GroupResource, scope func(schema.GroupResource) string) string {
	s := make([]string, len(grs))
	for i, gr := range grs {
		label, err := r.Resources.LabelFor(gr)
		if err != nil {
			label = "?"
		}
		s[i] = fmt.Sprintf("%s (label %s, %s)", gr, label, scope(gr))
	}
	return strings.Join(s, ", ")
}

func (o *Options) metricSelector() (labels.Selector, error) {
	if o.MetricSelector == "" {
		return labels.Everything(), nil
	}
	sel, err := labels.Parse(o.MetricSelector)
	if err != nil {
		return nil, fmt.Errorf("--metric-selector: %w", err)
	}
	return sel, nil
}

func (o *Options) explainCustom(ctx context.Context, out io.Writer, res *resolver, snap *discovery.Snapshot) error {
	msel, err := o.metricSelector()
	if err != nil {
		return err
	}
	gvr, clustered, err := res.resolve(o.Resource)
	if err != nil {
		return err
	}
	gr := gvr.GroupResource()
	b, ok := snap.Custom(gr, o.Metric)
	if !ok {
		var served []string
		for _, m := range snap.CustomMetrics() {
			if m.Name == o.Metric {
				served = append(served, m.Resource.String())
			}
		}
		if len(served) > 0 {
			return fmt.Errorf("metric %s is not served for %s, only for %s", o.Metric, gr, strings.Join(served, ", "))
		}
		return fmt.Errorf("metric %s is not served for %s: no rule's discovery found a series for it (see the skipped series above)", o.Metric, gr)
	}
	namespace := o.Namespace
	if clustered {
		namespace = ""
	}
	names := append([]string(nil), o.Names...)
	if o.Selector != "" {
		sel, err := labels.Parse(o.Selector)
		if err != nil {
			return fmt.Errorf("--selector: %w", err)
		}
		list, err := res.meta.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return fmt.Errorf("listing %s matching %q: %w", gr, o.Selector, err)
		}
		for _, item := range list.Items {
			names = append(names, item.Name)
		}
		sort.Strings(names)
		fmt.Fprintf(out, "request: %s matching %q in namespace %q: %d objects\n", gr, o.Selector, namespace, len(names))
		if len(names) == 0 {
			fmt.Fprintln(out, "no objects match: the adapter answers an empty list without querying Prometheus")
			return nil
		}
	}
	query, err := b.Rule.Query.Objects(promql.ObjectRequest{
		Series: b.Series, Resource: gr, Namespace: namespace, Names: names, MetricSelector: msel,
	})
	if err != nil {
		return fmt.Errorf("%s: rendering the query: %w", b.Rule.ID, err)
	}
	label, err := b.Rule.Resources.LabelFor(gr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "request: %s/%s served by %s from series %s (resource label %q)\n", gr, o.Metric, b.Rule.ID, b.Series, label)
	fmt.Fprintf(out, "promql: %s\n", query)
	return o.runQuery(ctx, out, b, query, label)
}

func (o *Options) explainExternal(ctx context.Context, out io.Writer, snap *discovery.Snapshot) error {
	msel, err := o.metricSelector()
	if err != nil {
		return err
	}
	b, ok := snap.External(o.External)
	if !ok {
		return fmt.Errorf("external metric %s is not served: no external rule's discovery found a series for it (see the skipped series above)", o.External)
	}
	query, err := b.Rule.Query.External(promql.ExternalRequest{Series: b.Series, Namespace: o.Namespace, MetricSelector: msel})
	if err != nil {
		return fmt.Errorf("%s: rendering the query: %w", b.Rule.ID, err)
	}
	fmt.Fprintf(out, "request: external metric %s served by %s from series %s\n", o.External, b.Rule.ID, b.Series)
	fmt.Fprintf(out, "promql: %s\n", query)
	return o.runQuery(ctx, out, b, query, "")
}

func (o *Options) runQuery(ctx context.Context, out io.Writer, b discovery.Binding, query, label string) error {
	if o.NoQuery {
		return nil
	}
	vec, err := b.Rule.Client.Query(ctx, query, time.Time{})
	if err != nil {
		return fmt.Errorf("the query failed on backend %q: %w", b.Rule.Client.Name(), err)
	}
	fmt.Fprintf(out, "result: %d samples\n", len(vec))
	for _, s := range vec {
		who := s.Metric.String()
		if label != "" {
			if v, ok := s.Metric[model.LabelName(label)]; ok {
				who = string(v)
			} else {
				who += fmt.Sprintf(" (no %q label: the adapter cannot attribute it to an object)", label)
			}
		}
		fmt.Fprintf(out, "  %s = %s\n", who, s.Value)
	}
	return nil
}

// explainDelegate lists what the delegate of group serves and the metrics
// both it and the rules serve, which Tidal's rule answers.
func explainDelegate(out io.Writer, group, url, caFile string, kc *rest.Config, timeout time.Duration, own []string) error {
	d, err := delegate.New(delegate.Options{Group: group, URL: url, CAFile: caFile, Credentials: kc, Timeout: timeout, Refresh: time.Minute})
	if err != nil {
		return err
	}
	if err := d.Refresh(own); err != nil {
		fmt.Fprintf(out, "%s shared with %s: cannot list its metrics: %v\n", group, url, err)
		return nil
	}
	var names []string
	for _, r := range d.Resources() {
		names = append(names, r.Name)
	}
	fmt.Fprintf(out, "%s shared with %s: it lists %d metrics (%s); metrics no rule serves are asked there\n", group, url, len(names), strings.Join(names, ", "))
	if c := d.Collisions(); len(c) > 0 {
		fmt.Fprintf(out, "  served by both, answered by Tidal's rule: %s\n", strings.Join(c, ", "))
	} else {
		fmt.Fprintln(out, "  served by both: none")
	}
	return nil
}

// ownNames are the rules' metrics of group as discovery names them.
func ownNames(group string, snap *discovery.Snapshot) []string {
	if group == delegate.ExternalGroup {
		return snap.ExternalMetrics()
	}
	var own []string
	for _, m := range snap.CustomMetrics() {
		own = append(own, m.Resource.String()+"/"+m.Name)
	}
	return own
}
