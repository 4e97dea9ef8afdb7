package harness

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// kwokNodeAnnotation marks the nodes kwok manages; other nodes stay untouched.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// bootstrap creates what every harness needs once the apiserver is up.
func (h *Harness) bootstrap(ctx context.Context) error {
	// kwok acts as a cluster admin through this binding rather than system:masters,
	// so its identity is visible in audit and RBAC like a real component's.
	_, err := h.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tidal-harness:kwok"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "tidal-harness:kwok"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok's ClusterRoleBinding: %w", err)
	}
	return nil
}

func (h *Harness) startKwok(ctx context.Context) error {
	kubeconfig, _, err := h.Kubeconfig(Identity{User: "tidal-harness:kwok"})
	if err != nil {
		return err
	}
	err = onFreePorts(1, func(ports []int) error {
		port := ports[0]
		p, err := h.run("kwok", h.bin("kwok"), []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + h.bin("kwok-stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--server-address=" + hostPort(port),
			"--node-ip=127.0.0.1",
			"--cidr=10.244.0.0/16",
		}, port)
		if err != nil {
			return err
		}
		return waitFor(ctx, p, "kwok", 60*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, fmt.Sprintf("http://%s/healthz", hostPort(port)))
		})
	})
	if err != nil {
		return err
	}
	h.NodeName = "kwok-node-0"
	if err := h.CreateFakeNode(ctx, h.NodeName); err != nil {
		return err
	}
	return h.WaitNodeReady(ctx, h.NodeName, 30*time.Second)
}

// CreateFakeNode creates a node that kwok keeps Ready and whose pods it runs.
// Its capacity is large so scheduling never fails for lack of room.
func (h *Harness) CreateFakeNode(ctx context.Context, name string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
	}
	_, err := h.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// WaitNodeReady waits until the node reports Ready.
func (h *Harness) WaitNodeReady(ctx context.Context, name string, timeout time.Duration) error {
	return waitFor(ctx, nil, "node "+name, timeout, func(ctx context.Context) error {
		n, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready yet", name)
	})
}

func restTransport(cfg *rest.Config) (http.RoundTripper, error) {
	return rest.TransportFor(cfg)
}
