package promtest

import (
	"net/url"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/adapter/ruleset"
	"github.com/tidal-autoscaler/tidal/rules/config"
)

// Mapper is a RESTMapper knowing pods, services, namespaces, nodes,
// deployments, jobs and storage classes (cluster-scoped), as a cluster's
// discovery would.
func Mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	batch := schema.GroupVersion{Group: "batch", Version: "v1"}
	storage := schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}
	m.Add(core.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(core.WithKind("Service"), meta.RESTScopeNamespace)
	m.Add(core.WithKind("Namespace"), meta.RESTScopeRoot)
	m.Add(core.WithKind("Node"), meta.RESTScopeRoot)
	m.Add(apps.WithKind("Deployment"), meta.RESTScopeNamespace)
	m.Add(batch.WithKind("Job"), meta.RESTScopeNamespace)
	m.Add(storage.WithKind("StorageClass"), meta.RESTScopeRoot)
	return m
}

// Rules compiles a rule file whose default backend is this server.
func (s *Server) Rules(t testing.TB, yaml string, mod func(*prom.Options)) *ruleset.Set {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	o := prom.Options{Name: prom.DefaultBackend, URL: u, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&o)
	}
	def, err := prom.New(o)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.Load("rules.yaml", []byte(yaml), Mapper(), func(named []config.Backend) (*prom.Backends, error) {
		return prom.NewBackends(def, o, named)
	})
	if err != nil {
		t.Fatalf("loading the rules: %v", err)
	}
	return set
}
