package conformance

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

// syncPeriod is both controllers' --horizontal-pod-autoscaler-sync-period.
const syncPeriod = 5 * time.Second

// controllerFlags are given to both controllers, so they are tuned alike.
// The downscale stabilization is short so that legacy (behavior-less)
// scale-downs happen within a scenario.
var controllerFlags = []string{
	"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String(),
	"--horizontal-pod-autoscaler-downscale-stabilization=15s",
	"--horizontal-pod-autoscaler-tolerance=0.1",
	"--horizontal-pod-autoscaler-cpu-initialization-period=5m",
	"--horizontal-pod-autoscaler-initial-readiness-delay=30s",
	"--concurrent-horizontal-pod-autoscaler-syncs=5",
}

// tidalNamespace and tidalServiceAccount are tidal's identity, as the
// manifests will install it.
const tidalNamespace, tidalServiceAccount = "tidal-system", "tidal-autoscaler"

// env is the control plane every test of the package shares.
var env struct {
	h       *harness.Harness
	metrics *metricsserver.Server
	dyn     dynamic.Interface
	// setupErr is why the environment could not be built; tests fail
	// with it.
	setupErr error
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Scenarios spend their time waiting for sync periods, not computing:
	// run them all at once unless -test.parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "64")
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tidal-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	h, err := harness.Start(ctx, harness.Options{
		Dir: dir, ControllerManager: true, Scheduler: true, Kwok: true,
		HPAController: true, HPAControllerArgs: controllerFlags,
		// Beta and on by default in v1.37; explicit, as the scale-to-zero
		// scenarios need it on the apiserver and both controllers.
		FeatureGates: []string{"HPAScaleToZero=true"},
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		},
	})
	if err != nil {
		env.setupErr = err
		return m.Run()
	}
	env.h = h
	env.setupErr = setup(ctx, h)
	fmt.Fprintf(os.Stderr, "conformance: environment ready in %s\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	cancel()
	if env.metrics != nil {
		_ = env.metrics.Wait()
	}
	if err := h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop harness:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "conformance: harness files and logs kept in %s\n", dir)
	}
	return code
}

// setup starts the test metrics server, applies the CRD and runs tidal.
func setup(ctx context.Context, h *harness.Harness) error {
	var err error
	if env.metrics, err = metricsserver.Start(ctx, h, metricsserver.Options{}); err != nil {
		return fmt.Errorf("test metrics server: %w", err)
	}
	if env.dyn, err = dynamic.NewForConfig(h.Admin); err != nil {
		return err
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return err
	}
	return startTidal(ctx, h)
}

// startTidal runs `tidal autoscaler --mode=crd` as its own service
// account, with leader election, and waits until it holds the lease.
func startTidal(ctx context.Context, h *harness.Harness) error {
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		return err
	}
	if err := h.EnsureNamespace(ctx, tidalNamespace); err != nil {
		return err
	}
	if err := grantTidalRBAC(ctx, h.Client); err != nil {
		return err
	}
	kubeconfig, _, err := h.Kubeconfig(harness.ServiceAccountIdentity(tidalNamespace, tidalServiceAccount))
	if err != nil {
		return err
	}
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	args := append([]string{
		"autoscaler", "--mode=crd", "--kubeconfig=" + kubeconfig,
		"--leader-elect=true", "--leader-election-namespace=" + tidalNamespace,
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
		"--kube-api-qps=100", "--kube-api-burst=200",
	}, controllerFlags...)
	p, err := h.StartProcess("tidal-autoscaler", bin, args, port)
	if err != nil {
		return err
	}
	return harness.WaitReady(ctx, p, "tidal autoscaler leading", 60*time.Second, func(ctx context.Context) error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		lease, err := h.Client.CoordinationV1().Leases(tidalNamespace).Get(ctx, "tidal-autoscaler", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease not held yet")
		}
		return nil
	})
}

// tidalRules are what `tidal autoscaler --mode=crd` needs, the upstream HPA
// controller's role (system:controller:horizontal-pod-autoscaler) with
// HorizontalAutoscalers in place of HorizontalPodAutoscalers.
var tidalRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"autoscaling.tidal.dev"}, Resources: []string{"horizontalautoscalers"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"autoscaling.tidal.dev"}, Resources: []string{"horizontalautoscalers/status"}, Verbs: []string{"update", "patch"}},
	{APIGroups: []string{"*"}, Resources: []string{"*/scale"}, Verbs: []string{"get", "update"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	{APIGroups: []string{"custom.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
}

// tidalLeaseRules are namespaced to tidal's own namespace.
var tidalLeaseRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
}

func grantTidalRBAC(ctx context.Context, client kubernetes.Interface) error {
	const name = "tidal:autoscaler"
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tidalServiceAccount, Namespace: tidalNamespace}}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	create := func(err error, what string) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", what, name, err)
		}
		return nil
	}
	meta := metav1.ObjectMeta{Name: name}
	nsMeta := metav1.ObjectMeta{Name: name, Namespace: tidalNamespace}
	_, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: tidalRules}, metav1.CreateOptions{})
	if err := create(err, "ClusterRole"); err != nil {
		return err
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref("ClusterRole"), Subjects: subject}, metav1.CreateOptions{})
	if err := create(err, "ClusterRoleBinding"); err != nil {
		return err
	}
	_, err = client.RbacV1().Roles(tidalNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: nsMeta, Rules: tidalLeaseRules}, metav1.CreateOptions{})
	if err := create(err, "Role"); err != nil {
		return err
	}
	_, err = client.RbacV1().RoleBindings(tidalNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: nsMeta, RoleRef: ref("Role"), Subjects: subject}, metav1.CreateOptions{})
	return create(err, "RoleBinding")
}
