package crd

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

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
// answers with the object's metadata alone, which the writer discards (the
// informer delivers the object), and that a refused write still gives
// the apiserver's Status error.
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
		clients, err := source.NewHorizontalAutoscalerClients(cfg, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		src := source.CRDSourceIn(clients, "crd", 0)
		go src.Informer().RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), src.Informer().HasSynced) {
			t.Fatal("the informer did not sync")
		}
		var cached source.Object
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
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
