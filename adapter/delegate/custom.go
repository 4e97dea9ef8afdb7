package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// CustomProvider serves Tidal's custom metrics and forwards the others to
// the delegate, asked as custom.metrics.k8s.io/v1beta2 (which every server
// built on custom-metrics-apiserver serves).
type CustomProvider struct {
	Own      cmprovider.CustomMetricsProvider
	Delegate *Delegate
}

var _ cmprovider.CustomMetricsProvider = CustomProvider{}

// customName is how discovery names a custom metric: RESOURCE/METRIC.
func customName(gr schema.GroupResource, metric string) string { return gr.String() + "/" + metric }

// OwnNames lists Tidal's custom metrics as discovery names them.
func (p CustomProvider) OwnNames() []string {
	infos := p.Own.ListAllMetrics()
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = customName(in.GroupResource, in.Metric)
	}
	return out
}

func (p CustomProvider) own(info cmprovider.CustomMetricInfo) bool {
	return slices.Contains(p.OwnNames(), customName(info.GroupResource, info.Metric))
}

// GetMetricByName answers from Tidal's rules when one serves the metric
// for the resource, and from the delegate otherwise.
func (p CustomProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if p.own(info) {
		return p.Own.GetMetricByName(ctx, name, info, metricSelector)
	}
	l, err := p.Delegate.getCustom(ctx, customPath(name.Namespace, info, name.Name), nil, metricSelector)
	if err != nil {
		return nil, err
	}
	if len(l.Items) != 1 {
		return nil, apierrors.NewInternalError(fmt.Errorf("the delegate %s answered %d values for %s %s", p.Delegate.URL(), len(l.Items), info.GroupResource, name))
	}
	return &l.Items[0], nil
}

// GetMetricBySelector is GetMetricByName for the objects a selector picks.
func (p CustomProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if p.own(info) {
		return p.Own.GetMetricBySelector(ctx, namespace, selector, info, metricSelector)
	}
	return p.Delegate.getCustom(ctx, customPath(namespace, info, custom_metrics.AllObjects), selector, metricSelector)
}

// ListAllMetrics lists both sides' metrics, each once.
func (p CustomProvider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	out := p.Own.ListAllMetrics()
	own := p.OwnNames()
	for _, r := range p.Delegate.Resources() {
		if slices.Contains(own, r.Name) {
			continue
		}
		res, metric, ok := cutResource(r.Name)
		if !ok {
			continue
		}
		out = append(out, cmprovider.CustomMetricInfo{GroupResource: schema.ParseGroupResource(res), Namespaced: r.Namespaced, Metric: metric})
	}
	return out
}

// cutResource splits RESOURCE/METRIC at its first "/": resource names have no
// "/", metric names may.
func cutResource(name string) (string, string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i], name[i+1:], i > 0 && i < len(name)-1
		}
	}
	return "", "", false
}

// customPath is the request's path below the group version, as the API
// lays it out: namespaces' own metrics under /namespaces/NAME/metrics/,
// namespaced objects under /namespaces/NS/, cluster-scoped ones at the root.
func customPath(namespace string, info cmprovider.CustomMetricInfo, object string) string {
	esc := url.PathEscape
	switch {
	case info.GroupResource == (schema.GroupResource{Resource: "namespaces"}):
		return "/namespaces/" + esc(object) + "/metrics/" + esc(info.Metric)
	case namespace != "":
		return "/namespaces/" + esc(namespace) + "/" + esc(info.GroupResource.String()) + "/" + esc(object) + "/" + esc(info.Metric)
	}
	return "/" + esc(info.GroupResource.String()) + "/" + esc(object) + "/" + esc(info.Metric)
}

// getCustom GETs a custom metrics path of the delegate. A delegate that
// does not answer is a 503 naming it; an answer with a status is passed on.
func (d *Delegate) getCustom(ctx context.Context, path string, selector, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	q := url.Values{}
	if selector != nil && !selector.Empty() {
		q.Set("labelSelector", selector.String())
	}
	if metricSelector != nil && !metricSelector.Empty() {
		q.Set("metricLabelSelector", metricSelector.String())
	}
	u := d.base + "/apis/" + CustomGroup + "/v1beta2" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	unavailable := func(err error) error {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("custom metric at %s is served by the delegate %s, which did not answer: %v", path, d.o.URL, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, unavailable(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, unavailable(err)
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Code != 0 {
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, unavailable(fmt.Errorf("HTTP %d", resp.StatusCode))
	}
	var l v1beta2.MetricValueList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, unavailable(fmt.Errorf("its answer does not decode: %w", err))
	}
	out := &custom_metrics.MetricValueList{Items: make([]custom_metrics.MetricValue, len(l.Items))}
	for i, it := range l.Items {
		out.Items[i] = custom_metrics.MetricValue{
			DescribedObject: custom_metrics.ObjectReference{
				Kind: it.DescribedObject.Kind, Namespace: it.DescribedObject.Namespace, Name: it.DescribedObject.Name,
				UID: it.DescribedObject.UID, APIVersion: it.DescribedObject.APIVersion,
				ResourceVersion: it.DescribedObject.ResourceVersion, FieldPath: it.DescribedObject.FieldPath,
			},
			Metric:        custom_metrics.MetricIdentifier{Name: it.Metric.Name, Selector: it.Metric.Selector},
			Timestamp:     it.Timestamp,
			WindowSeconds: it.WindowSeconds,
			Value:         it.Value,
		}
	}
	return out, nil
}

// maxAnswerBytes bounds what is read of one answer of the delegate.
const maxAnswerBytes = 64 << 20
