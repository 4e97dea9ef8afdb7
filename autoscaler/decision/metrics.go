package decision

import (
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Method is the computation upstream performs for a metric spec.
type Method int

// Methods, one per calculator of package replicas.
const (
	MethodInvalid Method = iota
	// MethodResourceUtilization: replicas.Config.ResourceUtilization, container "".
	MethodResourceUtilization
	// MethodResourceAverageValue: replicas.Config.ResourceAverageValue.
	MethodResourceAverageValue
	// MethodContainerResourceUtilization: ResourceUtilization with the container.
	MethodContainerResourceUtilization
	// MethodContainerResourceAverageValue: ResourceAverageValue on the
	// container's samples.
	MethodContainerResourceAverageValue
	// MethodPodsAverageValue: replicas.Config.PodsAverageValue.
	MethodPodsAverageValue
	// MethodObjectValue: replicas.ObjectValue.
	MethodObjectValue
	// MethodObjectAverageValue: replicas.ObjectAverageValue.
	MethodObjectAverageValue
	// MethodExternalValue: replicas.ExternalValue.
	MethodExternalValue
	// MethodExternalAverageValue: replicas.ExternalAverageValue.
	MethodExternalAverageValue
)

// MetricOutcome is the result of one metric, valid or not.
type MetricOutcome struct {
	// Replicas is the proposal of a valid metric.
	Replicas int32
	// Name is the metric name used in reasons, for a valid metric.
	Name string
	// WithinTolerance: the metric's usage ratio was within the tolerance,
	// so it proposed the current count (explained in tidal's status).
	WithinTolerance bool
	// Err is nil for a valid metric, else the error as upstream's
	// computeReplicasForMetric returns it.
	Err error
	// Condition is, for an invalid metric, the ScalingActive=False condition
	// upstream would set if this is the first invalid metric.
	Condition Condition
	// EventReason and EventMessage are the Warning event upstream emits for
	// an invalid metric.
	EventReason, EventMessage string
}

// Valid reports whether the metric produced a proposal.
func (o MetricOutcome) Valid() bool { return o.Err == nil }

var (
	errObjectNeither   = errors.New("invalid object metric source: neither a value target nor an average value target was set")
	errExternalNeither = errors.New("invalid external metric source: neither a value target nor an average value target was set")
	errResourceNeither = errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	// Not reachable with validated objects (upstream would dereference nil).
	errPodsNoTarget = errors.New("invalid pods metric source: no average value target was set")
)

// Plan returns the computation upstream performs for spec, or the failure it
// records without fetching anything: unknown source type
// (InvalidMetricSourceType), an unparsable metric selector of an Object or
// Pods metric, or a target that sets neither of the values the source type
// uses. Target selection follows upstream: Resource and ContainerResource use
// AverageValue when set, else AverageUtilization; Object uses Value when
// target.type is Value and Value is set, else AverageValue when target.type
// is AverageValue and AverageValue is set; External uses AverageValue when
// set, else Value; Pods uses AverageValue.
func Plan(spec autoscalingv2.MetricSpec) (Method, *MetricOutcome) {
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		if _, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector); err != nil {
			o := failure("FailedGetObjectMetric", err, fmt.Errorf("failed to get object metric value: %w", err))
			return MethodInvalid, &o
		}
		t := spec.Object.Target
		switch {
		case t.Type == autoscalingv2.ValueMetricType && t.Value != nil:
			return MethodObjectValue, nil
		case t.Type == autoscalingv2.AverageValueMetricType && t.AverageValue != nil:
			return MethodObjectAverageValue, nil
		}
		o := failure("FailedGetObjectMetric", errObjectNeither, fmt.Errorf("failed to get object metric value: %w", errObjectNeither))
		return MethodInvalid, &o
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		if _, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector); err != nil {
			o := failure("FailedGetPodsMetric", err, fmt.Errorf("failed to get pods metric value: %w", err))
			return MethodInvalid, &o
		}
		if spec.Pods.Target.AverageValue == nil {
			o := failure("FailedGetPodsMetric", errPodsNoTarget, fmt.Errorf("failed to get pods metric value: %w", errPodsNoTarget))
			return MethodInvalid, &o
		}
		return MethodPodsAverageValue, nil
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		switch {
		case spec.Resource.Target.AverageValue != nil:
			return MethodResourceAverageValue, nil
		case spec.Resource.Target.AverageUtilization != nil:
			return MethodResourceUtilization, nil
		}
		o := failure("FailedGetResourceMetric", errResourceNeither, fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, errResourceNeither))
		return MethodInvalid, &o
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		switch {
		case spec.ContainerResource.Target.AverageValue != nil:
			return MethodContainerResourceAverageValue, nil
		case spec.ContainerResource.Target.AverageUtilization != nil:
			return MethodContainerResourceUtilization, nil
		}
		o := failure("FailedGetContainerResourceMetric", errResourceNeither, fmt.Errorf("failed to get %s container metric value: %w", spec.ContainerResource.Container, errResourceNeither))
		return MethodInvalid, &o
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		switch {
		case spec.External.Target.AverageValue != nil:
			return MethodExternalAverageValue, nil
		case spec.External.Target.Value != nil:
			return MethodExternalValue, nil
		}
		o := failure("FailedGetExternalMetric", errExternalNeither, fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name, errExternalNeither))
		return MethodInvalid, &o
	}
	err := fmt.Errorf("unknown metric source type %q", string(spec.Type))
	o := failure("InvalidMetricSourceType", err, err)
	return MethodInvalid, &o
}

func failure(reason string, inner, outer error) MetricOutcome {
	return MetricOutcome{
		Err:          outer,
		Condition:    cond(autoscalingv2.ScalingActive, corev1.ConditionFalse, reason, "the HPA was unable to compute the replica count: %v", inner),
		EventReason:  reason,
		EventMessage: inner.Error(),
	}
}

// MetricName is the name upstream uses for spec in the rescale reason and the
// ValidMetricFound message. Upstream quirk kept: an Object metric with an
// AverageValue target is named like an external metric,
// "external metric <name>(<selector>)".
func MetricName(spec autoscalingv2.MetricSpec) string {
	m, fail := Plan(spec)
	if fail != nil {
		return ""
	}
	switch m {
	case MethodResourceUtilization:
		return fmt.Sprintf("%s resource utilization (percentage of request)", spec.Resource.Name)
	case MethodContainerResourceUtilization:
		return fmt.Sprintf("%s container resource utilization (percentage of request)", spec.ContainerResource.Name)
	case MethodResourceAverageValue:
		return fmt.Sprintf("%s resource", spec.Resource.Name.String())
	case MethodContainerResourceAverageValue:
		return fmt.Sprintf("%s resource", spec.ContainerResource.Name.String())
	case MethodPodsAverageValue:
		return fmt.Sprintf("pods metric %s", spec.Pods.Metric.Name)
	case MethodObjectValue:
		return fmt.Sprintf("%s metric %s", spec.Object.DescribedObject.Kind, spec.Object.Metric.Name)
	case MethodObjectAverageValue:
		return fmt.Sprintf("external metric %s(%+v)", spec.Object.Metric.Name, spec.Object.Metric.Selector)
	case MethodExternalValue, MethodExternalAverageValue:
		return fmt.Sprintf("external metric %s(%+v)", spec.External.Metric.Name, spec.External.Metric.Selector)
	}
	return ""
}

// Succeeded is the outcome of a metric whose calculator proposed replicas.
func Succeeded(spec autoscalingv2.MetricSpec, replicas int32) MetricOutcome {
	return MetricOutcome{Replicas: replicas, Name: MetricName(spec)}
}

// Failed is the outcome of a metric whose computation failed with calcErr:
// the error of a package replicas calculator, or of the fetch formatted as
// upstream's calculator formats it (see the Fetch*Error helpers of package
// replicas). If Plan(spec) already fails, that failure is returned. The
// condition, event and returned error wrap calcErr exactly as upstream does
// for the metric's type and target.
func Failed(spec autoscalingv2.MetricSpec, calcErr error) MetricOutcome {
	m, fail := Plan(spec)
	if fail != nil {
		return *fail
	}
	switch m {
	case MethodResourceUtilization, MethodResourceAverageValue:
		inner := wrapResource(m == MethodResourceUtilization, spec.Resource.Name, calcErr)
		return failure("FailedGetResourceMetric", inner, fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, inner))
	case MethodContainerResourceUtilization, MethodContainerResourceAverageValue:
		inner := wrapResource(m == MethodContainerResourceUtilization, spec.ContainerResource.Name, calcErr)
		return failure("FailedGetContainerResourceMetric", inner, fmt.Errorf("failed to get %s container metric value: %w", spec.ContainerResource.Container, inner))
	case MethodPodsAverageValue:
		return failure("FailedGetPodsMetric", calcErr, fmt.Errorf("failed to get pods metric value: %w", calcErr))
	case MethodObjectValue:
		return failure("FailedGetObjectMetric", calcErr, fmt.Errorf("failed to get object metric value: %w", calcErr))
	case MethodObjectAverageValue:
		return failure("FailedGetObjectMetric", calcErr, fmt.Errorf("failed to get object metric value: %w",
			fmt.Errorf("failed to get %s object metric: %w", spec.Object.Metric.Name, calcErr)))
	case MethodExternalAverageValue:
		return failure("FailedGetExternalMetric", calcErr, fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name,
			fmt.Errorf("failed to get %s external metric: %w", spec.External.Metric.Name, calcErr)))
	case MethodExternalValue:
		return failure("FailedGetExternalMetric", calcErr, fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name,
			fmt.Errorf("failed to get external metric %s: %w", spec.External.Metric.Name, calcErr)))
	}
	// Unreachable: Plan returns a failure for MethodInvalid.
	return failure("InvalidMetricSourceType", calcErr, calcErr)
}

func wrapResource(utilization bool, name corev1.ResourceName, err error) error {
	if utilization {
		return fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	return fmt.Errorf("failed to get %s usage: %w", name, err)
}

// HasObjectOrExternalMetrics reports whether metrics contain an Object or an
// External metric (scale to zero needs one).
func HasObjectOrExternalMetrics(metrics []autoscalingv2.MetricSpec) bool {
	for _, m := range metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// Combined is the result of all metrics of an autoscaler.
type Combined struct {
	// Replicas is the largest valid proposal, -1 when the computation is
	// fatal (see Fatal) or spec.metrics is empty.
	Replicas int32
	// Name is the metric name of the chosen proposal.
	Name string
	// Invalid counts the invalid metrics.
	Invalid int
	// Err is "invalid metrics (N invalid out of M), first error is: <first
	// error>" when any metric is invalid, else nil. When not fatal the
	// controller still scales and returns Err from the reconcile.
	Err error
	// ScalingActive is the condition to set: the first invalid metric's
	// condition when fatal, else ValidMetricFound. Nil only for an empty
	// spec.metrics (never the case after API defaulting).
	ScalingActive *Condition
	// FirstFailure is the first invalid outcome, nil when none.
	FirstFailure *MetricOutcome
}

// Fatal reports whether the metric computation failed as a whole: every
// metric is invalid, or some are and the largest valid proposal is below the
// scale's spec.replicas (no scale-down while any metric is invalid).
func (c Combined) Fatal() bool { return c.Replicas == -1 && c.Err != nil }

// Combine merges the outcomes of spec.metrics, in spec order. specReplicas is
// the scale's spec.replicas. The proposal is the largest valid one; its name
// is the first metric reaching it (a proposal of 0 is replaced by any later
// valid proposal, as upstream does).
func Combine(specReplicas int32, outcomes []MetricOutcome) Combined {
	var c Combined
	for i := range outcomes {
		o := outcomes[i]
		if !o.Valid() {
			if c.Invalid == 0 {
				c.FirstFailure = &outcomes[i]
			}
			c.Invalid++
			continue
		}
		if c.Replicas == 0 || o.Replicas > c.Replicas {
			c.Replicas, c.Name = o.Replicas, o.Name
		}
	}
	if c.FirstFailure != nil {
		c.Err = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", c.Invalid, len(outcomes), c.FirstFailure.Err)
	}
	if c.Invalid >= len(outcomes) || (c.Invalid > 0 && c.Replicas < specReplicas) {
		if c.FirstFailure != nil {
			fc := c.FirstFailure.Condition
			c.ScalingActive = &fc
		}
		c.Replicas, c.Name = -1, ""
		return c
	}
	active := cond(autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", c.Name)
	c.ScalingActive = &active
	return c
}
