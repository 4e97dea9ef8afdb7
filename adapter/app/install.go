package app

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cminstaller "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/installer"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	cmstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/custom_metrics"
	emstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/external_metrics"

	"github.com/tidal-autoscaler/tidal/adapter/internal/encodecache"
)

// installCustomMetrics serves custom.metrics.k8s.io (every version) from
// p as custom-metrics-apiserver's InstallCustomMetricsAPI does, except
// that the group's serializer keeps the encodings of the lists p shares
// (provider.Options.Shared): custom-metrics-apiserver builds that
// serializer inside its installer, where it cannot be wrapped.
func installCustomMetrics(s *genericapiserver.GenericAPIServer, p cmprovider.CustomMetricsProvider, encodings *encodecache.Cache[custom_metrics.MetricValueList]) error {
	groupInfo := genericapiserver.NewDefaultAPIGroupInfo(custom_metrics.GroupName, cmapiserver.Scheme, runtime.NewParameterCodec(cmapiserver.Scheme), cmapiserver.Codecs)
	groupInfo.NegotiatedSerializer = encodings.NegotiatedSerializer(groupInfo.NegotiatedSerializer)
	container := s.Handler.GoRestfulContainer
	for i, gv := range groupInfo.PrioritizedVersions {
		api := &cminstaller.MetricsAPIGroupVersion{
			DynamicStorage:  selectorChecked{cmstorage.NewREST(p)},
			APIGroupVersion: apiGroupVersion(&groupInfo, gv),
			ResourceLister:  cmprovider.NewCustomMetricResourceLister(p),
			Handlers:        &cminstaller.CMHandlers{},
		}
		if err := api.InstallREST(container); err != nil {
			return err
		}
		if i == 0 {
			// Discovery names the preferred (first) version, as upstream.
			addDiscoveryGroup(s, gv)
		}
	}
	return nil
}

// installExternalMetrics serves external.metrics.k8s.io from p as
// custom-metrics-apiserver's InstallExternalMetricsAPI does, except that
// API discovery lists each metric with the scope resources (the
// provider's ExternalResources) gives it: custom-metrics-apiserver lists
// every external metric as namespaced, even those of a rule with
// `resources.namespaced: false`.
func installExternalMetrics(s *genericapiserver.GenericAPIServer, p cmprovider.ExternalMetricsProvider, resources discovery.APIResourceLister) error {
	groupInfo := genericapiserver.NewDefaultAPIGroupInfo(external_metrics.GroupName, cmapiserver.Scheme, metav1.ParameterCodec, cmapiserver.Codecs)
	gv := groupInfo.PrioritizedVersions[0]
	api := &cminstaller.MetricsAPIGroupVersion{
		DynamicStorage:  emstorage.NewREST(p),
		APIGroupVersion: apiGroupVersion(&groupInfo, gv),
		ResourceLister:  resources,
		Handlers:        &cminstaller.EMHandlers{},
	}
	container := s.Handler.GoRestfulContainer
	if err := api.InstallREST(container); err != nil {
		return err
	}
	addDiscoveryGroup(s, gv)
	return nil
}

// apiGroupVersion is how custom-metrics-apiserver's installers describe
// one version of a metrics API group to the generic API server.
func apiGroupVersion(groupInfo *genericapiserver.APIGroupInfo, gv schema.GroupVersion) *genericapi.APIGroupVersion {
	return &genericapi.APIGroupVersion{
		Root:             genericapiserver.APIGroupPrefix,
		GroupVersion:     gv,
		MetaGroupVersion: groupInfo.MetaGroupVersion,
		ParameterCodec:   groupInfo.ParameterCodec,
		Serializer:       groupInfo.NegotiatedSerializer,
		Creater:          groupInfo.Scheme,
		Convertor:        groupInfo.Scheme,
		UnsafeConvertor:  runtime.UnsafeObjectConvertor(groupInfo.Scheme),
		Typer:            groupInfo.Scheme,
		Namer:            runtime.Namer(meta.NewAccessor()),
	}
}

// addDiscoveryGroup lists gv's group in /apis and serves /apis/<group>,
// with gv as the one (preferred) version.
func addDiscoveryGroup(s *genericapiserver.GenericAPIServer, gv schema.GroupVersion) {
	v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	group := metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
	s.DiscoveryGroupManager.AddGroup(group)
	s.Handler.GoRestfulContainer.Add(discovery.NewAPIGroupHandler(s.Serializer, group).WebService())
}

// selectorChecked is custom-metrics-apiserver's storage, except that a
// metricLabelSelector that does not parse is a 400 BadRequest, as a bad
// labelSelector is: custom-metrics-apiserver returns the parser's error
// as is, which the apiserver serves as a 500 (so does prometheus-adapter).
type selectorChecked struct {
	*cmstorage.REST
}

func (s selectorChecked) List(ctx context.Context, options *metainternalversion.ListOptions, metricOpts runtime.Object) (runtime.Object, error) {
	if o, ok := metricOpts.(*custom_metrics.MetricListOptions); ok && o.MetricLabelSelector != "" {
		if _, err := labels.Parse(o.MetricLabelSelector); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("metricLabelSelector %q: %v", o.MetricLabelSelector, err))
		}
	}
	return s.REST.List(ctx, options, metricOpts)
}
