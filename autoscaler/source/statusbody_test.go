package source

import (
	"bytes"
	"encoding/json"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

func statusBodyOf(ha *v1alpha1.HorizontalAutoscaler) haStatusBody {
	return haStatusBody{TypeMeta: haTypeMeta, ObjectMeta: ha.ObjectMeta, Status: ha.Status}
}

// checkStatusBody fails unless encodeStatusBody gives json.Marshal's bytes.
func checkStatusBody(t *testing.T, body haStatusBody) {
	t.Helper()
	want, wantErr := json.Marshal(body)
	got, err := encodeStatusBody(body)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, encoding/json's %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%s\nencoding/json:\n%s", got, want)
	}
}

// TestEncodeStatusBodyMatchesEncodingJSON: the status write's body is the
// one encoding/json would send, for the objects a write carries and for
// random ones (every field of the types filled at random, so that a field
// the encoder leaves out fails here).
func TestEncodeStatusBodyMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		ha   func() *v1alpha1.HorizontalAutoscaler
	}{
		{"a write after a reconcile", func() *v1alpha1.HorizontalAutoscaler {
			ha := wireHA(3)
			ha.ManagedFields = nil
			return ha
		}},
		{"with managed fields", func() *v1alpha1.HorizontalAutoscaler { return wireHA(7) }},
		{"empty", func() *v1alpha1.HorizontalAutoscaler { return &v1alpha1.HorizontalAutoscaler{} }},
		{"no metrics yet, an empty list", func() *v1alpha1.HorizontalAutoscaler {
			ha := wireHA(1)
			ha.Status.CurrentMetrics = []autoscalingv2.MetricStatus{}
			return ha
		}},
		{"strings encoding/json escapes", func() *v1alpha1.HorizontalAutoscaler {
			ha := wireHA(2)
			ha.Labels = map[string]string{"b": "x<y", "a": "tab\there", "é": "\u2028", "q": `"quoted" \ back`}
			ha.Annotations = map[string]string{"bad": "\xff\xfe", "amp": "a&b", "del": "\x7f"}
			ha.Status.Conditions[0].Message = "failed: <nil> & \"more\"\n"
			ha.Status.Tidal.History = "r=5@1+15x8;e=\x00"
			return ha
		}},
		{"every metric type, adjustments, shadow and times", func() *v1alpha1.HorizontalAutoscaler {
			ha := wireHA(4)
			now := metav1.Unix(1795262400, 0)
			q := resource.MustParse("1.5Gi")
			ha.DeletionTimestamp, ha.DeletionGracePeriodSeconds = &now, ptr.To[int64](30)
			ha.Finalizers = []string{"example.com/hold"}
			ha.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u"}}
			ha.Status.LastScaleTime = &now
			ha.Status.Conditions[1].ObservedGeneration = ptr.To[int64](2)
			ha.Status.Conditions = append(ha.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: "ScalingLimited", Status: "False"})
			ha.Status.CurrentMetrics = append(ha.Status.CurrentMetrics,
				autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: &q}}},
				autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "depth"}, Current: autoscalingv2.MetricValueStatus{Value: &q}}},
				autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Current: autoscalingv2.MetricValueStatus{Value: &q}}},
				autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: "memory", Container: "app", Current: autoscalingv2.MetricValueStatus{AverageValue: &q}}})
			d := ha.Status.Tidal.Decision
			d.Adjustments = []v1alpha1.Adjustment{{Reason: "ScaleDownStabilized", From: 3, To: 5, Message: "recent recommendations were higher than current one"}, {Reason: "TooManyReplicas", From: 5, To: 4}}
			d.Proposals = append(d.Proposals, v1alpha1.MetricProposal{Name: "pods metric rps", Error: "no metrics", WithinTolerance: true})
			ha.Status.Tidal.MetricFailures = 2
			ha.Status.Tidal.Shadow = &v1alpha1.ShadowComparison{HorizontalPodAutoscaler: "web", DesiredReplicas: 5, HPADesiredReplicas: 4}
			return ha
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkStatusBody(t, statusBodyOf(tc.ha())) })
	}
	t.Run("random", func(t *testing.T) {
		for seed := int64(0); seed < 500; seed++ {
			// Random strings are mostly escaped; ASCII ones take the
			// encoder's own path.
			for _, f := range []*randfill.Filler{newHAFiller(seed), newHAFiller(seed).Funcs(asciiString)} {
				ha := randomHA(f)
				ha.ObjectMeta.ManagedFields = nil
				checkStatusBody(t, statusBodyOf(ha))
				ha = randomHA(f)
				checkStatusBody(t, statusBodyOf(ha))
			}
		}
	})
}

// asciiString fills a string with printable ASCII that encoding/json
// copies as it is.
func asciiString(s *string, c randfill.Continue) {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./: ="
	b := make([]byte, c.Intn(20))
	for i := range b {
		b[i] = letters[c.Intn(len(letters))]
	}
	*s = string(b)
}

// BenchmarkStatusBodyEncode: the status write's body of a reconcile, with
// encodeStatusBody and with encoding/json.
func BenchmarkStatusBodyEncode(b *testing.B) {
	ha := wireHA(3)
	ha.ManagedFields = nil
	body := statusBodyOf(ha)
	for _, bc := range []struct {
		name   string
		encode func(haStatusBody) ([]byte, error)
	}{
		{"encodeStatusBody", encodeStatusBody},
		{"encoding-json", func(b haStatusBody) ([]byte, error) { return json.Marshal(b) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.encode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
