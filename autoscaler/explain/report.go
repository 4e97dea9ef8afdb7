// Package explain is `tidal explain`: for one HorizontalAutoscaler (or an
// autoscaling/v2 HPA reconciled in native mode) it says each metric's
// current value, target and proposal, and what limited the result, from
// what the controller wrote to the status. It never recomputes a decision:
// a stale or missing status is shown as stale or missing.
//
// Report builds the explanation from a typed object (pure functions),
// Text and Encode print it, and NewCommand reads the object from a cluster.
package explain

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/decision"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
)

// Report is the explanation of one autoscaler, as -o yaml|json print it.
type Report struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Target is the scale target as kubectl get hpa prints it: Kind/Name.
	Target      string `json:"target"`
	MinReplicas int32  `json:"minReplicas"`
	MaxReplicas int32  `json:"maxReplicas"`
	// CurrentReplicas and DesiredReplicas are the status'.
	CurrentReplicas int32        `json:"currentReplicas"`
	DesiredReplicas int32        `json:"desiredReplicas"`
	LastScaleTime   *metav1.Time `json:"lastScaleTime,omitempty"`
	// Metrics has one entry per spec.metrics entry, in spec order.
	Metrics []Metric `json:"metrics"`
	// Decision is status.tidal.decision as the controller wrote it; nil
	// when there is none (Unavailable says why).
	Decision    *v1alpha1.Decision `json:"decision,omitempty"`
	Unavailable string             `json:"unavailable,omitempty"`
	// Limits are what changed or held the result, in the order they
	// applied: the decision's adjustments, then proposals kept at the
	// current count by the tolerance, then a dry run.
	Limits     []Limit     `json:"limits,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Notes say where the status may not describe the current spec.
	Notes []string `json:"notes,omitempty"`
}

// Metric is one metric: its value and target from the status and spec,
// and what it proposed from the decision.
type Metric struct {
	// Name is the metric as the controller names it in the decision,
	// events and conditions.
	Name string `json:"name"`
	// Current is status.currentMetrics' value, "<unknown>" when none.
	Current string `json:"current"`
	// Target is the spec's target; "" when the metric is no longer in
	// spec.metrics.
	Target string `json:"target,omitempty"`
	// Proposal is the replica count it proposed; nil when it failed or
	// when no decision is recorded.
	Proposal        *int32 `json:"proposal,omitempty"`
	WithinTolerance bool   `json:"withinTolerance,omitempty"`
	Error           string `json:"error,omitempty"`
	// Winner marks the proposal the decision chose.
	Winner bool `json:"winner,omitempty"`
}

// Limit is one step that changed or held the result.
type Limit struct {
	// Reason is the step's condition reason (ScaleUpLimit,
	// ScaleDownStabilized, TooManyReplicas, Fallback, RolloutInProgress,
	// ...), WithinTolerance, or the DryRun condition's reason.
	Reason string `json:"reason"`
	// From and To are the replica counts around the step; absent for a
	// step that did not change a count (tolerance, dry run).
	From    *int32 `json:"from,omitempty"`
	To      *int32 `json:"to,omitempty"`
	Message string `json:"message,omitempty"`
}

// Condition is a status condition.
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Kinds as the report names them.
const (
	KindHA  = v1alpha1.Kind
	KindHPA = "HorizontalPodAutoscaler"
)

// NotReconciledError is returned for an object whose status the
// controller has not written yet: there is nothing to explain.
type NotReconciledError struct {
	Resource, Namespace, Name, Hint string
}

func (e *NotReconciledError) Error() string {
	return fmt.Sprintf("%s %s/%s has no status to explain: the controller has not reconciled it yet (%s)", e.Resource, e.Namespace, e.Name, e.Hint)
}

// OfHorizontalAutoscaler explains ha from status.tidal.decision and its
// conditions.
func OfHorizontalAutoscaler(ha *v1alpha1.HorizontalAutoscaler) (Report, error) {
	st := ha.Status
	var why *v1alpha1.Decision
	if st.Tidal != nil {
		why = st.Tidal.Decision
	}
	if why == nil && len(st.Conditions) == 0 && st.ObservedGeneration == nil {
		return Report{}, &NotReconciledError{Resource: "horizontalautoscaler", Namespace: ha.Namespace, Name: ha.Name,
			Hint: "check that tidal autoscaler runs with --mode=crd and watches this namespace"}
	}
	r := base(KindHA, ha.ObjectMeta, &ha.Spec.HorizontalPodAutoscalerSpec, &st.HorizontalPodAutoscalerStatus)
	if st.Tidal != nil && st.Tidal.Shadow != nil {
		r.Notes = append(r.Notes, shadowNote(st.Tidal.Shadow))
	}
	if why == nil {
		r.Unavailable = "the last reconcile did not compute metrics, so status.tidal.decision is empty: the conditions say why"
		r.Limits = dryRunLimit(r.Conditions)
		return r, nil
	}
	r.Decision = why.DeepCopy()
	r.Metrics, r.Notes = withProposals(r.Metrics, ha.Spec.Metrics, why, r.Notes)
	r.Limits = limits(why, r.Conditions)
	return r, nil
}

// OfHorizontalPodAutoscaler explains an autoscaling/v2 HPA. Native mode
// writes the decision to source.DecisionAnnotation with each status
// write; without it (an HPA reconciled by kube-controller-manager, or by
// an older tidal) only the status is shown: values, targets and
// conditions, without proposals.
func OfHorizontalPodAutoscaler(hpa *autoscalingv2.HorizontalPodAutoscaler) (Report, error) {
	st := hpa.Status
	if len(st.Conditions) == 0 && len(st.CurrentMetrics) == 0 && st.ObservedGeneration == nil {
		return Report{}, &NotReconciledError{Resource: "horizontalpodautoscaler", Namespace: hpa.Namespace, Name: hpa.Name,
			Hint: "check that tidal autoscaler runs with --mode=native, or kube-controller-manager's HPA controller, and watches this namespace"}
	}
	r := base(KindHPA, hpa.ObjectMeta, &hpa.Spec, &st)
	why, err := source.DecisionOfAnnotation(hpa.Annotations)
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	if why == nil {
		r.Unavailable = "no " + source.DecisionAnnotation + " annotation (tidal in native mode writes it with the status; kube-controller-manager does not): shown are the HPA's status and conditions"
		r.Limits = dryRunLimit(r.Conditions)
		return r, nil
	}
	r.Decision = why
	r.Metrics, r.Notes = withProposals(r.Metrics, hpa.Spec.Metrics, why, r.Notes)
	r.Limits = limits(why, r.Conditions)
	return r, nil
}

// base is what both kinds share: the spec's range and metrics with their
// current values, the replica counts and the conditions.
func base(kind string, meta metav1.ObjectMeta, spec *autoscalingv2.HorizontalPodAutoscalerSpec, st *autoscalingv2.HorizontalPodAutoscalerStatus) Report {
	r := Report{
		Kind: kind, Namespace: meta.Namespace, Name: meta.Name,
		Target:          spec.ScaleTargetRef.Kind + "/" + spec.ScaleTargetRef.Name,
		MinReplicas:     1,
		MaxReplicas:     spec.MaxReplicas,
		CurrentReplicas: st.CurrentReplicas,
		DesiredReplicas: st.DesiredReplicas,
		LastScaleTime:   st.LastScaleTime,
	}
	if spec.MinReplicas != nil {
		r.MinReplicas = *spec.MinReplicas
	}
	for i, m := range spec.Metrics {
		var ms *autoscalingv2.MetricStatus
		// currentMetrics parallels spec.metrics; a failed metric's entry
		// is empty.
		if i < len(st.CurrentMetrics) && st.CurrentMetrics[i].Type == m.Type {
			ms = &st.CurrentMetrics[i]
		}
		r.Metrics = append(r.Metrics, Metric{Name: metricName(m), Current: Current(m, ms), Target: Target(m)})
	}
	for _, c := range st.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
	}
	if st.ObservedGeneration != nil && meta.Generation > *st.ObservedGeneration {
		r.Notes = append(r.Notes, fmt.Sprintf("the spec changed after the last reconcile (generation %d, status from generation %d): the status describes the previous spec", meta.Generation, *st.ObservedGeneration))
	}
	return r
}

// withProposals adds the decision's proposals to metrics. The decision
// has one proposal per spec.metrics entry in spec order; when the spec
// has changed since, the proposals are listed by name only.
func withProposals(metrics []Metric, specs []autoscalingv2.MetricSpec, why *v1alpha1.Decision, notes []string) ([]Metric, []string) {
	aligned := len(why.Proposals) == len(specs)
	for i, p := range why.Proposals {
		if aligned && p.Name != "" && p.Name != metrics[i].Name {
			aligned = false
		}
	}
	out := metrics
	if !aligned {
		notes = append(notes, "spec.metrics changed after the decision: its proposals are shown without current values and targets")
		out = make([]Metric, len(why.Proposals))
		for i, p := range why.Proposals {
			out[i] = Metric{Name: p.Name, Current: unknown}
		}
	}
	winner := false
	for i, p := range why.Proposals {
		m := &out[i]
		if p.Name != "" {
			m.Name = p.Name
		}
		if p.Replicas != nil {
			n := *p.Replicas
			m.Proposal = &n
		}
		m.WithinTolerance = p.WithinTolerance
		m.Error = p.Error
		if !winner && why.Winner != "" && p.Name == why.Winner && p.Replicas != nil && *p.Replicas == why.ProposedReplicas {
			m.Winner, winner = true, true
		}
	}
	return out, notes
}

// limits are the decision's adjustments, the proposals the tolerance kept
// at the current count, and a dry run.
func limits(why *v1alpha1.Decision, conds []Condition) []Limit {
	var out []Limit
	for _, a := range why.Adjustments {
		from, to := a.From, a.To
		out = append(out, Limit{Reason: a.Reason, From: &from, To: &to, Message: a.Message})
	}
	for _, p := range why.Proposals {
		if p.WithinTolerance {
			out = append(out, Limit{Reason: "WithinTolerance",
				Message: fmt.Sprintf("%s: the usage ratio was within the tolerance, so it proposed the current count, %d", p.Name, why.CurrentReplicas)})
		}
	}
	return append(out, dryRunLimit(conds)...)
}

// shadowNote says how a dry run compares with the HPA beside it.
func shadowNote(s *v1alpha1.ShadowComparison) string {
	verdict := "agree"
	if !s.Agree {
		verdict = "differ"
	}
	return fmt.Sprintf("shadow: this dry run decided %d, HorizontalPodAutoscaler %s decided %d: they %s", s.DesiredReplicas, s.HorizontalPodAutoscaler, s.HPADesiredReplicas, verdict)
}

// dryRunLimit is each of the DryRun and Conflict conditions that is True,
// as a limit: /scale is not written.
func dryRunLimit(conds []Condition) []Limit {
	var out []Limit
	for _, c := range conds {
		if (c.Type == "DryRun" || c.Type == "Conflict") && c.Status == string(corev1.ConditionTrue) {
			out = append(out, Limit{Reason: c.Type, Message: c.Message})
		}
	}
	return out
}

// metricName names m as the controller does; a spec it cannot use (one
// that bypassed validation) is named by its type.
func metricName(m autoscalingv2.MetricSpec) string {
	if n := decision.MetricName(m); n != "" {
		return n
	}
	return fmt.Sprintf("%s metric (invalid spec)", m.Type)
}
