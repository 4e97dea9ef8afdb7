package harness

import (
	"context"
	"fmt"
	"net"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// AggregatedServer describes an aggregated API server running on loopback
// that the harness registers with the aggregator.
type AggregatedServer struct {
	// Namespace and Service name the ExternalName Service the APIService
	// points at; the server's certificate must be valid for
	// SERVICE.NAMESPACE.svc (see ServingCertFor).
	Namespace, Service string
	// Port is the server's --secure-port on 127.0.0.1.
	Port int
	// CABundle verifies the server's certificate. Empty means
	// insecureSkipTLSVerify, which only a test of that mode should use.
	CABundle []byte
}

// ServingCertFor issues a serving certificate for SERVICE.NAMESPACE.svc (the
// name the aggregator checks), localhost and 127.0.0.1, signed by the
// harness CA; the CA is h.CA.CertPEM.
func (h *Harness) ServingCertFor(namespace, service string) (KeyPair, error) {
	svc := service + "." + namespace + ".svc"
	return h.CA.ServingCert(svc, []string{svc, svc + ".cluster.local", "localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
}

// RegisterAPIService creates the namespace, an ExternalName Service to
// localhost and the APIService GROUP/VERSION for the server. An APIService
// cannot point at endpoints on 127.0.0.1, so the harness's apiserver runs
// with --enable-aggregator-routing=false and resolves the Service to
// localhost:PORT.
func (h *Harness) RegisterAPIService(ctx context.Context, srv AggregatedServer, group, version string) error {
	if err := h.EnsureNamespace(ctx, srv.Namespace); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: srv.Service, Namespace: srv.Namespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(srv.Port)}},
		},
	}
	if _, err := h.Client.CoreV1().Services(srv.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s/%s: %w", srv.Namespace, srv.Service, err)
	}
	client, err := aggregator.NewForConfig(h.Admin)
	if err != nil {
		return err
	}
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: version + "." + group},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: group, Version: version,
			Service: &apiregistrationv1.ServiceReference{
				Namespace: srv.Namespace, Name: srv.Service, Port: ptr.To(int32(srv.Port)),
			},
			CABundle:              srv.CABundle,
			InsecureSkipTLSVerify: len(srv.CABundle) == 0,
			GroupPriorityMinimum:  100,
			VersionPriority:       100,
		},
	}
	_, err = client.ApiregistrationV1().APIServices().Create(ctx, apiService, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *apiregistrationv1.APIService
		if cur, err = client.ApiregistrationV1().APIServices().Get(ctx, apiService.Name, metav1.GetOptions{}); err == nil {
			cur.Spec = apiService.Spec
			_, err = client.ApiregistrationV1().APIServices().Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("register APIService %s: %w", apiService.Name, err)
	}
	return nil
}

// WaitAPIServiceAvailable waits until the APIService's Available condition is
// True and returns the last condition message otherwise.
func (h *Harness) WaitAPIServiceAvailable(ctx context.Context, name string, timeout time.Duration) error {
	client, err := aggregator.NewForConfig(h.Admin)
	if err != nil {
		return err
	}
	return waitFor(ctx, nil, "APIService "+name, timeout, func(ctx context.Context) error {
		s, err := client.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				if c.Status == apiregistrationv1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("condition Available=%s: %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("no Available condition yet")
	})
}

// EnsureNamespace creates the namespace if it does not exist.
func (h *Harness) EnsureNamespace(ctx context.Context, name string) error {
	_, err := h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// WaitDeploymentReady waits until the Deployment's current generation has
// `replicas` ready, updated pods, and returns its pods.
func (h *Harness) WaitDeploymentReady(ctx context.Context, namespace, name string, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := waitFor(ctx, nil, "deployment "+namespace+"/"+name, timeout, func(ctx context.Context) error {
		d, err := h.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.Replicas != want {
			return fmt.Errorf("generation %d observed %d, replicas %d updated %d ready %d, want %d",
				d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, want)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return err
		}
		list, err := h.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && PodReady(&p) {
				pods = append(pods, p)
			}
		}
		if int32(len(pods)) != want {
			return fmt.Errorf("%d ready pods, want %d", len(pods), want)
		}
		return nil
	})
	return pods, err
}

// PodReady reports whether the pod is Running with condition Ready=True.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Deployment returns a Deployment of `replicas` pods labelled app=NAME that
// tolerates and prefers the kwok node; kwok runs them, nothing executes.
func Deployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "fake-app:latest",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
					NodeSelector: map[string]string{"type": "kwok"},
					Tolerations: []corev1.Toleration{{
						Key: kwokNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
					}},
				},
			},
		},
	}
}
