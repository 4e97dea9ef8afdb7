package v1alpha1

import (
	"encoding/json"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// wireSpec is spec as it is written: the autoscaling/v2 fields and tidal's
// side by side (encoding/json promotes the fields of embedded structs).
//
// +kubebuilder:object:generate=false
type wireSpec struct {
	autoscalingv2.HorizontalPodAutoscalerSpec `json:",inline"`
	TidalSpec                                 `json:",inline"`
}

// wire is a HorizontalAutoscaler as it is written. Its metadata fields are
// named, not embedded, so that controller-gen does not take it for a kind.
//
// +kubebuilder:object:generate=false
type wire struct {
	APIVersion string                     `json:"apiVersion,omitempty"`
	Kind       string                     `json:"kind,omitempty"`
	Metadata   metav1.ObjectMeta          `json:"metadata,omitempty"`
	Spec       wireSpec                   `json:"spec"`
	Status     HorizontalAutoscalerStatus `json:"status,omitempty"`
}

// MarshalJSON writes ha with its Tidal fields inside spec.
func (ha HorizontalAutoscaler) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire{
		APIVersion: ha.APIVersion, Kind: ha.Kind, Metadata: ha.ObjectMeta,
		Spec:   wireSpec{HorizontalPodAutoscalerSpec: ha.Spec, TidalSpec: ha.Tidal},
		Status: ha.Status,
	})
}

// wireIn is wire for decoding in place: its pointers are ha's fields.
//
// +kubebuilder:object:generate=false
type wireIn struct {
	APIVersion *string                     `json:"apiVersion,omitempty"`
	Kind       *string                     `json:"kind,omitempty"`
	Metadata   *metav1.ObjectMeta          `json:"metadata,omitempty"`
	Spec       wireSpecIn                  `json:"spec"`
	Status     *HorizontalAutoscalerStatus `json:"status,omitempty"`
}

// +kubebuilder:object:generate=false
type wireSpecIn struct {
	*autoscalingv2.HorizontalPodAutoscalerSpec `json:",inline"`
	*TidalSpec                                 `json:",inline"`
}

// UnmarshalJSON reads ha, taking its Tidal fields from spec. It decodes as
// the apiserver's JSON serializer does (case-sensitive field names), in
// place.
func (ha *HorizontalAutoscaler) UnmarshalJSON(data []byte) error {
	*ha = HorizontalAutoscaler{}
	return utiljson.Unmarshal(data, &wireIn{
		APIVersion: &ha.APIVersion, Kind: &ha.Kind, Metadata: &ha.ObjectMeta,
		Spec:   wireSpecIn{HorizontalPodAutoscalerSpec: &ha.Spec, TidalSpec: &ha.Tidal},
		Status: &ha.Status,
	})
}
