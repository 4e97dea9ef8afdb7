package source

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// encodeStatusBody is json.Marshal(body), byte for byte, written field by
// field. crd mode encodes one of these for every reconcile whose metrics
// moved (custom resources have no protobuf), and encoding/json's walk of
// the types by reflection was a tenth of the controller's CPU there
// (docs/performance.md). The fields a status write usually holds are
// appended directly; the rest (owner references, managed fields, metric
// types other than Resource, tidal's shadow comparison, strings that need
// escaping) go through encoding/json, so its answer is the one given.
// TestEncodeStatusBodyMatchesEncodingJSON compares the two on random
// objects: a field added to the types and not here fails it.
func encodeStatusBody(body haStatusBody) ([]byte, error) {
	e := encoder{b: make([]byte, 0, 2048)}
	o := e.object()
	o.str("kind", body.Kind)
	o.str("apiVersion", body.APIVersion)
	o.key("metadata")
	e.objectMeta(&body.ObjectMeta)
	o.key("status")
	e.haStatus(&body.Status)
	e.end()
	return e.b, e.err
}

// encoder appends JSON to b; err is the first error of encoding/json.
type encoder struct {
	b   []byte
	err error
}

// members writes one JSON object's members, with a comma between them.
type members struct {
	e    *encoder
	some bool
}

func (e *encoder) object() members {
	e.b = append(e.b, '{')
	return members{e: e}
}

func (e *encoder) end() { e.b = append(e.b, '}') }

// key starts a member; name needs no escaping.
func (m *members) key(name string) {
	// One store to m.e.b a call: each is a write barrier while the
	// garbage collector marks.
	b := m.e.b
	if m.some {
		b = append(b, ',')
	}
	m.some = true
	b = append(b, '"')
	b = append(b, name...)
	m.e.b = append(b, '"', ':')
}

// str is a string member with omitempty.
func (m *members) str(name, s string) {
	if s != "" {
		m.key(name)
		m.e.str(s)
	}
}

// int is an integer member with omitempty.
func (m *members) int(name string, n int64) {
	if n != 0 {
		m.key(name)
		m.e.int(n)
	}
}

// strings is a map member with omitempty.
func (m *members) strings(name string, v map[string]string) {
	if len(v) > 0 {
		m.key(name)
		m.e.strings(v)
	}
}

// json is a member that encoding/json encodes, when present.
func (m *members) json(name string, present bool, v any) {
	if present {
		m.key(name)
		m.e.json(v)
	}
}

// time is an optional time member: absent when nil.
func (m *members) time(name string, t *metav1.Time) {
	if t != nil {
		m.key(name)
		m.e.time(*t)
	}
}

// optInt is an optional integer member: absent when nil.
func optInt[T int32 | int64](m *members, name string, n *T) {
	if n != nil {
		m.key(name)
		m.e.int(int64(*n))
	}
}

// optList is a list member with omitempty: absent when empty.
func optList[T any](m *members, name string, items []T, each func(*T)) {
	if len(items) > 0 {
		m.key(name)
		list(m.e, items, each)
	}
}

// list appends items as a JSON array, each with each.
func list[T any](e *encoder, items []T, each func(*T)) {
	e.b = append(e.b, '[')
	for i := range items {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		each(&items[i])
	}
	e.b = append(e.b, ']')
}

// str appends s quoted. A string of printable ASCII that encoding/json
// would not escape (it escapes '<', '>' and '&' for HTML too) is copied;
// any other goes through encoding/json.
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.json(s)
			return
		}
	}
	b := append(e.b, '"')
	b = append(b, s...)
	e.b = append(b, '"')
}

func (e *encoder) int(n int64) { e.b = strconv.AppendInt(e.b, n, 10) }

// time appends t as metav1.Time.MarshalJSON does: RFC 3339 in UTC, null
// when zero.
func (e *encoder) time(t metav1.Time) {
	if t.IsZero() {
		e.b = append(e.b, "null"...)
		return
	}
	b := append(e.b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	e.b = append(b, '"')
}

func (e *encoder) quantity(q *resource.Quantity) {
	out, err := q.MarshalJSON()
	if err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, out...)
}

// json appends encoding/json's encoding of v.
func (e *encoder) json(v any) {
	out, err := json.Marshal(v)
	if err != nil {
		e.fail(err)
		return
	}
	e.b = append(e.b, out...)
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// strings appends a map of strings, its keys sorted as encoding/json sorts
// them.
func (e *encoder) strings(m map[string]string) {
	o := e.object()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if o.some {
			e.b = append(e.b, ',')
		}
		o.some = true
		e.str(k)
		e.b = append(e.b, ':')
		e.str(m[k])
	}
	e.end()
}

func (e *encoder) objectMeta(m *metav1.ObjectMeta) {
	o := e.object()
	o.str("name", m.Name)
	o.str("generateName", m.GenerateName)
	o.str("namespace", m.Namespace)
	//lint:ignore SA1019 encoding/json writes it, and the body is its bytes
	o.str("selfLink", m.SelfLink)
	o.str("uid", string(m.UID))
	o.str("resourceVersion", m.ResourceVersion)
	o.int("generation", m.Generation)
	if !m.CreationTimestamp.IsZero() { // omitzero
		o.key("creationTimestamp")
		e.time(m.CreationTimestamp)
	}
	o.time("deletionTimestamp", m.DeletionTimestamp)
	optInt(&o, "deletionGracePeriodSeconds", m.DeletionGracePeriodSeconds)
	o.strings("labels", m.Labels)
	o.strings("annotations", m.Annotations)
	o.json("ownerReferences", len(m.OwnerReferences) > 0, m.OwnerReferences)
	o.json("finalizers", len(m.Finalizers) > 0, m.Finalizers)
	o.json("managedFields", len(m.ManagedFields) > 0, m.ManagedFields)
	e.end()
}

func (e *encoder) haStatus(s *v1alpha1.HorizontalAutoscalerStatus) {
	o := e.object()
	optInt(&o, "observedGeneration", s.ObservedGeneration)
	o.time("lastScaleTime", s.LastScaleTime)
	o.int("currentReplicas", int64(s.CurrentReplicas))
	o.key("desiredReplicas")
	e.int(int64(s.DesiredReplicas))
	o.key("currentMetrics") // no omitempty: nil is null
	if s.CurrentMetrics == nil {
		e.b = append(e.b, "null"...)
	} else {
		list(e, s.CurrentMetrics, e.metricStatus)
	}
	optList(&o, "conditions", s.Conditions, e.condition)
	if s.Tidal != nil {
		o.key("tidal")
		e.tidalStatus(s.Tidal)
	}
	e.end()
}

func (e *encoder) metricStatus(m *autoscalingv2.MetricStatus) {
	o := e.object()
	o.key("type")
	e.str(string(m.Type))
	o.json("object", m.Object != nil, m.Object)
	o.json("pods", m.Pods != nil, m.Pods)
	if m.Resource != nil {
		o.key("resource")
		r := e.object()
		r.key("name")
		e.str(string(m.Resource.Name))
		r.key("current")
		e.metricValue(&m.Resource.Current)
		e.end()
	}
	o.json("containerResource", m.ContainerResource != nil, m.ContainerResource)
	o.json("external", m.External != nil, m.External)
	e.end()
}

func (e *encoder) metricValue(v *autoscalingv2.MetricValueStatus) {
	o := e.object()
	if v.Value != nil {
		o.key("value")
		e.quantity(v.Value)
	}
	if v.AverageValue != nil {
		o.key("averageValue")
		e.quantity(v.AverageValue)
	}
	optInt(&o, "averageUtilization", v.AverageUtilization)
	e.end()
}

func (e *encoder) condition(c *autoscalingv2.HorizontalPodAutoscalerCondition) {
	o := e.object()
	o.key("type")
	e.str(string(c.Type))
	o.key("status")
	e.str(string(c.Status))
	o.key("lastTransitionTime") // omitempty keeps a struct: zero is null
	e.time(c.LastTransitionTime)
	o.str("reason", c.Reason)
	o.str("message", c.Message)
	optInt(&o, "observedGeneration", c.ObservedGeneration)
	e.end()
}

func (e *encoder) tidalStatus(t *v1alpha1.TidalStatus) {
	o := e.object()
	o.str("reference", t.Reference)
	o.str("targets", t.Targets)
	if t.Decision != nil {
		o.key("decision")
		e.decision(t.Decision)
	}
	o.str("history", t.History)
	o.int("metricFailures", int64(t.MetricFailures))
	o.json("shadow", t.Shadow != nil, t.Shadow)
	e.end()
}

func (e *encoder) decision(d *v1alpha1.Decision) {
	o := e.object()
	o.key("currentReplicas")
	e.int(int64(d.CurrentReplicas))
	optList(&o, "proposals", d.Proposals, func(p *v1alpha1.MetricProposal) {
		po := e.object()
		po.str("name", p.Name)
		optInt(&po, "replicas", p.Replicas)
		po.str("error", p.Error)
		if p.WithinTolerance {
			po.key("withinTolerance")
			e.b = append(e.b, "true"...)
		}
		e.end()
	})
	o.str("winner", d.Winner)
	o.key("proposedReplicas")
	e.int(int64(d.ProposedReplicas))
	optInt(&o, "stabilizedReplicas", d.StabilizedReplicas)
	o.key("desiredReplicas")
	e.int(int64(d.DesiredReplicas))
	optList(&o, "adjustments", d.Adjustments, func(a *v1alpha1.Adjustment) {
		ao := e.object()
		ao.key("reason")
		e.str(a.Reason)
		ao.key("from")
		e.int(int64(a.From))
		ao.key("to")
		e.int(int64(a.To))
		ao.str("message", a.Message)
		e.end()
	})
	e.end()
}
