package ruleset

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/adapter/monitor"
)

// LoadFunc turns the rule file's content into a Set (see Load).
type LoadFunc func(path string, data []byte) (*Set, error)

// ReloaderOptions configure a Reloader.
type ReloaderOptions struct {
	// Path is the rule file; "" serves the empty Set and never reloads.
	Path string
	// Interval is how often the file is read and compared with the last
	// one seen; 0 disables reloading. Polling the content (not inotify)
	// follows a Kubernetes ConfigMap's symlink swap and editors that
	// replace the file alike.
	Interval time.Duration
	Load     LoadFunc
	// OnChange runs after a new Set is in place (e.g. to rediscover).
	OnChange func(*Set)
	// OnFailure runs when a changed file is rejected; the last good Set
	// keeps serving.
	OnFailure func(err error)
	Metrics   *monitor.Metrics
}

// Reloader holds the current Set and swaps it atomically when the rule
// file changes and the new content loads.
type Reloader struct {
	o   ReloaderOptions
	cur atomic.Pointer[Set]

	mu sync.Mutex
	// seen is the hash of the content last tried, good or bad, so a bad
	// file is reported once, not at every poll.
	seen [sha256.Size]byte
	// readErr is the last read error reported, "" while the file reads,
	// so an unreadable file is reported once, not at every poll.
	readErr string
}

// NewReloader returns a Reloader serving the empty Set until LoadInitial.
func NewReloader(o ReloaderOptions) *Reloader {
	if o.Metrics == nil {
		o.Metrics = monitor.New()
	}
	r := &Reloader{o: o}
	r.cur.Store(Empty())
	return r
}

// Current returns the Set in force.
func (r *Reloader) Current() *Set { return r.cur.Load() }

// LoadInitial loads the file once; unlike later reloads, a bad file is an
// error for the caller (the adapter refuses to start).
func (r *Reloader) LoadInitial() error {
	if r.o.Path == "" {
		return nil
	}
	data, err := os.ReadFile(r.o.Path)
	if err != nil {
		return fmt.Errorf("reading the rule file: %w", err)
	}
	set, err := r.o.Load(r.o.Path, data)
	r.mu.Lock()
	r.seen = sha256.Sum256(data)
	r.mu.Unlock()
	if err != nil {
		r.o.Metrics.Reloads.WithLabelValues("failure").Inc()
		return err
	}
	r.install(set)
	return nil
}

func (r *Reloader) install(set *Set) {
	r.cur.Store(set)
	r.o.Metrics.Reloads.WithLabelValues("success").Inc()
	r.o.Metrics.ConfigGeneration.Inc()
	if r.o.OnChange != nil {
		r.o.OnChange(set)
	}
}

// Check reloads the file if its content changed since the last check. It
// returns whether a new Set was installed, and why the file could not be
// read or its content was rejected (only the first time, as it is
// logged).
func (r *Reloader) Check() (bool, error) {
	if r.o.Path == "" {
		return false, nil
	}
	data, err := os.ReadFile(r.o.Path)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		return false, r.unreadable(err)
	}
	if r.readErr != "" {
		r.readErr = ""
		klog.InfoS("The rule file is readable again", "file", r.o.Path)
	}
	sum := sha256.Sum256(data)
	if sum == r.seen {
		return false, nil
	}
	r.seen = sum
	set, err := r.o.Load(r.o.Path, data)
	if err != nil {
		r.o.Metrics.Reloads.WithLabelValues("failure").Inc()
		klog.ErrorS(err, "Rejected the changed rule file; the last good rules keep serving", "file", r.o.Path)
		if r.o.OnFailure != nil {
			r.o.OnFailure(err)
		}
		return false, err
	}
	klog.InfoS("Loaded the changed rule file", "file", r.o.Path, "rules", len(set.Custom), "externalRules", len(set.External))
	r.install(set)
	return true, nil
}

// unreadable reports a read error once per distinct error: a ConfigMap
// update may briefly remove the file, and the next poll sees the new one,
// but a file that stays unreadable (deleted, permissions) must not go
// unnoticed. The last good Set keeps serving. r.mu must be held.
func (r *Reloader) unreadable(err error) error {
	if err.Error() == r.readErr {
		return nil
	}
	r.readErr = err.Error()
	r.o.Metrics.Reloads.WithLabelValues("failure").Inc()
	klog.ErrorS(err, "Cannot read the rule file; the last good rules keep serving", "file", r.o.Path)
	return fmt.Errorf("reading the rule file: %w", err)
}

// Run checks the file every Interval until ctx ends.
func (r *Reloader) Run(ctx context.Context) {
	if r.o.Path == "" || r.o.Interval <= 0 {
		return
	}
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = r.Check()
		}
	}
}
