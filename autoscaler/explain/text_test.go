package explain

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// webText is the fixture explained; also docs/crd.md's sample (TestDocSample).
const webText = `HorizontalAutoscaler shop/web
Target:    Deployment/web, 2 to 20 replicas
Replicas:  current 5, desired 9
Scaled:    2026-05-04T10:30:00Z

Metrics (decided at 5 replicas):
  METRIC                                            CURRENT      TARGET    PROPOSES
  cpu resource utilization (percentage of request)  113% (565m)  60%       10, chosen
  pods metric rps                                   33900m       80        3
  external metric queue_length(nil)                 <unknown>    30 (avg)  failed: unable to get external metric shop/queue_length/nil: unable to fetch metrics from external metrics API: the server could not find the requested resource

Result: proposed 10 (cpu resource utilization (percentage of request)), stabilized 10, desired 9
Limited by:
  ScaleUpLimit  10→9: the desired replica count is increasing faster than the maximum scale rate

Conditions:
  TYPE            STATUS  REASON            MESSAGE
  AbleToScale     True    SucceededRescale  the HPA controller was able to update the target scale to 9
  ScalingActive   True    ValidMetricFound  the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)
  ScalingLimited  True    ScaleUpLimit      the desired replica count is increasing faster than the maximum scale rate
  ScaledToZero    False   NotScaledToZero   the HPA controller did not scale the workload to zero
`

const webHPAText = `HorizontalPodAutoscaler shop/web
Target:    Deployment/web, 2 to 20 replicas
Replicas:  current 5, desired 9
Scaled:    2026-05-04T10:30:00Z

Metrics:
  METRIC                                            CURRENT      TARGET
  cpu resource utilization (percentage of request)  113% (565m)  60%
  pods metric rps                                   33900m       80
  external metric queue_length(nil)                 <unknown>    30 (avg)

Result: not available: no autoscaling.tidal.dev/decision annotation (tidal in native mode writes it with the status; kube-controller-manager does not): shown are the HPA's status and conditions
Limited by:
  DryRun  dry run, /scale is not written: would keep 5 replicas

Conditions:
  TYPE            STATUS  REASON            MESSAGE
  AbleToScale     True    SucceededRescale  the HPA controller was able to update the target scale to 9
  ScalingActive   True    ValidMetricFound  the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)
  ScalingLimited  True    ScaleUpLimit      the desired replica count is increasing faster than the maximum scale rate
  ScaledToZero    False   NotScaledToZero   the HPA controller did not scale the workload to zero
  DryRun          True    WouldNotScale     dry run, /scale is not written: would keep 5 replicas
`

func TestText(t *testing.T) {
	ha := web()
	haReport, err := OfHorizontalAutoscaler(ha)
	if err != nil {
		t.Fatal(err)
	}
	hpa := webHPA()
	hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: "DryRun", Status: corev1.ConditionTrue, Reason: "WouldNotScale", Message: "dry run, /scale is not written: would keep 5 replicas"})
	hpaReport, err := OfHorizontalPodAutoscaler(hpa)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := haReport
	unchanged.Limits = nil
	unchanged.Metrics = nil
	unchanged.Conditions = nil
	unchanged.LastScaleTime = nil
	allFailed := unchanged
	allFailed.Decision = &v1alpha1.Decision{CurrentReplicas: 5, ProposedReplicas: -1, DesiredReplicas: 5}

	tests := []struct {
		name   string
		report Report
		want   string // the whole text, or lines it must contain
		whole  bool
	}{
		{name: "HorizontalAutoscaler", report: haReport, want: webText, whole: true},
		{name: "native HPA", report: hpaReport, want: webHPAText, whole: true},
		{name: "nothing limited, no metrics, no conditions", report: unchanged,
			want: "Metrics (decided at 5 replicas):\n  <none>\n\nResult: proposed 10 (" + cpuName + "), stabilized 10, desired 9\n" +
				"Limited by: nothing: the chosen proposal is the desired count\n\nConditions: <none>\n"},
		{name: "every metric failed: no limits section", report: allFailed,
			want: "Result: no metric produced a proposal; desired 5\n\nConditions:"},
		{name: "a message with a newline stays on its row", report: Report{Kind: KindHA, Namespace: "a", Name: "b", Conditions: []Condition{{Type: "X", Status: "True", Reason: "R", Message: "one\ntwo"}}},
			want: "  X     True    R       one two\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Text(tt.report)
			if tt.whole && got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if !tt.whole && !strings.Contains(got, tt.want) {
				t.Errorf("got:\n%s\nwant it to contain:\n%s", got, tt.want)
			}
		})
	}
}

// TestEncode checks that yaml and json hold the whole report.
func TestEncode(t *testing.T) {
	r, err := OfHorizontalAutoscaler(web())
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := Encode(&b, r, format); err != nil {
				t.Fatal(err)
			}
			if format == "json" && !json.Valid(b.Bytes()) {
				t.Fatalf("not JSON:\n%s", b.String())
			}
			var back Report
			if err := yaml.UnmarshalStrict(b.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(Text(back), Text(r)) || !reflect.DeepEqual(back.Decision, r.Decision) {
				t.Errorf("decoded report differs:\n%s", b.String())
			}
		})
	}
	if err := Encode(&bytes.Buffer{}, r, "wide"); err == nil || !strings.Contains(err.Error(), "-o/--output=wide") {
		t.Errorf("Encode wide: %v", err)
	}
}
