package source

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// echoes holds, for each HorizontalAutoscaler whose status this controller
// writes, the object the write stored, until the watch sends it back: the
// watch's decoder then takes it instead of decoding the object (take).
// When usage moves, every reconcile writes a status and every write comes
// back through the watch; decoding those echoes was a tenth of crd mode's
// CPU at 1,000 autoscalers (docs/performance.md).
//
// The stored object is known without reading it. A status write is
// conditioned on the resourceVersion of the object it was computed from,
// and kube-apiserver's status strategy keeps everything of the stored
// object but the status: so the stored object is the cached one at that
// version, with the status sent, the resourceVersion the write answered
// with and new managed fields (which the informer drops). The status
// comes back as sent: the CRD's status schema has no defaults, and it
// prunes nothing the types hold (the v1alpha1 package's
// TestStatusSchemaKeepsTheStatus); only a mutating admission webhook on
// horizontalautoscalers/status could change it, which docs/crd.md asks not
// to register. The resourceVersion names one state of one object, so an
// event carrying it is the echo, whoever else writes the object
// meanwhile.
//
// The echo may come before the write's answer is read: the event of an
// object with a write in flight is then kept undecoded (a deferredHA, as
// a sharded replica keeps the objects of other replicas), and its first
// read takes the stored object if the write, done by then, stored that
// version (resolve).
type echoes struct {
	mu     sync.Mutex
	writes map[echoKey]*write
	// reused counts the echoes taken instead of decoded.
	reused atomic.Uint64
}

type echoKey struct{ namespace, name string }

// write is a status write of this controller, in flight until done;
// stored is what it stored (nil: it failed, or what it stored is not
// known), handed out once. Its fields are guarded by echoes.mu.
type write struct {
	done   bool
	stored *v1alpha1.HorizontalAutoscaler
}

func newEchoes() *echoes { return &echoes{writes: map[echoKey]*write{}} }

// begin records a status write of namespace/name about to be sent, in
// place of any earlier one; finish it.
func (e *echoes) begin(namespace, name string) *write {
	w := &write{}
	e.mu.Lock()
	e.writes[echoKey{namespace, name}] = w
	e.mu.Unlock()
	return w
}

// finish records w done, and what it stored (nil: see write).
func (e *echoes) finish(w *write, stored *v1alpha1.HorizontalAutoscaler) {
	e.mu.Lock()
	w.done, w.stored = true, stored
	e.mu.Unlock()
}

// take is for the watch's event of namespace/name at resourceVersion: the
// object a write stored at that version, or the write still in flight
// (pending; resolve it when the event's object is read), or neither. It
// forgets the write of namespace/name either way: the events of one object
// come in the order of their versions, and the first after the write's is
// its echo, or that of another writer's change (then the write conflicts).
func (e *echoes) take(namespace, name, resourceVersion string) (obj *v1alpha1.HorizontalAutoscaler, pending *write) {
	if e == nil {
		return nil, nil
	}
	k := echoKey{namespace, name}
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.writes[k]
	if !ok {
		return nil, nil
	}
	delete(e.writes, k)
	if !w.done {
		return nil, w
	}
	return e.handOut(w, resourceVersion), nil
}

// resolve returns what w stored, if it is done and stored
// resourceVersion; ok is false otherwise (the event's object must be
// decoded).
func (e *echoes) resolve(w *write, resourceVersion string) (obj *v1alpha1.HorizontalAutoscaler, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	obj = e.handOut(w, resourceVersion)
	return obj, obj != nil
}

// handOut returns w's stored object, once, if it is at resourceVersion;
// call it with e.mu held.
func (e *echoes) handOut(w *write, resourceVersion string) *v1alpha1.HorizontalAutoscaler {
	obj := w.stored
	if obj == nil || resourceVersion == "" || obj.ResourceVersion != resourceVersion {
		return nil
	}
	w.stored = nil
	e.reused.Add(1)
	return obj
}

// storedObject is what a status write of status stored for cached, at
// resourceVersion, as the watch's decoder would give it; ok is false where
// that cannot be known without decoding it. body is the write's body:
// where the encoding replaced invalid UTF-8 in a string with U+FFFD
// (hasReplacement), what comes back differs from what was sent.
//
// cached is shared, not copied: informer objects are read-only.
func storedObject(cached *v1alpha1.HorizontalAutoscaler, status *v1alpha1.HorizontalAutoscalerStatus, body []byte, resourceVersion string) (*v1alpha1.HorizontalAutoscaler, bool) {
	if resourceVersion == "" || hasReplacement(body) {
		return nil, false
	}
	obj := &v1alpha1.HorizontalAutoscaler{TypeMeta: haTypeMeta, ObjectMeta: cached.ObjectMeta, Spec: cached.Spec}
	obj.ResourceVersion = resourceVersion
	obj.ManagedFields = nil
	status.DeepCopyInto(&obj.Status)
	asDecoded(&obj.Status)
	return obj, true
}

// hasReplacement reports whether a JSON body may hold U+FFFD, which
// encoding/json writes for invalid UTF-8 in a string: as the escape
// "\ufffd" up to Go 1.26, as the character itself from Go 1.27. A
// U+FFFD that was in the string all along is a false alarm, which only
// costs the echo's decode.
func hasReplacement(body []byte) bool {
	return bytes.Contains(body, []byte(`\ufffd`)) || bytes.ContainsRune(body, utf8.RuneError)
}

// asDecoded makes status what decoding its JSON gives: the times JSON
// holds to the second, in local time (metav1.Time's encoding and
// decoding). Every other field the status holds comes back as it was:
// integers, strings (valid UTF-8), and quantities, equal in value and
// encoded alike (TestStoredObjectIsTheEcho).
func asDecoded(status *v1alpha1.HorizontalAutoscalerStatus) {
	if status.LastScaleTime != nil {
		*status.LastScaleTime = toTheSecond(*status.LastScaleTime)
	}
	for i := range status.Conditions {
		status.Conditions[i].LastTransitionTime = toTheSecond(status.Conditions[i].LastTransitionTime)
	}
}

// toTheSecond is t as encoding and decoding it gives it; the zero time is
// encoded as null and stays zero.
func toTheSecond(t metav1.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(t.Unix(), 0).Local())
}
