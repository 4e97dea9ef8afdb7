package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// The modes of tidal compared with upstream (TIDAL_CONFORMANCE_MODES,
// comma-separated; default both).
const (
	modesEnv   = "TIDAL_CONFORMANCE_MODES"
	modeCRD    = "crd"
	modeNative = "native"
)

func selectModes(list string) (map[string]bool, error) {
	if list == "" {
		return map[string]bool{modeCRD: true, modeNative: true}, nil
	}
	modes := map[string]bool{}
	for _, m := range strings.Split(list, ",") {
		if m != modeCRD && m != modeNative {
			return nil, fmt.Errorf("%s=%q: no mode %q (%s, %s)", modesEnv, list, m, modeCRD, modeNative)
		}
		modes[m] = true
	}
	return modes, nil
}

// Upstream's HPA controller and native-mode tidal both reconcile every
// HorizontalPodAutoscaler of the cluster, the oracle's and the native
// twin's alike. Each may write only its own: an HPA's status and a
// target's scale, by name (every scenario names its twins the same). The
// other's writes are refused; what it reads and decides there is not
// compared, and the warnings it records about the refusals
// (FailedRescale, FailedUpdateStatus) are told apart by their writer (see
// events).

// writeResources are the resources an HPA controller writes.
var writeResources = []string{"horizontalpodautoscalers/status", "*/scale"}

// onlyWrites is rules without update on writeResources, plus update on
// them for the objects named name.
func onlyWrites(rules []rbacv1.PolicyRule, name string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r = *r.DeepCopy()
		if slices.ContainsFunc(r.Resources, func(res string) bool { return slices.Contains(writeResources, res) }) {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == "update" })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return append(out,
		rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers/status"}, Verbs: []string{"update"}, ResourceNames: []string{name}},
		rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*/scale"}, Verbs: []string{"update"}, ResourceNames: []string{name}})
}

// upstreamRole is kube-controller-manager's HPA controller's bootstrap
// ClusterRole; kube-apiserver restores it at start unless autoupdate is
// "false".
const upstreamRole = "system:controller:horizontal-pod-autoscaler"

// restrictUpstream lets upstream's HPA controller write the oracle only.
func restrictUpstream(ctx context.Context, h *harness.Harness) error {
	roles := h.Client.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, upstreamRole, metav1.GetOptions{})
	if err != nil {
		return err
	}
	role.Rules = onlyWrites(role.Rules, oracleName)
	metav1.SetMetaDataAnnotation(&role.ObjectMeta, rbacv1.AutoUpdateAnnotationKey, "false")
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("narrow %s: %w", upstreamRole, err)
	}
	return nil
}

// startNative runs `tidal autoscaler --mode=native` with args, as its own
// service account, allowed to write the native twins only.
func startNative(ctx context.Context, h *harness.Harness, bin string, args []string) error {
	_, err := h.StartNativeAutoscaler(ctx, harness.NativeAutoscalerOptions{
		Binary: bin, Args: args, ServiceAccount: "tidal-autoscaler-native",
		Rules: func(r []rbacv1.PolicyRule) []rbacv1.PolicyRule { return onlyWrites(r, nativeName) },
	})
	return err
}

// gvr is the resource of the target kind.
func (k targetKind) gvr() schema.GroupVersionResource {
	switch k {
	case statefulSetTarget:
		return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	case scalableTarget:
		return scalableGVR
	}
	return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
}

// checkWriters checks, for each HPA twin, that only its controller wrote
// its status and its target's scale (managedFields): the two controllers
// that reconcile it did not both write. The status must have been
// written.
func checkWriters(ctx context.Context, t *testing.T, p *profile, ns string, twins []twin, k targetKind) {
	t.Helper()
	hpaGVR := schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	for _, tw := range twins {
		if tw.crd {
			continue
		}
		for _, obj := range []struct {
			gvr         schema.GroupVersionResource
			subresource string
			required    bool
		}{{hpaGVR, "status", true}, {k.gvr(), "scale", false}} {
			u, err := p.dyn.Resource(obj.gvr).Namespace(ns).Get(ctx, tw.name, metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				continue
			}
			var managers []string
			for _, f := range u.GetManagedFields() {
				if f.Subresource == obj.subresource {
					managers = append(managers, f.Manager)
				}
			}
			want := []string{tw.manager}
			if len(managers) == 0 && !obj.required {
				continue
			}
			if !slices.Equal(managers, want) {
				t.Errorf("%s %s/%s: %s written by %q, want %q only", obj.gvr.Resource, ns, tw.name, obj.subresource, managers, want)
			}
		}
	}
}

// logRefusals logs the warnings each HPA twin's other controller recorded
// about its refused writes there (see events): expected, not compared.
func logRefusals(ctx context.Context, t *testing.T, p *profile, ns string, twins []twin) {
	t.Helper()
	for _, tw := range twins {
		if tw.crd {
			continue
		}
		list, err := p.h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", tw.name),
			fields.OneTermEqualSelector("involvedObject.kind", "HorizontalPodAutoscaler")).String()})
		if err != nil {
			t.Error(err)
			return
		}
		counts := map[string]int32{}
		for _, e := range list.Items {
			if !writtenBy(e.ManagedFields, tw.manager) && len(e.ManagedFields) > 0 {
				counts[e.ManagedFields[0].Manager+" "+e.Reason] += e.Count
			}
		}
		if len(counts) > 0 {
			t.Logf("refused writes on %s (expected): %v", tw.name, counts)
		}
	}
}
