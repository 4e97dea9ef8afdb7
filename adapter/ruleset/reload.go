package ruleset

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/tidal-autoscaler/tidal/adapter/monitor"
	"github.com/tidal-autoscaler/tidal/rules/config"
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
	// LoadTimeout bounds one Load of the file; 0 is DefaultLoadTimeout.
	LoadTimeout time.Duration
}

// DefaultLoadTimeout is how long loading the rule file may take before it
// is rejected. Loading a real rule file takes milliseconds; the file's
// size and alias expansion are bounded in rules/config, and this is the
// backstop if anything else makes a file slow to load.
const DefaultLoadTimeout = 10 * time.Second

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
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = DefaultLoadTimeout
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
	data, err := config.ReadFile(r.o.Path)
	if err != nil {
		return fmt.Errorf("reading the rule file: %w", err)
	}
	r.mu.Lock()
	r.seen = sha256.Sum256(data)
	r.mu.Unlock()
	set, err := r.load(data)
	if err != nil {
		r.o.Metrics.Reloads.WithLabelValues("failure").Inc()
		return err
	}
	r.install(set)
	return nil
}

// load runs Load on data with the LoadTimeout. A Load that outlives it
// is left to finish in the background and its result dropped: Load reads
// nothing but data and cannot be interrupted, and the file's bounds in
// rules/config keep it from running for long.
func (r *Reloader) load(data []byte) (*Set, error) {
	type result struct {
		set *Set
		err error
	}
	done := make(chan result, 1)
	go func() {
		set, err := r.o.Load(r.o.Path, data)
		done <- result{set, err}
	}()
	t := time.NewTimer(r.o.LoadTimeout)
	defer t.Stop()
	select {
	case res := <-done:
		return res.set, res.err
	case <-t.C:
		return nil, fmt.Errorf("loading the rule file %s took longer than %v; it was not loaded: check it with `tidal rules check %s`, and look for anchors nested in anchors or a very large file", r.o.Path, r.o.LoadTimeout, r.o.Path)
	}
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
	data, err := config.ReadFile(r.o.Path)
	r.mu.Lock()
	if err != nil {
		defer r.mu.Unlock()
		return false, r.unreadable(err)
	}
	if r.readErr != "" {
		r.readErr = ""
		klog.InfoS("The rule file is readable again", "file", r.o.Path)
	}
	sum := sha256.Sum256(data)
	if sum == r.seen {
		r.mu.Unlock()
		return false, nil
	}
	r.seen = sum
	r.mu.Unlock()

	// Loading runs without the lock, bounded by LoadTimeout.
	set, err := r.load(data)

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen != sum {
		// A concurrent Check tried newer content while this one loaded.
		return false, nil
	}
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
