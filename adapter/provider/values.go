package provider

import (
	"sync"
	"time"

	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// windows caches promql.Window per rule and series: the range is written in the
// rule's template, not in the request. It is emptied when it grows past
// maxWindows entries (rules replaced by reloads stay in it until then).
type windows struct {
	mu sync.Mutex
	m  map[any]*int64
}

const maxWindows = 10000

func (w *windows) get(key any, query string) *int64 {
	w.mu.Lock()
	v, ok := w.m[key]
	w.mu.Unlock()
	if ok {
		return v
	}
	if d := promql.Window(query); d > 0 {
		s := int64(d / time.Second)
		v = &s
	}
	w.mu.Lock()
	if w.m == nil || len(w.m) >= maxWindows {
		w.m = map[any]*int64{}
	}
	w.m[key] = v
	w.mu.Unlock()
	return v
}
