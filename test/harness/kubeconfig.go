package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identity is a user the apiserver authenticates by client certificate.
type Identity struct {
	User   string
	Groups []string
}

// HPAServiceAccount is the identity kube-controller-manager's HPA controller
// uses with --use-service-account-credentials; the adapter must serve it.
var HPAServiceAccount = Identity{
	User:   "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
}

// ServiceAccountIdentity returns the identity of a service account. The
// apiserver gives certificate users the same name and groups as the
// account's tokens, so RBAC bindings to the ServiceAccount apply.
func ServiceAccountIdentity(namespace, name string) Identity {
	return Identity{
		User:   fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// Kubeconfig writes a kubeconfig for the identity into Dir and returns its
// path and rest config. The file name is derived from the user name.
func (h *Harness) Kubeconfig(id Identity) (string, *rest.Config, error) {
	kp, err := h.CA.ClientCert(id.User, id.Groups...)
	if err != nil {
		return "", nil, err
	}
	name := strings.NewReplacer(":", "-", "/", "-").Replace(id.User)
	path := h.path(name + ".kubeconfig")
	if err := writeKubeconfig(path, h.APIServerURL, h.CA.CertPEM, kp, id.User); err != nil {
		return "", nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return "", nil, err
	}
	return path, cfg, nil
}

// RestConfigFor returns a rest config that acts as the identity, without a file.
func (h *Harness) RestConfigFor(id Identity) (*rest.Config, error) {
	_, cfg, err := h.Kubeconfig(id)
	return cfg, err
}

func writeKubeconfig(path, server string, caPEM []byte, kp KeyPair, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tidal"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	cfg.Contexts["tidal"] = &clientcmdapi.Context{Cluster: "tidal", AuthInfo: user}
	cfg.CurrentContext = "tidal"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// RestConfigForServiceAccountToken returns a rest config that acts as the
// ServiceAccount namespace/name with a bound token from the TokenRequest
// API, as kube-controller-manager's controllers do with
// --use-service-account-credentials. The ServiceAccount is created when
// missing. Unlike a client certificate, which kube-apiserver verifies on
// every request, a token is verified once and then found in the
// apiserver's token cache, as for the real controllers.
func (h *Harness) RestConfigForServiceAccountToken(ctx context.Context, namespace, name string, lifetime time.Duration) (*rest.Config, error) {
	c, err := kubernetes.NewForConfig(h.Admin)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create ServiceAccount %s/%s: %w", namespace, name, err)
	}
	seconds := int64(lifetime.Seconds())
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(h.Admin)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// RoundTripFunc is a function as an http.RoundTripper: tests wrap a
// rest.Config's transport with one (WrapTransport) to see the requests and
// answers of a client.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
