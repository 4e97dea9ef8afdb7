package source

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/internal/raceflag"
)

// jsonSerializer is the client's JSON serializer without haDecoder: the
// reference haDecoder must agree with.
func jsonSerializer() runtime.Serializer { return newJSONSerializer() }

// watchedHA is a HorizontalAutoscaler as a watch event carries it: three
// metrics in its status, no managed fields (the client cuts them out).
func watchedHA(tb testing.TB) []byte {
	tb.Helper()
	ha := wireHA(3)
	ha.ManagedFields = nil
	data, err := json.Marshal(ha)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// decodeBoth decodes data as the client decodes a watched object (no
// object to decode into, the kind cleared after), with haDecoder and with
// the JSON serializer alone.
func decodeBoth(data []byte) (fast, ref runtime.Object, fastErr, refErr error) {
	fast, fastErr = runtime.Decode(runtime.WithoutVersionDecoder{Decoder: newHAJSON(nil, nil).info.Serializer}, data)
	ref, refErr = runtime.Decode(runtime.WithoutVersionDecoder{Decoder: jsonSerializer()}, data)
	return
}

// randomHA fills a HorizontalAutoscaler at random, with the values the
// apiserver could send: quantities and times as they serialize, managed
// fields as valid JSON.
func randomHA(f *randfill.Filler) *v1alpha1.HorizontalAutoscaler {
	ha := &v1alpha1.HorizontalAutoscaler{}
	f.Fill(ha)
	ha.APIVersion, ha.Kind = v1alpha1.SchemeGroupVersion.String(), v1alpha1.Kind
	return ha
}

func newHAFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40)-1<<39, resource.Format([]string{"DecimalSI", "BinarySI", "DecimalExponent"}[c.Intn(3)]))
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Unix(c.Int63n(4e9), 0)
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			f.SetRawString(`{"f:status":{".":{}}}`)
		},
	)
}

// TestHADecoderMatchesJSONSerializer decodes random HorizontalAutoscalers,
// encoded as JSON, with haDecoder and with the JSON serializer it
// replaces on the watch: the objects must be identical.
func TestHADecoderMatchesJSONSerializer(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		want := randomHA(newHAFiller(seed))
		data, err := json.Marshal(want)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		fast, ref, fastErr, refErr := decodeBoth(data)
		if fastErr != nil || refErr != nil {
			t.Fatalf("seed %d: errors %v and %v decoding %s", seed, fastErr, refErr, data)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("seed %d: haDecoder decoded\n%#v\nthe JSON serializer\n%#v\nfrom %s", seed, fast, ref, data)
		}
	}
}

// TestHADecoderEdges names the documents where encoding/json/v2 and the
// JSON serializer could differ: the answer, or the error, must be the
// JSON serializer's.
func TestHADecoderEdges(t *testing.T) {
	ha := `"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler"`
	for _, tc := range []struct {
		name, doc string
		wantErr   bool
	}{
		{name: "plain", doc: `{` + ha + `,"metadata":{"name":"web","resourceVersion":"7"},"spec":{"maxReplicas":4}}`},
		{name: "duplicate names, the last wins", doc: `{` + ha + `,"spec":{"maxReplicas":4,"maxReplicas":5}}`},
		{name: "a name matching only case-insensitively is ignored", doc: `{` + ha + `,"spec":{"MaxReplicas":4,"maxreplicas":6}}`},
		{name: "unknown members are ignored", doc: `{` + ha + `,"spec":{"maxReplicas":4,"surprise":[1,{"a":null}]}}`},
		{name: "null resets nothing", doc: `{` + ha + `,"metadata":{"creationTimestamp":null,"labels":null},"spec":{"minReplicas":null,"maxReplicas":null,"metrics":null},"status":null}`},
		{name: "invalid UTF-8 in a string", doc: `{` + ha + `,"metadata":{"name":"w` + "\xff" + `"}}`},
		{name: "a quantity and a time", doc: `{` + ha + `,"metadata":{"creationTimestamp":"2026-11-27T10:00:00Z"},"status":{"currentMetrics":[{"type":"Resource","resource":{"name":"cpu","current":{"averageValue":"1500m"}}}]}}`},
		{name: "a value of the wrong type", doc: `{` + ha + `,"spec":{"maxReplicas":"four"}}`, wantErr: true},
		{name: "a number out of range", doc: `{` + ha + `,"spec":{"maxReplicas":4294967296}}`, wantErr: true},
		{name: "a bad quantity", doc: `{` + ha + `,"status":{"currentMetrics":[{"type":"Resource","resource":{"name":"cpu","current":{"averageValue":"lots"}}}]}}`, wantErr: true},
		{name: "truncated", doc: `{` + ha + `,"spec":{"maxReplicas":4}`, wantErr: true},
		{name: "another kind", doc: `{"apiVersion":"v1","kind":"Status","status":"Failure","code":410}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, ref, fastErr, refErr := decodeBoth([]byte(tc.doc))
			if (refErr != nil) != tc.wantErr {
				t.Fatalf("the JSON serializer's error %v, want an error %v", refErr, tc.wantErr)
			}
			if (fastErr == nil) != (refErr == nil) || (fastErr != nil && fastErr.Error() != refErr.Error()) {
				t.Fatalf("errors differ: haDecoder %v, the JSON serializer %v", fastErr, refErr)
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Fatalf("haDecoder decoded\n%#v\nthe JSON serializer\n%#v", fast, ref)
			}
		})
	}
}

// TestHADecoderDecodesIntoAsBefore: decoding into an object (as a list's
// items are not, but Into(obj) is) is the JSON serializer's, merging into
// what the object holds.
func TestHADecoderDecodesIntoAsBefore(t *testing.T) {
	doc := []byte(`{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","spec":{"maxReplicas":4}}`)
	into := &v1alpha1.HorizontalAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if _, _, err := newHAJSON(nil, nil).info.Serializer.Decode(doc, nil, into); err != nil {
		t.Fatal(err)
	}
	if into.Name != "kept" || into.Spec.MaxReplicas != 4 {
		t.Errorf("decoded into %+v", into.ObjectMeta)
	}
}

// TestHADecoderAllocatesLess is what haDecoder is for: decoding the
// controller's own status write coming back allocates at most 3/4 of what
// the JSON serializer does (about half, measured; allocations are counted,
// not timed).
func TestHADecoderAllocatesLess(t *testing.T) {
	if raceflag.Enabled {
		// Under it haDecoder's count varies from run to run (43 to 55
		// against the serializer's 63 or 64 in 200 runs with go1.27.3;
		// 27 against 62 in every run without it); make test runs this
		// test once more without the race detector (NORACE_RUN).
		t.Skip("the race detector's runtime allocates differently")
	}
	data := watchedHA(t)
	count := func(d runtime.Decoder) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := runtime.Decode(runtime.WithoutVersionDecoder{Decoder: d}, data); err != nil {
				t.Fatal(err)
			}
		})
	}
	fast, ref := count(newHAJSON(nil, nil).info.Serializer), count(jsonSerializer())
	if fast > ref*3/4 {
		t.Errorf("haDecoder allocates %.0f times a decode, the JSON serializer %.0f", fast, ref)
	}
}

// BenchmarkHADecode decodes a watched HorizontalAutoscaler with haDecoder
// and with the JSON serializer alone (compare with benchstat -col /name).
func BenchmarkHADecode(b *testing.B) {
	data := watchedHA(b)
	for _, tc := range []struct {
		name string
		d    runtime.Decoder
	}{{"jsonserializer", jsonSerializer()}, {"hadecoder", newHAJSON(nil, nil).info.Serializer}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runtime.Decode(runtime.WithoutVersionDecoder{Decoder: tc.d}, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
