// Package autoscale is `tidal autoscale`: like `kubectl autoscale`, it
// creates an autoscaler for a workload, a HorizontalAutoscaler by default
// or an autoscaling/v2 HorizontalPodAutoscaler with --native. The builders
// and the --metric parser here are pure; command.go wires them to cobra and
// the cluster.
package autoscale

import (
	"fmt"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetricSyntax is the form of one --metric value, for help and errors.
const MetricSyntax = "TYPE:NAME:TARGET[,selector=SELECTOR] with TYPE pods, external or resource and TARGET avg=QUANTITY, value=QUANTITY (external) or util=PERCENT (resource)"

// ParseMetric parses one --metric value:
//
//	TYPE:NAME:TARGET[,selector=SELECTOR]
//
// TYPE is pods, external or resource. NAME is the metric's name (it may
// contain colons, as recording rules' names do; for resource, a resource
// name such as memory). TARGET is one of
//
//	avg=QUANTITY    AverageValue (pods, external, resource)
//	value=QUANTITY  Value (external only)
//	util=PERCENT    AverageUtilization (resource only)
//
// SELECTOR is a label selector (pods and external only) and runs to the end
// of the value, so it may hold commas: selector=queue=orders,env=prod.
//
//	pods:http_requests_per_second:avg=100
//	external:queue_depth:avg=30,selector=queue=orders
//	resource:memory:util=70
func ParseMetric(s string) (autoscalingv2.MetricSpec, error) {
	bad := func(format string, a ...any) (autoscalingv2.MetricSpec, error) {
		return autoscalingv2.MetricSpec{}, fmt.Errorf("--metric %q: %s; expected %s", s, fmt.Sprintf(format, a...), MetricSyntax)
	}
	body, sel, hasSel := strings.Cut(s, ",selector=")
	first := strings.Index(body, ":")
	last := strings.LastIndex(body, ":")
	if first < 0 || first == last {
		return bad("want three parts separated by ':'")
	}
	typ, name, target := strings.ToLower(body[:first]), body[first+1:last], body[last+1:]
	if name == "" {
		return bad("the metric name is empty")
	}
	var selector *metav1.LabelSelector
	if hasSel {
		if typ == "resource" {
			return bad("a resource metric takes no selector")
		}
		if sel == "" {
			return bad("the selector is empty")
		}
		ls, err := metav1.ParseToLabelSelector(sel)
		if err != nil {
			return bad("selector: %v", err)
		}
		selector = ls
	}
	key, val, ok := strings.Cut(target, "=")
	if !ok || val == "" {
		return bad("target %q is not KEY=VALUE", target)
	}
	var mt autoscalingv2.MetricTarget
	switch key {
	case "avg", "value":
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return bad("target %s=%s is not a quantity", key, val)
		}
		if q.Sign() <= 0 {
			return bad("target %s=%s must be greater than 0", key, val)
		}
		if key == "avg" {
			mt = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}
		} else {
			mt = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}
		}
	case "util":
		n, err := strconv.ParseInt(strings.TrimSuffix(val, "%"), 10, 32)
		if err != nil || n <= 0 {
			return bad("target util=%s is not a whole percentage greater than 0", val)
		}
		p := int32(n)
		mt = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &p}
	default:
		return bad("unknown target %q", key)
	}
	id := autoscalingv2.MetricIdentifier{Name: name, Selector: selector}
	switch typ {
	case "pods":
		if mt.Type != autoscalingv2.AverageValueMetricType {
			return bad("a pods metric takes only avg=QUANTITY")
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: mt}}, nil
	case "external":
		if mt.Type == autoscalingv2.UtilizationMetricType {
			return bad("an external metric takes avg=QUANTITY or value=QUANTITY")
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: mt}}, nil
	case "resource":
		if mt.Type == autoscalingv2.ValueMetricType {
			return bad("a resource metric takes avg=QUANTITY or util=PERCENT")
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceName(name), Target: mt}}, nil
	default:
		return bad("unknown type %q", typ)
	}
}
