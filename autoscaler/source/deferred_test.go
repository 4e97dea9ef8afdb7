package source

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/autoscaler/clustercache"
)

// deferAll defers every object; deferNone none.
func deferAll(string, string) bool  { return true }
func deferNone(string, string) bool { return false }

// decodeDeferring decodes data as the watch decodes an object, with the
// decoder deferring what deferred names.
func decodeDeferring(data []byte, deferred Deferred) (runtime.Object, error) {
	return runtime.Decode(runtime.WithoutVersionDecoder{Decoder: newHAJSON(deferred, nil).info.Serializer}, data)
}

// TestDeferredHAReadsAsDecoded: a deferred object, once read through Get,
// is the object the decoder would have decoded at once (random objects);
// one the predicate leaves alone is decoded at once.
func TestDeferredHAReadsAsDecoded(t *testing.T) {
	deferredN := 0
	for seed := int64(0); seed < 300; seed++ {
		ha := randomHA(newHAFiller(seed))
		if seed%3 != 0 { // random names are mostly not plain ASCII
			ha.Namespace, ha.Name = "shop", fmt.Sprintf("web-%d", seed)
		}
		data, err := json.Marshal(ha)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want, err := decodeDeferring(data, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if now, err := decodeDeferring(data, deferNone); err != nil || !reflect.DeepEqual(now, want) {
			t.Fatalf("seed %d: not deferred, decoded %#v (%v), want %#v", seed, now, err, want)
		}
		obj, err := decodeDeferring(data, deferAll)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		d, ok := obj.(*deferredHA)
		if !ok {
			// Metadata gives up on names with escapes or non-ASCII.
			if !reflect.DeepEqual(obj, want) {
				t.Fatalf("seed %d: decoded at once as %#v, want %#v", seed, obj, want)
			}
			continue
		}
		deferredN++
		wantHA := want.(*v1alpha1.HorizontalAutoscaler)
		if !reflect.DeepEqual(d.ObjectMeta, wantHA.ObjectMeta) || d.TypeMeta != wantHA.TypeMeta {
			t.Fatalf("seed %d: deferred metadata %#v, want %#v", seed, d.ObjectMeta, wantHA.ObjectMeta)
		}
		got, err := getOne(t, d)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(got, wantHA) {
			t.Fatalf("seed %d: read as\n%#v\nwant\n%#v", seed, got, wantHA)
		}
		if again, _ := getOne(t, d); again != got {
			t.Fatalf("seed %d: decoded twice", seed)
		}
		if c, _ := getOne(t, d.DeepCopyObject()); c == got || !reflect.DeepEqual(c, wantHA) {
			t.Fatalf("seed %d: a deep copy read as %#v (the same object: %v)", seed, c, c == got)
		}
	}
	if deferredN < 200 {
		t.Errorf("%d of 300 objects deferred", deferredN)
	}
}

// getOne reads obj through crdSource.Get, from an informer holding it
// alone.
func getOne(t *testing.T, obj runtime.Object) (*v1alpha1.HorizontalAutoscaler, error) {
	t.Helper()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
	if err := inf.GetIndexer().Add(obj); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	o, err := CRDSourceWith(inf, nil).Get(m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	return o.Runtime().(*v1alpha1.HorizontalAutoscaler), nil
}

// TestDeferredHAKeepsTheTransform: what the informer's transform did to a
// deferred object's metadata (managed fields, the last applied
// configuration dropped) holds for the object Get returns.
func TestDeferredHAKeepsTheTransform(t *testing.T) {
	ha := wireHA(1)
	ha.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "web"}
	data, err := json.Marshal(ha)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeDeferring(data, deferAll)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.(*deferredHA); !ok {
		t.Fatalf("decoded a %T", obj)
	}
	if len(obj.(*deferredHA).ManagedFields) == 0 {
		t.Fatal("the document had no managed fields to drop")
	}
	if _, err := clustercache.CustomResourceTransform(obj); err != nil {
		t.Fatal(err)
	}
	got, err := getOne(t, obj)
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil || !reflect.DeepEqual(got.Annotations, map[string]string{"team": "web"}) {
		t.Errorf("managed fields %v, annotations %v", got.ManagedFields, got.Annotations)
	}
	if got.Status.DesiredReplicas != 5 || got.Spec.MaxReplicas != 10 || got.Status.Tidal == nil {
		t.Errorf("spec %+v, status %+v", got.Spec, got.Status)
	}
}

// TestDeferredHABadObject: an object whose metadata decodes but whose rest
// does not is an error of Get naming it, not of the watch.
func TestDeferredHABadObject(t *testing.T) {
	doc := `{"apiVersion":"autoscaling.tidal.dev/v1alpha1","kind":"HorizontalAutoscaler","metadata":{"name":"web","namespace":"shop"},"spec":{"maxReplicas":"four"}}`
	obj, err := decodeDeferring([]byte(doc), deferAll)
	if err != nil {
		t.Fatal(err)
	}
	_, err = getOne(t, obj)
	if err == nil || !strings.Contains(err.Error(), "HorizontalAutoscaler shop/web") {
		t.Fatalf("error %v, want one naming HorizontalAutoscaler shop/web", err)
	}
}
