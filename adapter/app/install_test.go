package app

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/custom_metrics"
)

// A metricLabelSelector that does not parse is the client's mistake: 400,
// as a bad labelSelector is (custom-metrics-apiserver's storage would
// return the parser's error, served as a 500).
func TestSelectorChecked(t *testing.T) {
	s := selectorChecked{cmstorage.NewREST(nil)}
	tests := []struct {
		name       string
		selector   string
		badRequest bool
	}{
		{"unbalanced parenthesis", "code in (500", true},
		{"no value", "code=(", true},
		{"a valid selector reaches the storage", "code!=200", false},
		{"no selector reaches the storage", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without a request in the context the storage itself fails:
			// any error but the selector's 400 means the check let it by.
			_, err := s.List(context.Background(), nil, &custom_metrics.MetricListOptions{MetricLabelSelector: tt.selector})
			if got := apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "metricLabelSelector"); got != tt.badRequest {
				t.Errorf("err = %v, want a 400 about the metricLabelSelector: %v", err, tt.badRequest)
			}
		})
	}
}
