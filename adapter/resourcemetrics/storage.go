package resourcemetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
)

// podStorage (pods.go) and nodeStorage (nodes.go) serve PodMetrics and
// NodeMetrics as metrics-server v0.9.0's pkg/api storage does (same
// listing, label and field selectors, order, not-found answers and
// tables), but keep the getter's errors answerable: metrics-server wraps
// them with fmt.Errorf, and the apiserver
// (responsewriters.ErrorToAPIStatus) does not unwrap, so a Prometheus
// outage would be a 500 like a bug. Here a backend that is down or too
// slow is a 503 ServiceUnavailable naming it (see getterError).
var (
	_ rest.Storage              = (*podStorage)(nil)
	_ rest.KindProvider         = (*podStorage)(nil)
	_ rest.Getter               = (*podStorage)(nil)
	_ rest.Lister               = (*podStorage)(nil)
	_ rest.TableConvertor       = (*podStorage)(nil)
	_ rest.Scoper               = (*podStorage)(nil)
	_ rest.SingularNameProvider = (*podStorage)(nil)
	_ rest.Storage              = (*nodeStorage)(nil)
	_ rest.KindProvider         = (*nodeStorage)(nil)
	_ rest.Getter               = (*nodeStorage)(nil)
	_ rest.Lister               = (*nodeStorage)(nil)
	_ rest.TableConvertor       = (*nodeStorage)(nil)
	_ rest.Scoper               = (*nodeStorage)(nil)
	_ rest.SingularNameProvider = (*nodeStorage)(nil)
)

// getterError is the API error for a failed MetricsGetter call: 503 when a
// backend is unavailable or timed out (its message names the backend),
// otherwise a 500 with the reason; never the queries (see queryError),
// which are in the log.
func getterError(what string, err error) error {
	msg := fmt.Sprintf("%s: %v; see the adapter's log", what, err)
	if errors.Is(err, prom.ErrUnavailable) || errors.Is(err, prom.ErrTimeout) {
		return apierrors.NewServiceUnavailable(msg)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonInternalError,
		Message: msg,
	}}
}

// tableConvertor is the rest.TableConvertor of both storages: a row per
// object with a column per resource (a pod's is its containers' sum),
// then the window.
type tableConvertor struct{}

// ConvertToTable implements rest.TableConvertor.
func (tableConvertor) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1beta1.Table, error) {
	var table metav1beta1.Table
	switch t := object.(type) {
	case *metrics.PodMetrics:
		table.ResourceVersion = t.ResourceVersion
		items := []metrics.PodMetrics{*t}
		addPodRow(&table, &items[0])
	case *metrics.PodMetricsList:
		table.ResourceVersion, table.Continue = t.ResourceVersion, t.Continue
		for i := range t.Items {
			addPodRow(&table, &t.Items[i])
		}
	case *metrics.NodeMetrics:
		table.ResourceVersion = t.ResourceVersion
		items := []metrics.NodeMetrics{*t}
		addRow(&table, items[0].Name, items[0].Usage, items[0].Window.Duration, &items[0])
	case *metrics.NodeMetricsList:
		table.ResourceVersion, table.Continue = t.ResourceVersion, t.Continue
		for i := range t.Items {
			addRow(&table, t.Items[i].Name, t.Items[i].Usage, t.Items[i].Window.Duration, &t.Items[i])
		}
	}
	return &table, nil
}

func selectors(options *metainternalversion.ListOptions) (labels.Selector, fields.Selector) {
	sel := labels.Everything()
	if options == nil {
		return sel, nil
	}
	if options.LabelSelector != nil {
		sel = options.LabelSelector
	}
	// The apiserver decodes a missing fieldSelector as an empty selector,
	// not nil: testing it on every pod would build a field set per pod for
	// nothing.
	if options.FieldSelector == nil || options.FieldSelector.Empty() {
		return sel, nil
	}
	return sel, options.FieldSelector
}

// addRow adds an object's row; the first row fixes the columns: Name, one
// per resource in its usage (sorted), Window.
func addRow(table *metav1beta1.Table, name string, usage corev1.ResourceList, window time.Duration, obj runtime.Object) {
	if table.ColumnDefinitions == nil {
		table.ColumnDefinitions = []metav1beta1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"}}
		var names []string
		for k := range usage {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, n := range names {
			table.ColumnDefinitions = append(table.ColumnDefinitions, metav1beta1.TableColumnDefinition{Name: n, Type: "string", Format: "quantity"})
		}
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1beta1.TableColumnDefinition{Name: "Window", Type: "string", Format: "duration"})
	}
	cols := table.ColumnDefinitions[1 : len(table.ColumnDefinitions)-1]
	row := make([]any, 0, len(cols)+2)
	row = append(row, name)
	for _, c := range cols {
		v := usage[corev1.ResourceName(c.Name)]
		row = append(row, v.String())
	}
	row = append(row, window.String())
	table.Rows = append(table.Rows, metav1beta1.TableRow{Cells: row, Object: runtime.RawExtension{Object: obj}})
}
