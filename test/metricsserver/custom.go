package metricsserver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// customWindow is the window stated on custom and external samples.
const customWindow int64 = 60

var podsResource = schema.GroupResource{Resource: "pods"}

// metricsProvider serves custom and external metrics from the store.
type metricsProvider struct {
	store *store
	pods  ranker
	now   func() time.Time
}

var _ provider.MetricsProvider = (*metricsProvider)(nil)

// rankedPods returns the pods of namespace matching selector, ordered by
// their rank among their peers (see Rank), and each one's rank.
func (p *metricsProvider) rankedPods(namespace string, selector labels.Selector) ([]*corev1.Pod, map[types.UID]int, error) {
	pods, ranks, err := p.pods.selected(namespace, selector)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return ranks[a.UID] - ranks[b.UID] })
	return pods, ranks, nil
}

func (p *metricsProvider) GetMetricByName(_ context.Context, name types.NamespacedName, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if info.GroupResource == podsResource {
		pod, rank, err := p.pods.named(name.Namespace, name.Name)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if pod != nil {
			if q := p.store.podMetric(info.Metric, pod, rank); q != nil {
				return p.podValue(pod, info.Metric, metricSelector, *q), nil
			}
		}
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	q, ok := p.store.object(objectKey{name.Namespace, info.GroupResource.String(), name.Name, info.Metric})
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	return &custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{
			Kind: info.GroupResource.Resource, APIVersion: info.GroupResource.Group, Name: name.Name, Namespace: name.Namespace,
		},
		Metric:        custom_metrics.MetricIdentifier{Name: info.Metric, Selector: labelSelector(metricSelector)},
		Timestamp:     metav1.NewTime(p.now()),
		WindowSeconds: ptrTo(customWindow),
		Value:         q,
	}, nil
}

func (p *metricsProvider) GetMetricBySelector(_ context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if info.GroupResource != podsResource {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the test metrics server serves selector queries for pods only, not %s", info.GroupResource))
	}
	pods, ranks, err := p.rankedPods(namespace, selector)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	list := &custom_metrics.MetricValueList{}
	for _, pod := range pods {
		if q := p.store.podMetric(info.Metric, pod, ranks[pod.UID]); q != nil {
			list.Items = append(list.Items, *p.podValue(pod, info.Metric, metricSelector, *q))
		}
	}
	return list, nil
}

func (p *metricsProvider) podValue(pod *corev1.Pod, metric string, metricSelector labels.Selector, q resource.Quantity) *custom_metrics.MetricValue {
	return &custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Metric:          custom_metrics.MetricIdentifier{Name: metric, Selector: labelSelector(metricSelector)},
		Timestamp:       metav1.NewTime(p.now()),
		WindowSeconds:   ptrTo(customWindow),
		Value:           q,
	}
}

func (p *metricsProvider) ListAllMetrics() []provider.CustomMetricInfo {
	p.store.mu.RLock()
	defer p.store.mu.RUnlock()
	seen := map[provider.CustomMetricInfo]bool{}
	for k := range p.store.pods {
		seen[provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: k.metric}] = true
	}
	for k := range p.store.objects {
		seen[provider.CustomMetricInfo{GroupResource: schema.ParseGroupResource(k.resource), Namespaced: true, Metric: k.metric}] = true
	}
	out := make([]provider.CustomMetricInfo, 0, len(seen))
	for info := range seen {
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b provider.CustomMetricInfo) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

func (p *metricsProvider) GetExternalMetric(_ context.Context, namespace string, metricSelector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	series, ok := p.store.externalSeries(externalKey{namespace, info.Metric})
	if !ok {
		return nil, provider.NewMetricNotFoundError(schema.GroupResource{Group: "external.metrics.k8s.io", Resource: info.Metric}, info.Metric)
	}
	list := &external_metrics.ExternalMetricValueList{}
	for _, s := range series {
		if !metricSelector.Matches(labels.Set(s.Labels)) {
			continue
		}
		list.Items = append(list.Items, external_metrics.ExternalMetricValue{
			MetricName: info.Metric, MetricLabels: s.Labels,
			Timestamp: metav1.NewTime(p.now()), WindowSeconds: ptrTo(customWindow),
			Value: s.Value.DeepCopy(),
		})
	}
	return list, nil
}

func (p *metricsProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	p.store.mu.RLock()
	defer p.store.mu.RUnlock()
	seen := map[string]bool{}
	for k := range p.store.external {
		seen[k.metric] = true
	}
	out := make([]provider.ExternalMetricInfo, 0, len(seen))
	for m := range seen {
		out = append(out, provider.ExternalMetricInfo{Metric: m})
	}
	slices.SortFunc(out, func(a, b provider.ExternalMetricInfo) int { return cmp.Compare(a.Metric, b.Metric) })
	return out
}

func labelSelector(sel labels.Selector) *metav1.LabelSelector {
	if sel == nil || sel.Empty() {
		return nil
	}
	ls, err := metav1.ParseToLabelSelector(sel.String())
	if err != nil {
		return nil
	}
	return ls
}

func ptrTo[T any](v T) *T { return &v }
