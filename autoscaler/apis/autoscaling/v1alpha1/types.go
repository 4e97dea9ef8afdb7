package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HorizontalAutoscaler scales a workload through its /scale subresource
// exactly as an autoscaling/v2 HorizontalPodAutoscaler with the same spec
// would be scaled by kube-controller-manager.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ha,categories=all;tidal
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.status.tidal.reference`,description="The scale target, as Kind/Name"
// +kubebuilder:printcolumn:name="Targets",type=string,JSONPath=`.status.tidal.targets`,description="Current and target value of the first metrics, as kubectl get hpa prints them"
// +kubebuilder:printcolumn:name="MinPods",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="MaxPods",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HorizontalAutoscaler struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is an autoscaling/v2 HorizontalPodAutoscaler spec, field for
	// field, plus tidal's optional fields (spec.dryRun, spec.fallback,
	// spec.scaleDownPodSelection, spec.holdScaleDownDuringRollout). The
	// schema adds the apiserver's HPA validation (see hack/crd-schema).
	//
	// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="maxReplicas must be greater than or equal to minReplicas",fieldPath=".maxReplicas"
	// +kubebuilder:validation:XValidation:rule="!has(self.fallback) || (has(self.fallback.behavior) && self.fallback.behavior == 'currentReplicas') || (self.fallback.replicas <= self.maxReplicas && (!has(self.minReplicas) || self.fallback.replicas >= self.minReplicas))",message="fallback.replicas must be within [minReplicas, maxReplicas]",fieldPath=".fallback.replicas"
	Spec HorizontalAutoscalerSpec `json:"spec"`

	// Status is an autoscaling/v2 HorizontalPodAutoscaler status, plus
	// tidal's explanation of its last decision.
	//
	// +optional
	Status HorizontalAutoscalerStatus `json:"status,omitempty"`
}

// HorizontalAutoscalerSpec is the autoscaling/v2 spec with tidal's fields
// beside its own: both structs are inlined, so in JSON and YAML
// spec.dryRun and spec.fallback sit next to spec.maxReplicas, and in Go
// their fields are promoted (ha.Spec.MaxReplicas, ha.Spec.DryRun). Code
// that takes an autoscaling/v2 spec is handed ha.Spec.HorizontalPodAutoscalerSpec.
type HorizontalAutoscalerSpec struct {
	autoscalingv2.HorizontalPodAutoscalerSpec `json:",inline"`
	TidalSpec                                 `json:",inline"`
}

// TidalSpec is what tidal adds to the autoscaling/v2 spec. Every field is
// optional, and with none set the autoscaler decides exactly as
// kube-controller-manager's HPA controller does.
type TidalSpec struct {
	// DryRun computes and records the full decision every sync (status,
	// the DryRun condition, a DryRun event when the count would change, the
	// tidal_autoscaler_dry_run_desired_replicas metric) but never writes
	// the target's /scale.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Fallback scales to a fixed count when every metric has failed for
	// failureThreshold consecutive syncs, and leaves it on the first sync
	// with a metric computed. Unset, a sync whose metrics all fail changes
	// nothing, as upstream.
	// +optional
	Fallback *Fallback `json:"fallback,omitempty"`
	// ScaleDownPodSelection removes the least loaded pods first when the
	// autoscaler scales a Deployment or ReplicaSet down: before writing
	// the smaller count to /scale, it sets the annotation
	// controller.kubernetes.io/pod-deletion-cost of the target's pods from
	// their values of the named metric (higher load, higher cost), which
	// the ReplicaSet controller deletes lowest first. Unset, pods are
	// never written.
	// +optional
	ScaleDownPodSelection *ScaleDownPodSelection `json:"scaleDownPodSelection,omitempty"`
	// HoldScaleDownDuringRollout keeps the replica count instead of
	// scaling a Deployment down while its rollout is in progress (as
	// kubectl rollout status sees it); scaling up is not held.
	// +optional
	HoldScaleDownDuringRollout bool `json:"holdScaleDownDuringRollout,omitempty"`
}

// ScaleDownPodSelection is spec.scaleDownPodSelection.
type ScaleDownPodSelection struct {
	// Metric names the spec.metrics entry whose per-pod values rank the
	// pods: a Resource or a Pods metric.
	Metric PodSelectionMetric `json:"metric"`
}

// PodSelectionMetric names a per-pod metric of spec.metrics.
type PodSelectionMetric struct {
	// Type is Resource or Pods.
	// +kubebuilder:validation:Enum=Resource;Pods
	Type autoscalingv2.MetricSourceType `json:"type"`
	// Name is the resource's name (cpu, memory) for a Resource metric,
	// the metric's name for a Pods metric.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// FallbackBehavior chooses the fallback count, as KEDA's
// spec.fallback.behavior does.
//
// +kubebuilder:validation:Enum=static;currentReplicas;currentReplicasIfHigher;currentReplicasIfLower
type FallbackBehavior string

const (
	// FallbackStatic scales to fallback.replicas.
	FallbackStatic FallbackBehavior = "static"
	// FallbackCurrentReplicas keeps the current replica count.
	FallbackCurrentReplicas FallbackBehavior = "currentReplicas"
	// FallbackCurrentReplicasIfHigher keeps the current count when it is
	// higher than fallback.replicas, else scales to fallback.replicas.
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	// FallbackCurrentReplicasIfLower keeps the current count when it is
	// lower than fallback.replicas, else scales to fallback.replicas.
	FallbackCurrentReplicasIfLower FallbackBehavior = "currentReplicasIfLower"
)

// FallbackBehaviors are the valid behaviors, for validation.
var FallbackBehaviors = []FallbackBehavior{FallbackStatic, FallbackCurrentReplicas, FallbackCurrentReplicasIfHigher, FallbackCurrentReplicasIfLower}

// Fallback is spec.fallback.
type Fallback struct {
	// FailureThreshold is the number of consecutive syncs in which every
	// metric failed after which the autoscaler falls back.
	// +kubebuilder:validation:Minimum=1
	FailureThreshold int32 `json:"failureThreshold"`
	// Replicas is the fallback replica count, within [minReplicas,
	// maxReplicas].
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// Behavior is how the fallback count follows from replicas and the
	// current count, as KEDA's: static (replicas), currentReplicas (keep
	// the current count), currentReplicasIfHigher (the higher of the two),
	// currentReplicasIfLower (the lower of the two).
	// +optional
	// +kubebuilder:default=static
	Behavior FallbackBehavior `json:"behavior,omitempty"`
}

// HorizontalAutoscalerStatus is the autoscaling/v2 status, inlined so its
// JSON is field for field an HPA's, plus the optional status.tidal block.
type HorizontalAutoscalerStatus struct {
	autoscalingv2.HorizontalPodAutoscalerStatus `json:",inline"`

	// Tidal is what tidal adds: the printed columns and why the last
	// decision was made. It holds only values derived from the inputs of a
	// reconcile (no timestamps), so an unchanged situation does not rewrite
	// the status.
	//
	// +optional
	Tidal *TidalStatus `json:"tidal,omitempty"`
}

// TidalStatus is tidal's addition to the HPA status.
type TidalStatus struct {
	// Reference is the scale target as kubectl get hpa prints it:
	// "<kind>/<name>".
	// +optional
	Reference string `json:"reference,omitempty"`
	// Targets are the current and target values of the metrics as kubectl
	// get hpa prints them, e.g. "cpu: 50%/30%".
	// +optional
	Targets string `json:"targets,omitempty"`
	// Decision explains the last reconcile that computed metrics. It is
	// absent when the last reconcile did not get that far (for example the
	// scale could not be read, or the replica count was outside
	// [minReplicas, maxReplicas] and was clamped without metrics).
	// +optional
	Decision *Decision `json:"decision,omitempty"`
	// History is the autoscaler's compacted stabilization and scale-event
	// history, written by the controller with the status so that a new
	// leader or a restarted controller continues its windows. Do not edit.
	// +optional
	History string `json:"history,omitempty"`
	// MetricFailures counts the consecutive syncs in which every metric
	// failed, up to spec.fallback.failureThreshold; kept only while
	// spec.fallback is set, so that a restarted controller or a new leader
	// continues the count.
	// +optional
	MetricFailures int32 `json:"metricFailures,omitempty"`
	// Shadow compares a dry-run autoscaler's decision with that of the
	// autoscaling/v2 HorizontalPodAutoscaler scaling the same workload,
	// as of the last sync; absent without spec.dryRun or without such an
	// HPA.
	// +optional
	Shadow *ShadowComparison `json:"shadow,omitempty"`
}

// ShadowComparison is what a dry-run autoscaler decided beside the
// HorizontalPodAutoscaler that scales its workload.
type ShadowComparison struct {
	// HorizontalPodAutoscaler is the name of the HPA compared with (the
	// first by name when several scale the workload).
	HorizontalPodAutoscaler string `json:"horizontalPodAutoscaler"`
	// DesiredReplicas is this autoscaler's decision in the last sync.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// HPADesiredReplicas is the HPA's status.desiredReplicas then: its
	// most recent decision, made in its own sync, which may be up to a
	// sync period apart from this one.
	HPADesiredReplicas int32 `json:"hpaDesiredReplicas"`
	// Agree is true when both decided the same count.
	Agree bool `json:"agree"`
}

// Decision is why the autoscaler chose its desired replica count.
type Decision struct {
	// CurrentReplicas is the scale's spec.replicas when deciding.
	CurrentReplicas int32 `json:"currentReplicas"`
	// Proposals has one entry per spec.metrics entry, in spec order.
	// +optional
	// +listType=atomic
	Proposals []MetricProposal `json:"proposals,omitempty"`
	// Winner names the metric whose proposal was chosen (the largest valid
	// proposal), as upstream names metrics in events, e.g. "cpu resource
	// utilization (percentage of request)". Empty when no metric was valid.
	// +optional
	Winner string `json:"winner,omitempty"`
	// ProposedReplicas is the winning proposal, before stabilization and
	// rate limits; -1 when the metrics could not be computed.
	ProposedReplicas int32 `json:"proposedReplicas"`
	// StabilizedReplicas is the proposal after the stabilization window.
	// +optional
	StabilizedReplicas *int32 `json:"stabilizedReplicas,omitempty"`
	// DesiredReplicas is the final decision, after rate limits and the
	// [minReplicas, maxReplicas] range.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// Adjustments are the steps that changed the proposal, in order
	// (stabilization, then limits), each with the reason of the condition
	// it set. Empty when the proposal was used unchanged.
	// +optional
	// +listType=atomic
	Adjustments []Adjustment `json:"adjustments,omitempty"`
}

// MetricProposal is what one metric proposed.
type MetricProposal struct {
	// Name is the metric as upstream names it in events and conditions.
	// +optional
	Name string `json:"name,omitempty"`
	// Replicas is the metric's proposal; absent when the metric failed.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Error is why the metric failed; absent when it produced a proposal.
	// +optional
	Error string `json:"error,omitempty"`
	// WithinTolerance is true when the metric's usage ratio was within the
	// tolerance, so that it proposed the current replica count.
	// +optional
	WithinTolerance bool `json:"withinTolerance,omitempty"`
}

// Adjustment is one step that changed the replica proposal.
type Adjustment struct {
	// Reason is the condition reason of the step, e.g. ScaleDownStabilized,
	// ScaleUpLimit or TooManyReplicas.
	Reason string `json:"reason"`
	// From is the replica count before the step.
	From int32 `json:"from"`
	// To is the replica count after the step.
	To int32 `json:"to"`
	// Message is the condition message of the step.
	// +optional
	Message string `json:"message,omitempty"`
}

// HorizontalAutoscalerList is a list of HorizontalAutoscalers.
//
// +kubebuilder:object:root=true
type HorizontalAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HorizontalAutoscaler `json:"items"`
}
