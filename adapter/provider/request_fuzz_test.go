package provider_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// FuzzRequest sends what a request carries, as the metrics API server
// hands it over (custom-metrics-apiserver's REST storage): the resource
// path segment through schema.ParseGroupResource, the namespace, the
// object name or a label selector, the metric name, and the
// metricLabelSelector (or, for external metrics, the labelSelector)
// through labels.Parse. Whatever they hold, the provider must not panic;
// it answers a value or a Kubernetes status error (what the server writes
// as the HTTP status), never a bare error, and no error carries the
// Prometheus URL, which no client is told.
func FuzzRequest(f *testing.F) {
	type seed struct {
		kind                                  uint8 // 0 one object, 1 a selector, 2 external
		resource, ns, name, metric, metricSel string
	}
	for _, s := range []seed{
		{0, "pods", "a", "web-1", metricName, ""},
		{0, "pod", "a", "web-3", metricName, "code!=500"},
		{0, "services", "a", "web", metricName, ""},
		{0, "namespaces", "", "a", metricName, ""},
		{0, "pods", "a", "gone", metricName, ""},
		{0, "pods", "a", "nan-1", metricName, ""},
		{0, "pods", "", "web-1", metricName, ""},
		{0, "deployments.apps", "a", "web", metricName, ""},
		{0, "widgets", "a", "w", metricName, ""},
		{0, "pods", "a", "web-1", "nope", "verb in (GET,POST)"},
		{1, "pods", "a", "app=web", metricName, ""},
		{1, "pods", "a", "app=web,canary!=true", metricName, "code!=500"},
		{1, "pods", "a", "app in (web,nan)", metricName, ""},
		{1, "pods", "", "app=web", metricName, ""},
		{1, "pods", "a", "app=web", metricName, "code>4"},
		{1, "pods.", "a", "", metricName, "app.kubernetes.io/name=web"},
		{2, "", "a", "", "queue_messages", ""},
		{2, "", "", "", "queue_messages", "queue=q2"},
		{2, "", "a", "", "queue_messages", "queue in (q1,q3),x"},
		{2, "", "a", "", "nope", ""},
		{2, "", "a", "", "queue_messages", "__name__=up"},
	} {
		f.Add(s.kind, s.resource, s.ns, s.name, s.metric, s.metricSel)
	}

	fx := newFixture(f, nil)
	u, err := url.Parse(fx.srv.URL)
	if err != nil {
		f.Fatal(err)
	}
	promHost := u.Host

	f.Fuzz(func(t *testing.T, kind uint8, resource, ns, name, metric, metricSel string) {
		msel, err := labels.Parse(metricSel)
		if err != nil {
			return // 400 from the API server
		}
		ctx := context.Background()
		gr := schema.ParseGroupResource(resource)
		info := cmprovider.CustomMetricInfo{GroupResource: gr, Metric: metric, Namespaced: ns != ""}
		switch kind % 3 {
		case 0:
			v, err := fx.p.GetMetricByName(ctx, types.NamespacedName{Namespace: ns, Name: name}, info, msel)
			if err == nil && (v == nil || v.DescribedObject.Name != name) {
				t.Fatalf("GetMetricByName(%q/%q) = %+v, want the object's value", ns, name, v)
			}
			checkErr(t, err, promHost)
		case 1:
			sel, err := labels.Parse(name)
			if err != nil {
				return
			}
			list, err := fx.p.GetMetricBySelector(ctx, ns, sel, info, msel)
			if err == nil && (list == nil || list.Items == nil) {
				t.Fatalf("GetMetricBySelector(%q, %q): nil list or items", ns, name)
			}
			checkErr(t, err, promHost)
		case 2:
			list, err := fx.p.GetExternalMetric(ctx, ns, msel, cmprovider.ExternalMetricInfo{Metric: metric})
			if err == nil && (list == nil || list.Items == nil) {
				t.Fatalf("GetExternalMetric(%q, %q): nil list or items", ns, metricSel)
			}
			checkErr(t, err, promHost)
		}
	})
}

func checkErr(t *testing.T, err error, promHost string) {
	t.Helper()
	if err == nil {
		return
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		t.Fatalf("error %v (%T) is not a Kubernetes status", err, err)
	}
	if code := st.Status().Code; code < 400 || code > 599 {
		t.Fatalf("error %v has status code %d", err, code)
	}
	if strings.Contains(err.Error(), promHost) {
		t.Fatalf("error %q carries the Prometheus address", err)
	}
}
