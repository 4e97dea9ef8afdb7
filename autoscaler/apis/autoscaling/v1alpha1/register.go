package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of tidal's autoscaling resources.
const GroupName = "autoscaling.tidal.dev"

// Kind is the kind of the autoscaler resource.
const Kind = "HorizontalAutoscaler"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the plural resource name of HorizontalAutoscaler.
const Resource = "horizontalautoscalers"

// GroupVersionResource is the resource the controller lists, watches and
// writes.
var GroupVersionResource = SchemeGroupVersion.WithResource(Resource)

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &HorizontalAutoscaler{}, &HorizontalAutoscalerList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
