package manifests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"sigs.k8s.io/yaml"
)

// postRenderPortEnv makes the test binary a Helm post-renderer (TestMain):
// the chart's adapter Service becomes an ExternalName to localhost and its
// APIServices use that port, where runAdapter's adapter listens. The
// harness has no pod network, so this is how a release stays served
// through an upgrade; everything else is the chart's.
const postRenderPortEnv = "TIDAL_MANIFESTS_POST_RENDER_PORT"

// postRender copies a rendered stream from in to out with that change.
func postRender(in io.Reader, out io.Writer, port string) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", postRenderPortEnv, port, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(in))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return err
		}
		if obj == nil {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		switch {
		case obj["kind"] == "Service" && md["name"] == "tidal-adapter":
			obj["spec"] = map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": p}}}
		case obj["kind"] == "APIService":
			obj["spec"].(map[string]any)["service"].(map[string]any)["port"] = p
		}
		if doc, err = yaml.Marshal(obj); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", doc); err != nil {
			return err
		}
	}
}

// apiServicesAvailable returns nil when every APIService named is
// Available=True.
func apiServicesAvailable(ctx context.Context, agg aggregator.Interface, names []string) error {
	for _, name := range names {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ok := slices.ContainsFunc(s.Status.Conditions, func(c apiregistrationv1.APIServiceCondition) bool {
			return c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue
		})
		if !ok {
			return fmt.Errorf("%s not Available: %+v", name, s.Status.Conditions)
		}
	}
	return nil
}

// upgradeAvailable runs helm upgrade (a changed pod annotation and a
// changed versionPriority, so both the Deployment and every APIService are
// patched) while it polls every APIService every 200 ms: each must stay
// Available=True throughout.
func (c *clusterTest) upgradeAvailable(ctx context.Context, t *testing.T, env []string, helm, values string) {
	if c.adapter == nil {
		t.Fatal("no adapter serving: the previous step did not start one")
	}
	agg := aggregator.NewForConfigOrDie(c.h.Admin)
	if err := apiServicesAvailable(ctx, agg, defaultAPIs); err != nil {
		t.Fatalf("before the upgrade: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "post-render")
	if err := os.WriteFile(script, fmt.Appendf(nil, "#!/bin/sh\n%s=%d exec %q\n", postRenderPortEnv, c.adapterPort, self), 0o755); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var polls int
	var failures []string
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			polls++
			if err := apiServicesAvailable(ctx, agg, defaultAPIs); err != nil {
				failures = append(failures, fmt.Sprintf("poll %d: %v", polls, err))
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	out, err := run(env, helm, "upgrade", releaseName, chartDir(t), "--namespace", namespace, "-f", values,
		"--set", "adapter.podAnnotations.upgraded=yes", "--set", "apiServices.versionPriority=110", "--post-renderer", script)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	polls++
	if err := apiServicesAvailable(ctx, agg, defaultAPIs); err != nil {
		failures = append(failures, fmt.Sprintf("after the upgrade: %v", err))
	}
	t.Logf("%d polls of %d APIServices during and after helm upgrade, %d not all Available", polls, len(defaultAPIs), len(failures))
	if len(failures) > 0 {
		t.Errorf("an APIService was not Available during the upgrade:\n%s", strings.Join(failures, "\n"))
	}
	// The upgrade did apply: the Deployment and the APIServices changed.
	d, err := c.h.Client.AppsV1().Deployments(namespace).Get(ctx, "tidal-adapter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations["upgraded"] != "yes" {
		t.Errorf("adapter pod annotations %v after the upgrade: it did not apply", d.Spec.Template.Annotations)
	}
	as, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1beta1.custom.metrics.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if as.Spec.VersionPriority != 110 {
		t.Errorf("v1beta1.custom.metrics.k8s.io versionPriority %d after the upgrade, want 110", as.Spec.VersionPriority)
	}
}

// deletion is one object's DELETED watch event; rv is the etcd revision
// of the delete (one etcd serves every resource here, so revisions of
// different resources are ordered).
type deletion struct {
	what string
	rv   int64
}

// watchDeletions records DELETED events of w on out until ctx ends.
func watchDeletions(ctx context.Context, w watch.Interface, kind string, mu *sync.Mutex, out *[]deletion) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Deleted {
				continue
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			mu.Lock()
			*out = append(*out, deletion{kind + " " + m.GetName(), rv})
			mu.Unlock()
		}
	}
}

// uninstall runs helm uninstall and checks the order of the deletions:
// every APIService goes before the adapter's Service and Deployment, so
// discovery never points at a missing Service; then /apis lists none of
// the chart's groups and every group's discovery answers.
func (c *clusterTest) uninstall(ctx context.Context, t *testing.T, env []string, helm string) {
	cs, agg := c.h.Client, aggregator.NewForConfigOrDie(c.h.Admin)
	byName := metav1.ListOptions{FieldSelector: "metadata.name=tidal-adapter"}
	apis, err := agg.ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tidal"})
	if err != nil {
		t.Fatal(err)
	}
	if len(apis.Items) != len(defaultAPIs) {
		t.Fatalf("%d APIServices before the uninstall, want %d", len(apis.Items), len(defaultAPIs))
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	var deleted []deletion
	var wg sync.WaitGroup
	start := func(kind string, w watch.Interface, err error) {
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { watchDeletions(wctx, w, kind, &mu, &deleted) })
	}
	w, err := agg.ApiregistrationV1().APIServices().Watch(wctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tidal", ResourceVersion: apis.ResourceVersion})
	start("APIService", w, err)
	w, err = cs.CoreV1().Services(namespace).Watch(wctx, byName)
	start("Service", w, err)
	w, err = cs.AppsV1().Deployments(namespace).Watch(wctx, byName)
	start("Deployment", w, err)

	if out, err := run(env, helm, "uninstall", releaseName, "--namespace", namespace); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := len(defaultAPIs) + 2
	for {
		mu.Lock()
		n := len(deleted)
		mu.Unlock()
		if n >= want || wctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	slices.SortFunc(deleted, func(a, b deletion) int { return int(a.rv - b.rv) })
	var order []string
	lastAPIService, firstOther := int64(0), int64(0)
	for _, d := range deleted {
		order = append(order, fmt.Sprintf("%s@%d", d.what, d.rv))
		if strings.HasPrefix(d.what, "APIService ") {
			lastAPIService = max(lastAPIService, d.rv)
		} else if firstOther == 0 {
			firstOther = d.rv
		}
	}
	t.Logf("deletions in etcd order: %s", strings.Join(order, ", "))
	if len(deleted) != want {
		t.Fatalf("%d deletions seen, want %d (%d APIServices, the Service and the Deployment)", len(deleted), want, len(defaultAPIs))
	}
	if firstOther == 0 || lastAPIService > firstOther {
		t.Errorf("an APIService was deleted after the adapter's Service or Deployment: discovery pointed at a missing Service")
	}

	// Nothing serves any more; discovery must not miss it.
	c.stopAdapter()
	dc := discovery.NewDiscoveryClientForConfigOrDie(c.h.Admin)
	var groups []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := dc.ServerGroups()
		if err != nil {
			t.Fatalf("/apis: %v", err)
		}
		groups = groups[:0]
		for _, g := range list.Groups {
			if strings.HasSuffix(g.Name, "metrics.k8s.io") {
				groups = append(groups, g.Name)
			}
		}
		if len(groups) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(groups) > 0 {
		t.Errorf("/apis still lists %v 30s after the uninstall", groups)
	}
	if _, _, err := dc.ServerGroupsAndResources(); err != nil {
		t.Errorf("discovery after the uninstall: %v", err)
	}
}

// TestPostRender: the post-renderer changes the adapter's Service and the
// APIServices' port, and keeps every object.
func TestPostRender(t *testing.T) {
	out, err := run(helmEnv(t), tool(t, "helm"), "template", releaseName, chartDir(t), "--namespace", namespace)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if err := postRender(strings.NewReader(out), &buf, "40443"); err != nil {
		t.Fatal(err)
	}
	before, after := decodeObjects(t, out), decodeObjects(t, buf.String())
	if !slices.Equal(keys(before), keys(after)) {
		t.Fatalf("objects changed:\nbefore %q\nafter  %q", keys(before), keys(after))
	}
	svc := find(t, after, "Service", namespace, "tidal-adapter")
	if svc.Object["spec"].(map[string]any)["externalName"] != "localhost" {
		t.Errorf("Service spec %v, want an ExternalName to localhost", svc.Object["spec"])
	}
	for _, o := range ofKind(after, "APIService") {
		if port := o.Object["spec"].(map[string]any)["service"].(map[string]any)["port"]; port != int64(40443) {
			t.Errorf("%s port %v, want 40443", o.GetName(), port)
		}
	}
	if err := postRender(strings.NewReader(out), io.Discard, "https"); err == nil {
		t.Error("a port that is not a number was accepted")
	}
}
