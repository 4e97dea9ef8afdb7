package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdapterOptions say how to run `tidal adapter` under the harness.
type AdapterOptions struct {
	// Binary is the tidal binary (see TidalBinary).
	Binary string
	// RuleFile is passed as --config; empty runs without rules.
	RuleFile string
	// Args are extra flags, e.g. --metrics-relist-interval=5s.
	Args []string
	// APIServices are GROUP/VERSION pairs to register for the adapter,
	// e.g. {"custom.metrics.k8s.io", "v1beta2"}; each must become
	// Available.
	APIServices [][2]string
	// Namespace, when set, runs the adapter with --namespace as its own
	// service account (tidal-system/tidal-adapter-NAMESPACE) whose object
	// reads are bound by a RoleBinding in that namespace only, as the
	// chart's adapter.watchNamespace binds them.
	Namespace string
}

// Adapter is a running `tidal adapter`.
type Adapter struct {
	Process *Process
	// Port is its --secure-port on 127.0.0.1.
	Port int
	// Namespace and ServiceAccount are its identity.
	Namespace, ServiceAccount string
}

// URL returns https://127.0.0.1:PORT + path.
func (a *Adapter) URL(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", a.Port, path) }

// AdapterReadRole lets the adapter watch any object's metadata (it maps
// metrics onto objects from watch caches) and record Events.
const AdapterReadRole = "tidal-adapter-harness-read"

// bindAdapterIdentity binds the service account NAMESPACE/NAME to what an
// aggregated API server needs (auth delegation, reading the authentication
// configmap) and to AdapterReadRole.
func (h *Harness) bindAdapterIdentity(ctx context.Context, namespace, name string) error {
	return h.bindAdapterIdentityIn(ctx, namespace, name, "")
}

// bindAdapterIdentityIn is bindAdapterIdentity with AdapterReadRole bound
// in readNamespace only, unless it is empty.
func (h *Harness) bindAdapterIdentityIn(ctx context.Context, namespace, name, readNamespace string) error {
	if err := h.EnsureNamespace(ctx, namespace); err != nil {
		return err
	}
	read := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: AdapterReadRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	if _, err := h.Client.RbacV1().ClusterRoles().Create(ctx, read, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}}
	for _, b := range []struct {
		role      rbacv1.RoleRef
		namespace string
	}{
		{rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}, ""},
		{rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AdapterReadRole}, readNamespace},
		{rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}, "kube-system"},
	} {
		meta := metav1.ObjectMeta{Name: name + "-" + b.role.Name}
		var err error
		if b.namespace == "" {
			_, err = h.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: b.role, Subjects: subject}, metav1.CreateOptions{})
		} else {
			meta.Namespace = b.namespace
			_, err = h.Client.RbacV1().RoleBindings(b.namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: b.role, Subjects: subject}, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// StartAdapter runs `tidal adapter` on loopback as the tidal-system/
// tidal-adapter service account, bound to what an aggregated API server
// needs (auth delegation, reading the authentication configmap) and to
// AdapterReadRole; it waits for /readyz and registers the APIServices.
func (h *Harness) StartAdapter(ctx context.Context, o AdapterOptions) (*Adapter, error) {
	a := &Adapter{Namespace: "tidal-system", ServiceAccount: "tidal-adapter"}
	name := "tidal-adapter"
	if o.Namespace != "" {
		a.ServiceAccount = "tidal-adapter-" + o.Namespace
		name = a.ServiceAccount
		o.Args = append(o.Args[:len(o.Args):len(o.Args)], "--namespace="+o.Namespace)
		if err := h.EnsureNamespace(ctx, o.Namespace); err != nil {
			return nil, err
		}
	}
	if err := h.bindAdapterIdentityIn(ctx, a.Namespace, a.ServiceAccount, o.Namespace); err != nil {
		return nil, err
	}
	kubeconfig, _, err := h.Kubeconfig(ServiceAccountIdentity(a.Namespace, a.ServiceAccount))
	if err != nil {
		return nil, err
	}
	serving, err := h.ServingCertFor(a.Namespace, a.ServiceAccount)
	if err != nil {
		return nil, err
	}
	files := "adapter-serving"
	if o.Namespace != "" {
		files = name + "-serving"
	}
	certFile, keyFile, err := serving.WriteFiles(h.Dir, files)
	if err != nil {
		return nil, err
	}
	err = onFreePorts(1, func(ports []int) error {
		a.Port = ports[0]
		args := []string{
			"adapter",
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", a.Port),
			"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
			"--kubeconfig=" + kubeconfig,
			"--prometheus-url=" + h.PrometheusURL,
		}
		if o.RuleFile != "" {
			args = append(args, "--config="+o.RuleFile)
		}
		args = append(args, o.Args...)
		var err error
		if a.Process, err = h.run(name, o.Binary, args, a.Port); err != nil {
			return err
		}
		probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: h.CertPool()}}}
		return waitFor(ctx, a.Process, "tidal adapter /readyz", 90*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, probe, a.URL("/readyz"))
		})
	})
	if err != nil {
		return a, err
	}
	return a, h.registerAll(ctx, a, o.APIServices)
}
