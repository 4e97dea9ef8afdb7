package crd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// statusAnswers records the answers to the status writes a config's
// clients make.
type statusAnswers struct {
	mu      sync.Mutex
	answers [][]byte // each answer's body
}

func (a *statusAnswers) config(t *testing.T, contentType string) *rest.Config {
	t.Helper()
	if env.err != nil {
		t.Fatalf("environment: %v", env.err)
	}
	cfg := rest.CopyConfig(env.h.Admin)
	cfg.ContentType = contentType
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return harness.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err != nil || r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/status") {
				return resp, err
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			a.mu.Lock()
			a.answers = append(a.answers, body)
			a.mu.Unlock()
			return resp, err
		})
	}
	return cfg
}

func (a *statusAnswers) last() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.answers) == 0 {
		return nil
	}
	return a.answers[len(a.answers)-1]
}

// metaCodecs decode meta.k8s.io/v1's PartialObjectMetadata, in JSON or
// protobuf, and no other kind.
var metaCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	return serializer.NewCodecFactory(s)
}()

// checkMetadataAnswer fails t unless answer is kube-apiserver's
// PartialObjectMetadata of the object named name: its metadata, no spec or
// status.
func checkMetadataAnswer(t *testing.T, answer []byte, name string) {
	t.Helper()
	obj, _, err := metaCodecs.UniversalDeserializer().Decode(answer, nil, nil)
	if m, ok := obj.(*metav1.PartialObjectMetadata); err != nil || !ok || m.Name != name {
		t.Errorf("the status write's answer (%d bytes) decodes as %T %v; want %s's metadata alone (PartialObjectMetadata)", len(answer), obj, err, name)
	}
}

// TestStatusWrites writes statuses as the autoscaler does in crd mode
// (JSON, without the spec) and native mode (protobuf) and checks that
// kube-apiserver stores the status, keeps the spec and its owner, and
// answers with the object's metadata alone (in protobuf, in both modes),
// which the writer discards (the informer delivers the object), and that
// a refused write still gives the apiserver's Status error.
func TestStatusWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("HorizontalAutoscaler, JSON", func(t *testing.T) {
		var answers statusAnswers
		cfg := answers.config(t, runtime.ContentTypeJSON)
		obj := object(t, `{"metadata":{"name":"answer"},"spec":{
			"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5}}`)
		if _, err := client(t).Create(ctx, obj, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
			t.Fatal(err)
		}
		src, _ := startCRDSource(ctx, t, cfg)
		var cached source.Object
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			var err error
			cached, err = src.Get("crd", "answer")
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the informer never held crd/answer: %v", err)
		}
		o := cached.DeepCopy()
		o.HPAStatus().DesiredReplicas = 4
		if err := src.UpdateStatus(ctx, o); err != nil {
			t.Fatal(err)
		}
		checkMetadataAnswer(t, answers.last(), "answer")
		// In protobuf, which kube-apiserver encodes for a custom
		// resource's metadata (the writer steps over its managed fields
		// by their lengths instead of scanning them).
		if answer := answers.last(); !bytes.HasPrefix(answer, []byte("k8s\x00")) {
			t.Errorf("the status write's answer is %.40q..., want protobuf", answer)
		}
		// A refusal still comes as a Status the client reads: the same
		// object again carries a resourceVersion no longer current.
		if err := src.UpdateStatus(ctx, o); !apierrors.IsConflict(err) {
			t.Errorf("a write of a stale object returned %v, want the Conflict Status", err)
		}
		got, err := client(t).Get(ctx, "answer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkInt(t, got, "status.desiredReplicas", 4)
		// The write sends no spec: the stored one stays, and so does its
		// owner in managedFields.
		checkInt(t, got, "spec.maxReplicas", 5)
		owners := map[string]string{}
		for _, e := range got.GetManagedFields() {
			if e.FieldsV1 != nil {
				owners[e.Manager+"/"+e.Subresource] = e.FieldsV1.GetRawString()
			}
		}
		if f := owners["creator/"]; !strings.Contains(f, `"f:maxReplicas"`) || !strings.Contains(f, `"f:scaleTargetRef"`) {
			t.Errorf("after the status write the creator owns %s; want the spec it wrote (managedFields %v)", f, owners)
		}
		if f := owners[source.FieldManager+"/status"]; !strings.Contains(f, `"f:desiredReplicas"`) || strings.Contains(f, `"f:spec"`) {
			t.Errorf("after the status write %s owns %s; want the status it wrote and no spec", source.FieldManager, f)
		}
	})

	t.Run("HorizontalPodAutoscaler, protobuf", func(t *testing.T) {
		var answers statusAnswers
		cfg := answers.config(t, runtime.ContentTypeProtobuf)
		cs, err := kubernetes.NewForConfig(env.h.Admin)
		if err != nil {
			t.Fatal(err)
		}
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers("crd").Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "answer"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MaxReplicas:    5,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := source.NewHPAStatusWriter(cfg, flowcontrol.NewFakeAlwaysRateLimiter(), 1)
		if err != nil {
			t.Fatal(err)
		}
		hpa.Status.DesiredReplicas = 4
		if err := w.UpdateStatus(ctx, hpa); err != nil {
			t.Fatal(err)
		}
		checkMetadataAnswer(t, answers.last(), "answer")
		if err := w.UpdateStatus(ctx, hpa); !apierrors.IsConflict(err) {
			t.Errorf("a write of a stale object returned %v, want the Conflict Status", err)
		}
		got, err := cs.AutoscalingV2().HorizontalPodAutoscalers("crd").Get(ctx, "answer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.DesiredReplicas != 4 {
			t.Errorf("status.desiredReplicas = %d after the write, want 4", got.Status.DesiredReplicas)
		}
	})
}

// startCRDSource starts crd mode's source of the namespace "crd" with
// clients made from cfg, as the autoscaler makes them, and waits for its
// informer to sync.
func startCRDSource(ctx context.Context, t *testing.T, cfg *rest.Config) (source.Source, source.HAClients) {
	t.Helper()
	clients, err := source.NewHorizontalAutoscalerClients(cfg, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := source.CRDSourceIn(clients, "crd", 0)
	go src.Informer().RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), src.Informer().HasSynced) {
		t.Fatal("the informer did not sync")
	}
	return src, clients
}

// TestStatusWriteEchoes writes statuses as crd mode does and checks the
// object the informer then holds. The watch's decoder takes the object a
// write stored from the writer instead of decoding the echo (see
// autoscaler/source's echoes): that object must be the one kube-apiserver
// stored, as a GET reads it, and every echo must be taken (read after its
// write's answer, whether it came before it or after).
func TestStatusWriteEchoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj := object(t, `{"metadata":{"name":"echo","labels":{"app":"web"},
		"annotations":{"note":"kept","kubectl.kubernetes.io/last-applied-configuration":"{}"}},"spec":{
		"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5,
		"metrics":[{"type":"Pods","pods":{"metric":{"name":"rps"},"target":{"type":"AverageValue","averageValue":"10"}}}]}}`)
	if _, err := client(t).Create(ctx, obj, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	src, clients := startCRDSource(ctx, t, rest.CopyConfig(env.h.Admin))
	// cachedAfter waits until the informer holds a version other than
	// version, and returns it.
	cachedAfter := func(version string) *v1alpha1.HorizontalAutoscaler {
		t.Helper()
		var got *v1alpha1.HorizontalAutoscaler
		if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			o, err := src.Get("crd", "echo")
			if err != nil {
				return false, nil
			}
			got = o.Runtime().(*v1alpha1.HorizontalAutoscaler)
			return got.ResourceVersion != version, nil
		}); err != nil {
			t.Fatalf("the informer never held crd/echo after version %q: %v", version, err)
		}
		return got
	}
	const writes = 20
	cached := cachedAfter("")
	for i := range writes {
		o := source.ObjectOfHA(cached.DeepCopy())
		now := metav1.NewTime(time.Now()) // nanoseconds, which JSON drops
		q := resource.MustParse(fmt.Sprintf("%dm", 9500+i))
		st := o.HPAStatus()
		st.ObservedGeneration, st.LastScaleTime = ptr.To[int64](1), &now
		st.CurrentReplicas, st.DesiredReplicas = 2, int32(2+i%3)
		st.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: &q}}}}
		st.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: "True", LastTransitionTime: now, Reason: "ReadyForNewScale", Message: "recommended size matches current size"},
			{Type: autoscalingv2.ScalingActive, Status: "True", LastTransitionTime: now, Reason: "ValidMetricFound", Message: `the HPA was able to compute a replica count from pods metric rps & "more" <here>`},
		}
		o.SetTidalStatus(&v1alpha1.TidalStatus{Reference: "Deployment/web", Targets: "rps: 9500m/10", History: fmt.Sprintf("r=%d@1795262400", i),
			Decision: &v1alpha1.Decision{CurrentReplicas: 2, ProposedReplicas: 2, DesiredReplicas: 2, StabilizedReplicas: ptr.To[int32](2)}})
		if err := src.UpdateStatus(ctx, o); err != nil {
			t.Fatal(err)
		}
		cached = cachedAfter(cached.ResourceVersion)
		u, err := client(t).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		stored := &v1alpha1.HorizontalAutoscaler{}
		if err := json.Unmarshal(data, stored); err != nil {
			t.Fatal(err)
		}
		// What the informer keeps of it: no kind, managed fields or
		// last applied configuration.
		stored.TypeMeta, stored.ManagedFields = metav1.TypeMeta{}, nil
		delete(stored.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
		if stored.ResourceVersion != cached.ResourceVersion {
			t.Fatalf("write %d: the informer holds version %s, a GET read %s", i, cached.ResourceVersion, stored.ResourceVersion)
		}
		wantJSON, _ := json.Marshal(stored)
		gotJSON, _ := json.Marshal(cached)
		if !apiequality.Semantic.DeepEqual(cached, stored) || !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("write %d: the informer holds\n%s\nkube-apiserver stored\n%s", i, gotJSON, wantJSON)
		}
	}
	// Each echo was read after its write's answer, whichever came first.
	if reused := clients.EchoesReused(); reused != writes {
		t.Errorf("%d of %d echoes taken from the writer, the rest decoded; want all", reused, writes)
	}
}
