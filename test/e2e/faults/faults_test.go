package faults

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/behavior"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// TestPrometheusFaults: Prometheus hanging, answering garbage or 1 GiB.
// Each read through the aggregator fails with a server error (the time it
// took is reported against --prometheus-timeout), the autoscaler reports
// the failed metric as upstream does (ScalingActive=False,
// FailedGetPodsMetric) and never scales down, the adapter reads no more of
// a huge answer than its limit and its memory stays bounded, and all
// recovers when Prometheus does.
func TestPrometheusFaults(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := h.RestConfigFor(harness.HPAServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := h.APIServerURL + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/" + metric + "?labelSelector=app%3D" + app
	read := func() (int, string, time.Duration) {
		start := time.Now()
		resp, err := c.Get(path)
		if err != nil {
			return 0, err.Error(), time.Since(start)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), time.Since(start)
	}
	rss := func() float64 {
		kib, err := harness.StatusKiB(env.adapter.Process.PID(), "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		return kib / 1024
	}
	for i, mode := range []string{hang, garbage, huge} {
		t.Run(mode, func(t *testing.T) {
			if i > 0 {
				renewAutoscaler(ctx, t)
			}
			if err := harness.WaitReady(ctx, nil, "steady before the fault", time.Minute, steady); err != nil {
				t.Fatal(err)
			}
			before := rss()
			sentBefore := env.proxy.sent.Load()
			env.proxy.set(mode)
			start := time.Now()
			code, body, took := read()
			t.Logf("%s: a read through the aggregator answered %d in %v (--prometheus-timeout %v): %.200s", mode, code, took.Round(10*time.Millisecond), promTimeout, body)
			if code < 500 {
				t.Errorf("%s: read answered %d, want a server error", mode, code)
			}
			// Three sync periods and a timeout for the autoscaler to
			// notice, while nothing may scale down.
			deadline := time.Now().Add(3*syncPeriod + 2*promTimeout)
			var failed bool
			for time.Now().Before(deadline) {
				ha, r, err := autoscalerState(ctx, app)
				if err != nil {
					t.Fatal(err)
				}
				if r < replicas {
					t.Fatalf("%s: the Deployment went down to %d replicas during the fault", mode, r)
				}
				if s, reason, _ := condition(ha, "ScalingActive"); s == "False" && reason == "FailedGetPodsMetric" {
					failed = true
				}
				time.Sleep(200 * time.Millisecond)
			}
			if !failed {
				t.Errorf("%s: ScalingActive never became False/FailedGetPodsMetric", mode)
			}
			if evs, err := events(ctx, app, "FailedGetPodsMetric", start); err != nil || len(evs) == 0 {
				t.Errorf("%s: no FailedGetPodsMetric event (%v)", mode, err)
			}
			after := rss()
			t.Logf("%s: adapter RSS %.0f MiB before, %.0f MiB after", mode, before, after)
			if mode == huge {
				sent := env.proxy.sent.Load() - sentBefore
				t.Logf("huge: the proxy wrote %d MiB of its 1 GiB answers", sent>>20)
				if after-before > 512 {
					t.Errorf("huge: adapter RSS grew by %.0f MiB; the response limit should bound it", after-before)
				}
			}
			env.proxy.set(normal)
			if err := harness.WaitReady(ctx, nil, "recovered after the fault", time.Minute, steady); err != nil {
				t.Error(err)
			}
		})
	}
}

// renewAutoscaler deletes the autoscaler app and creates it again, so that
// each fault's Warning events have a budget of their own: client-go's
// event recorder (upstream's too) lets one object 25 Warning events, then
// one every 5 minutes, and a fault's syncs make about ten (two a failed
// sync), so the third fault's events would be dropped. A new object, with
// a new UID, starts a new budget.
func renewAutoscaler(ctx context.Context, t *testing.T) {
	t.Helper()
	res := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	if err := res.Delete(ctx, app, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.WaitReady(ctx, nil, "the autoscaler deleted", time.Minute, func(ctx context.Context) error {
		_, err := res.Get(ctx, app, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	}); err != nil {
		t.Fatal(err)
	}
	if err := createAutoscaler(ctx, app, 0); err != nil {
		t.Fatal(err)
	}
}

// TestServingCertificateRotation: a new serving certificate written over
// the adapter's files is served without a restart, and the aggregator
// keeps reaching the adapter.
func TestServingCertificateRotation(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pid := env.adapter.Process.PID()
	kp, err := h.ServingCertFor(env.adapter.Namespace, env.adapter.ServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A pair that does not match while the files are half written is
	// refused and the old pair kept until both are new.
	if _, _, err := kp.WriteFiles(filepath.Dir(env.certFile), "adapter-serving"); err != nil {
		t.Fatal(err)
	}
	want := leafSerial(t, leaf)
	start := time.Now()
	if err := harness.WaitReady(ctx, env.adapter.Process, "the new certificate served", 2*time.Minute, func(ctx context.Context) error {
		got, err := servedSerial(env.adapter.URL(""), h)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("serving serial %s, want %s", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the rotated certificate was served %v after it was written", time.Since(start).Round(100*time.Millisecond))
	if env.adapter.Process.PID() != pid {
		t.Errorf("the adapter restarted")
	}
	if err := harness.WaitReady(ctx, nil, "the aggregator reaching the adapter", time.Minute, steady); err != nil {
		t.Error(err)
	}
}

// TestScaleWriteFaults: /scale answering 500 (a failing admission webhook)
// and 403 (the autoscaler's RBAC losing /scale): each failed write is a
// FailedRescale event and AbleToScale=False/FailedUpdateScale, as
// upstream; the autoscaler retries and scales once /scale works again.
func TestScaleWriteFaults(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// An object of its own: the events of the other tests' faults must not
	// use up its event budget.
	const name = "scale"
	podNames := steadyWorkload(ctx, t, name, 0)

	faults := []struct {
		name    string
		inject  func() error
		remove  func() error
		message string // in the event and condition
	}{
		{
			name: "500: a failing admission webhook",
			inject: func() error {
				fail := admissionregistrationv1.Fail
				none := admissionregistrationv1.SideEffectClassNone
				_, err := h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
					ObjectMeta: metav1.ObjectMeta{Name: "faults-scale"},
					Webhooks: []admissionregistrationv1.ValidatingWebhook{{
						Name:                    "scale.faults.tidal.test",
						ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
						Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments/scale"}}}},
						FailurePolicy:           &fail,
						SideEffects:             &none,
						AdmissionReviewVersions: []string{"v1"},
						NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
					}},
				}, metav1.CreateOptions{})
				return err
			},
			remove: func() error {
				return h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "faults-scale", metav1.DeleteOptions{})
			},
			message: "failed calling webhook",
		},
		{
			name: "403: no right to update /scale",
			inject: func() error {
				return editScaleRule(ctx, h, func(r *rbacv1.PolicyRule) { r.Verbs = []string{"get"} })
			},
			remove: func() error {
				return editScaleRule(ctx, h, func(r *rbacv1.PolicyRule) { r.Verbs = []string{"get", "update"} })
			},
			message: "forbidden",
		},
	}
	want := int32(replicas)
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			if err := f.inject(); err != nil {
				t.Fatal(err)
			}
			removed := false
			defer func() {
				if !removed {
					_ = f.remove()
				}
			}()
			// Raise the load: each step asks for one more pod.
			want++
			setRates(podNames, float64(targetPerPod)*float64(want)/replicas)
			start := time.Now()
			var seen bool
			if err := harness.WaitReady(ctx, nil, "a refused scale write reported", time.Minute, func(ctx context.Context) error {
				ha, r, err := autoscalerState(ctx, name)
				if err != nil {
					return err
				}
				if r != replicas+int32(i) {
					return fmt.Errorf("the Deployment has %d replicas while /scale fails", r)
				}
				s, reason, msg := condition(ha, "AbleToScale")
				if s != "False" || reason != "FailedUpdateScale" || !strings.Contains(msg, f.message) {
					return fmt.Errorf("AbleToScale %s %s: %s", s, reason, msg)
				}
				evs, err := events(ctx, name, "FailedRescale", start)
				if err != nil || len(evs) == 0 {
					return fmt.Errorf("no FailedRescale event yet (%v)", err)
				}
				seen = strings.Contains(strings.Join(evs, "\n"), f.message)
				if !seen {
					return fmt.Errorf("FailedRescale events %v do not say %q", evs, f.message)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := f.remove(); err != nil {
				t.Fatal(err)
			}
			removed = true
			if err := harness.WaitReady(ctx, nil, "the scale written once /scale works", time.Minute, func(ctx context.Context) error {
				ha, r, err := autoscalerState(ctx, name)
				if err != nil {
					return err
				}
				if r <= replicas+int32(i) {
					return fmt.Errorf("%d replicas", r)
				}
				if s, reason, _ := condition(ha, "AbleToScale"); s != "True" {
					return fmt.Errorf("AbleToScale %s %s", s, reason)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_, r, _ := autoscalerState(ctx, name)
			want = r
		})
	}
}

// editScaleRule changes the tidal-autoscaler ClusterRole's */scale rule.
func editScaleRule(ctx context.Context, h *harness.Harness, edit func(*rbacv1.PolicyRule)) error {
	role, err := h.Client.RbacV1().ClusterRoles().Get(ctx, "tidal-autoscaler", metav1.GetOptions{})
	if err != nil {
		return err
	}
	found := false
	for i := range role.Rules {
		for _, r := range role.Rules[i].Resources {
			if r == "*/scale" {
				edit(&role.Rules[i])
				found = true
			}
		}
	}
	if !found {
		return fmt.Errorf("ClusterRole tidal-autoscaler has no */scale rule: %+v", role.Rules)
	}
	_, err = h.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
	return err
}

func leafSerial(t *testing.T, c tls.Certificate) string {
	t.Helper()
	if c.Leaf != nil {
		return c.Leaf.SerialNumber.String()
	}
	cert, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// servedSerial is the serial of the certificate the server presents.
func servedSerial(url string, h *harness.Harness) (string, error) {
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: h.CertPool()})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestClockSkewHistory: a stabilization history written by a replica whose
// clock ran 5 minutes ahead (a recommendation of 4 "in the future") does not
// hold off scaling down once the window has passed: the restarted
// autoscaler, reading it back, takes times after now as now.
func TestClockSkewHistory(t *testing.T) {
	h := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const name = "skew"
	podNames := steadyWorkload(ctx, t, name, 10)

	// The replica with the fast clock: stopped after writing a history
	// whose last recommendation of 3 is 5 minutes ahead.
	if err := env.autoscaler.Process.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(5 * time.Minute)
	u, err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	history := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: replicas, Time: ahead}}}
	if err := unstructured.SetNestedField(u.Object, history.Encode(), "status", "tidal", "history"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The load drops; the other replica (a restart here) takes over.
	setRates(podNames, targetPerPod/10)
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if env.autoscaler, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{
		Binary: bin, Name: "tidal-autoscaler-2", Args: []string{"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()},
	}); err != nil {
		t.Fatal(err)
	}
	// Well before the 5 minutes the skewed history would hold it: the
	// 10 s window, the lease handover and the rate window.
	if err := harness.WaitReady(ctx, env.autoscaler.Process, "a scale-down despite the history from the future", 2*time.Minute, func(ctx context.Context) error {
		_, r, err := autoscalerState(ctx, name)
		if err != nil {
			return err
		}
		if r >= replicas {
			return fmt.Errorf("%d replicas", r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("scaled down %v after the restart; the skewed history's recommendation was %v ahead", time.Since(restarted).Round(time.Second), time.Until(ahead).Round(time.Second))
}

// steadyWorkload creates the Deployment NAME of `replicas` pods at the
// target and its HorizontalAutoscaler with a scale-down window of
// windowSeconds, waits until the autoscaler holds it, and returns the pods.
// Tests that need events of their own use a workload of their own (see
// events).
func steadyWorkload(ctx context.Context, t *testing.T, name string, windowSeconds int32) []string {
	t.Helper()
	h := env.h
	if _, err := h.Client.AppsV1().Deployments(ns).Create(ctx, harness.Deployment(ns, name, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := h.WaitDeploymentReady(ctx, ns, name, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var podNames []string
	for _, p := range pods {
		podNames = append(podNames, p.Name)
	}
	setRates(podNames, targetPerPod)
	if err := harness.WaitReady(ctx, nil, "every pod at the target", 2*time.Minute, func(ctx context.Context) error { return atTarget(ctx, name) }); err != nil {
		t.Fatal(err)
	}
	if err := createAutoscaler(ctx, name, windowSeconds); err != nil {
		t.Fatal(err)
	}
	if err := harness.WaitReady(ctx, nil, "steady", time.Minute, func(ctx context.Context) error { return steadyNamed(ctx, name) }); err != nil {
		t.Fatal(err)
	}
	return podNames
}
