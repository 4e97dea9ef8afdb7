package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/tidal-autoscaler/tidal/adapter/discovery"
	"github.com/tidal-autoscaler/tidal/adapter/internal/promtest"
	"github.com/tidal-autoscaler/tidal/adapter/provider"
)

// TestNotDiscoveredYet: while a rule's discovery query has never answered
// (Prometheus down since the adapter started), a metric the snapshot does
// not have is 503 naming the backend, not 404: it may well exist. Once
// discovery answered, an unknown metric is 404 again.
func TestNotDiscoveredYet(t *testing.T) {
	srv := promtest.New(t)
	for _, sel := range []string{`http_requests_total{namespace!="",pod!=""}`, `queue_messages{queue!=""}`} {
		srv.FailSeries(sel, true)
	}
	d := discovery.New(discovery.Options{Interval: time.Minute})
	d.SetRules(srv.Rules(t, rules, nil))
	_ = d.RunOnce(context.Background())
	p := provider.New(provider.Options{Discovery: d, Mapper: promtest.Mapper(), Objects: fakeObjects{}})
	ctx := context.Background()
	name := types.NamespacedName{Namespace: "a", Name: "web-1"}
	customInfo := cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: metricName}
	externalInfo := cmprovider.ExternalMetricInfo{Metric: "queue_messages"}

	get := map[string]func() error{
		"custom": func() error {
			_, err := p.GetMetricByName(ctx, name, customInfo, nil)
			return err
		},
		"external": func() error {
			_, err := p.GetExternalMetric(ctx, "a", nil, externalInfo)
			return err
		},
	}
	for kind, f := range get {
		err := f()
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "not known yet") || !strings.Contains(err.Error(), "backend") {
			t.Errorf("%s metric before discovery answered: %v, want 503 saying it is not known yet, naming the backend", kind, err)
		}
	}

	for _, sel := range []string{`http_requests_total{namespace!="",pod!=""}`, `queue_messages{queue!=""}`} {
		srv.FailSeries(sel, false)
	}
	if err := d.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for kind, f := range get {
		if err := f(); !apierrors.IsNotFound(err) {
			t.Errorf("%s metric with no series after discovery answered: %v, want 404", kind, err)
		}
	}
}
