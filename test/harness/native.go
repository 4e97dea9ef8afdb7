package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// NativeAutoscalerOptions say how to run `tidal autoscaler --mode=native`.
type NativeAutoscalerOptions struct {
	// Binary is the tidal binary (see TidalBinary).
	Binary string
	// Args are extra flags, e.g. --namespace=demo.
	Args []string
	// ServiceAccount, in tidal-system, is its identity; its RBAC objects
	// and its Lease are those of the manifests with tidal-autoscaler
	// renamed to it, so that it can run beside a crd-mode StartAutoscaler.
	// Default tidal-autoscaler: the objects exactly as users install them.
	ServiceAccount string
	// Name names the process and its log file; default the service account.
	Name string
	// Rules, when set, rewrites the ClusterRole's rules before they are
	// granted (a test that narrows where the autoscaler may write).
	Rules func([]rbacv1.PolicyRule) []rbacv1.PolicyRule
	// Sharding runs it with --sharding and also grants the RBAC of the
	// sharding component; replicas need distinct Names.
	Sharding bool
}

// ShardingComponent is the kustomize component of --sharding, relative to
// the repository.
const ShardingComponent = "manifests/components/sharding"

// NativeModeComponent is the kustomize component whose RBAC
// StartNativeAutoscaler grants, relative to the repository.
const NativeModeComponent = "manifests/components/native-mode"

// StartNativeAutoscaler runs `tidal autoscaler --mode=native` with leader
// election, granted the autoscaler's RBAC as `kubectl kustomize` renders
// manifests/ with the native-mode component, with the environment the
// installed Deployment gives it (AutoscalerEnv), and waits until it is
// ready and holds its Lease. Started again with the same options (a
// restart), it keeps the RBAC already granted.
func (h *Harness) StartNativeAutoscaler(ctx context.Context, o NativeAutoscalerOptions) (*Autoscaler, error) {
	a := &Autoscaler{Namespace: "tidal-system", ServiceAccount: o.ServiceAccount}
	if a.ServiceAccount == "" {
		a.ServiceAccount = "tidal-autoscaler"
	}
	if o.Name == "" {
		o.Name = a.ServiceAccount
	}
	if err := h.EnsureNamespace(ctx, a.Namespace); err != nil {
		return nil, err
	}
	var components []string
	if o.Sharding {
		components = append(components, ShardingComponent)
		o.Args = append(o.Args[:len(o.Args):len(o.Args)], "--sharding")
	}
	objs, err := h.NativeRBAC(ctx, a.ServiceAccount, components...)
	if err != nil {
		return nil, err
	}
	if err := h.createRBAC(ctx, objs, o.Rules); err != nil {
		return nil, err
	}
	kubeconfig, _, err := h.Kubeconfig(ServiceAccountIdentity(a.Namespace, a.ServiceAccount))
	if err != nil {
		return nil, err
	}
	args := func() []string {
		args := append(h.autoscalerArgs(a, "native", kubeconfig), "--leader-elect-resource-name="+a.ServiceAccount)
		return append(args, o.Args...)
	}
	// A restarted autoscaler waits for its predecessor's Lease to expire:
	// ready and leading is the Lease acquired since it started.
	started := time.Now()
	leading := func(lease *coordinationv1.Lease) error {
		if lease.Spec.AcquireTime == nil || lease.Spec.AcquireTime.Time.Before(started.Truncate(time.Second)) {
			return fmt.Errorf("lease not acquired since the start")
		}
		return nil
	}
	if o.Sharding {
		leading = nil // no leader: every replica runs its controller
	}
	err = h.runAutoscaler(ctx, a, o.Name, o.Binary, "tidal autoscaler (native) ready and leading", args, leading)
	return a, err
}

// NativeRBAC renders manifests/ with the native-mode component and
// components (e.g. ShardingComponent) through `kubectl kustomize`, as a
// user's overlay would, and returns the autoscaler's RBAC objects (label
// app.kubernetes.io/component=autoscaler) with the name tidal-autoscaler
// (objects, subjects, the Lease) replaced by serviceAccount.
func (h *Harness) NativeRBAC(ctx context.Context, serviceAccount string, components ...string) ([]runtime.Object, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tidal-native-rbac-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// kustomize takes relative paths only.
	rel := func(p string) string { r, _ := filepath.Rel(dir, filepath.Join(root, p)); return r }
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n",
		rel("manifests"), rel(NativeModeComponent))
	for _, c := range components {
		k += "- " + rel(c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, h.bin("kubectl"), "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("kubectl kustomize manifests/ +native-mode: %w", err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(string(out))))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !strings.Contains(string(doc), "rbac.authorization.k8s.io/v1") ||
			!strings.Contains(string(doc), "app.kubernetes.io/component: autoscaler") {
			continue
		}
		doc = []byte(strings.ReplaceAll(string(doc), "tidal-autoscaler", serviceAccount))
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("rendered native-mode RBAC: %w", err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("kubectl kustomize manifests/ +native-mode rendered no autoscaler RBAC")
	}
	return objs, nil
}

// createRBAC creates objs, keeping those that exist; rules, when set,
// rewrites the ClusterRoles' rules first.
func (h *Harness) createRBAC(ctx context.Context, objs []runtime.Object, rules func([]rbacv1.PolicyRule) []rbacv1.PolicyRule) error {
	rbac := h.Client.RbacV1()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			if rules != nil {
				o.Rules = rules(o.Rules)
			}
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = rbac.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = rbac.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("a %T is not an RBAC object", obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("grant native-mode RBAC: %w", err)
		}
	}
	return nil
}
