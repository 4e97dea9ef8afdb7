package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// AutoscalerOptions say how to run `tidal autoscaler` under the harness.
type AutoscalerOptions struct {
	// Binary is the tidal binary (see TidalBinary).
	Binary string
	// Mode is --mode; empty means "crd". Apply the CRDs (ApplyCRDs) first.
	// Only the crd-mode RBAC is granted: "native" also needs the
	// HorizontalPodAutoscaler rules of manifests/components/native-mode.
	Mode string
	// Args are extra flags, e.g. --horizontal-pod-autoscaler-sync-period=5s.
	Args []string
	// Name names the process and its log file; default "tidal-autoscaler".
	// Replicas of one deployment need distinct names.
	Name string
	// Sharding runs it with --sharding and also grants the Role of
	// manifests/components/sharding.
	Sharding bool
}

// ShardingRBACFile is the sharding component's Role, applied with
// AutoscalerOptions.Sharding.
const ShardingRBACFile = ShardingComponent + "/rbac.yaml"

// Autoscaler is a running `tidal autoscaler`.
type Autoscaler struct {
	Process *Process
	// HealthPort serves /readyz and /healthz on 127.0.0.1.
	HealthPort int
	// SecurePort serves /metrics (and, with --profiling, /debug/pprof/) on
	// 127.0.0.1 over HTTPS, to the harness admin's client certificate (see
	// MetricsURL).
	SecurePort int
	// Namespace and ServiceAccount are its identity; the leader election
	// Lease is Namespace/ServiceAccount.
	Namespace, ServiceAccount string
}

// AutoscalerRBACFile is the manifest whose ClusterRole, ClusterRoleBinding,
// Role and RoleBinding StartAutoscaler applies, relative to the repository.
const AutoscalerRBACFile = "manifests/rbac-autoscaler.yaml"

// StartAutoscaler runs `tidal autoscaler` with leader election as the
// tidal-system/tidal-autoscaler service account, granted the RBAC of
// manifests/rbac-autoscaler.yaml (applied as written, so the harness grants
// what users install), with the environment the installed Deployment
// gives it (AutoscalerEnv), and waits until it is ready and holds its Lease.
func (h *Harness) StartAutoscaler(ctx context.Context, o AutoscalerOptions) (*Autoscaler, error) {
	a := &Autoscaler{Namespace: "tidal-system", ServiceAccount: "tidal-autoscaler"}
	if o.Mode == "" {
		o.Mode = "crd"
	}
	if o.Name == "" {
		o.Name = "tidal-autoscaler"
	}
	if err := h.EnsureNamespace(ctx, a.Namespace); err != nil {
		return nil, err
	}
	rbacFiles := []string{AutoscalerRBACFile}
	if o.Sharding {
		rbacFiles = append(rbacFiles, ShardingRBACFile)
		o.Args = append(o.Args[:len(o.Args):len(o.Args)], "--sharding")
	}
	for _, f := range rbacFiles {
		if err := h.grantAutoscalerRBAC(ctx, a, f); err != nil {
			return nil, err
		}
	}
	kubeconfig, _, err := h.Kubeconfig(ServiceAccountIdentity(a.Namespace, a.ServiceAccount))
	if err != nil {
		return nil, err
	}
	args := func() []string { return append(h.autoscalerArgs(a, o.Mode, kubeconfig), o.Args...) }
	leading := func(lease *coordinationv1.Lease) error {
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease not held yet")
		}
		return nil
	}
	if o.Sharding {
		leading = nil // no leader: every replica runs its controller
	}
	err = h.runAutoscaler(ctx, a, o.Name, o.Binary, "tidal autoscaler ready and leading", args, leading)
	return a, err
}

// runAutoscaler runs a (name, bin) on two free loopback ports with the
// environment the installed Deployment gives it (AutoscalerEnv) and the
// flags args returns once a's ports are set, and waits until it answers
// /readyz and leading holds of its Lease (a.ServiceAccount in a.Namespace;
// nil: no Lease to wait for). what describes the wait.
func (h *Harness) runAutoscaler(ctx context.Context, a *Autoscaler, name, bin, what string, args func() []string, leading func(*coordinationv1.Lease) error) error {
	env, err := AutoscalerEnv()
	if err != nil {
		return err
	}
	return onFreePorts(2, func(ports []int) error {
		a.HealthPort, a.SecurePort = ports[0], ports[1]
		var err error
		if a.Process, err = h.runWithEnv(name, bin, args(), env, ports...); err != nil {
			return err
		}
		probe := &http.Client{Timeout: 2 * time.Second}
		return waitFor(ctx, a.Process, what, 60*time.Second, func(ctx context.Context) error {
			if err := httpOK(ctx, probe, fmt.Sprintf("http://127.0.0.1:%d/readyz", a.HealthPort)); err != nil {
				return err
			}
			if leading == nil {
				return nil
			}
			lease, err := h.Client.CoordinationV1().Leases(a.Namespace).Get(ctx, a.ServiceAccount, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return leading(lease)
		})
	})
}

// autoscalerArgs are the flags of every `tidal autoscaler` the harness
// runs: mode, identity, Lease namespace, and a's ports on loopback.
func (h *Harness) autoscalerArgs(a *Autoscaler, mode, kubeconfig string) []string {
	return []string{
		"autoscaler", "--mode=" + mode, "--kubeconfig=" + kubeconfig,
		"--leader-elect=true", "--leader-election-namespace=" + a.Namespace,
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", a.HealthPort),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", a.SecurePort),
		// The harness admin's client certificate is signed by the cluster CA.
		"--client-ca-file=" + h.path("certs", "ca.crt"),
	}
}

// MetricsURL is the URL of path (e.g. /metrics) on the secure port; read
// it with a client presenting the harness admin's certificate, e.g.
// rest.TransportFor of h.Admin with Insecure set (the serving certificate
// is self-signed).
func (a *Autoscaler) MetricsURL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", a.SecurePort, path)
}

func (h *Harness) grantAutoscalerRBAC(ctx context.Context, a *Autoscaler, rbacFile string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	file := filepath.Join(root, rbacFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rbac := h.Client.RbacV1()
	applied := 0
	for i, doc := range strings.Split(string(data), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		var obj interface{ GetName() string }
		var create func() error
		switch meta.Kind {
		case "":
			continue
		case "ClusterRole":
			o := &rbacv1.ClusterRole{}
			obj, create = o, func() error { _, err := rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); return err }
		case "ClusterRoleBinding":
			o := &rbacv1.ClusterRoleBinding{}
			obj, create = o, func() error { _, err := rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{}); return err }
		case "Role":
			o := &rbacv1.Role{}
			obj, create = o, func() error { _, err := rbac.Roles(a.Namespace).Create(ctx, o, metav1.CreateOptions{}); return err }
		case "RoleBinding":
			o := &rbacv1.RoleBinding{}
			obj, create = o, func() error {
				_, err := rbac.RoleBindings(a.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		default:
			return fmt.Errorf("%s: document %d is a %s; the harness applies only RBAC objects", file, i, meta.Kind)
		}
		if err := yaml.Unmarshal([]byte(doc), obj); err != nil {
			return fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s from %s: %w", meta.Kind, obj.GetName(), file, err)
		}
		applied++
	}
	if applied == 0 {
		return fmt.Errorf("%s holds no RBAC objects", file)
	}
	return nil
}
