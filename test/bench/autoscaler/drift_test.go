package autoscaler

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tidal-autoscaler/tidal/test/harness"
)

// A long run's phases may get costlier one after the other for two
// reasons a ratio from one round hides: the control plane's state grows
// (etcd's file, kube-apiserver's heap, the audit log the bench reads), or
// the machine does the same work slower (a busy host, a lower clock).
// controlPlaneState and cpuProbe tell them apart in each phase's log.

// controlPlaneState describes what grows over a run: kube-apiserver's and
// etcd's resident memory, etcd's database file (etcdDB, "" if unknown)
// and the audit log.
func controlPlaneState(etcdDB, auditLog string) string {
	var parts []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if pid, ok := measured.pids[name]; ok {
			if kib, err := harness.StatusKiB(pid, "VmRSS"); err == nil {
				parts = append(parts, fmt.Sprintf("%s RSS %.0f MiB", name, kib/1024))
			}
		}
	}
	for _, f := range []struct{ name, path string }{{"etcd db", etcdDB}, {"audit log", auditLog}} {
		if fi, err := os.Stat(f.path); f.path != "" && err == nil {
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", f.name, float64(fi.Size())/(1<<20)))
		}
	}
	return strings.Join(parts, ", ")
}

// probeBytes is how much cpuProbe hashes, and walkSteps how many
// dependent reads it makes in a table of walkWords words (64 MiB, far
// beyond the caches): together about 0.1 CPU-s here.
const (
	probeBytes = 64 << 20
	walkWords  = 8 << 20
	walkSteps  = 1 << 20
)

// probeResult is one cpuProbe: the thread CPU time of its two parts.
type probeResult struct{ hash, walk time.Duration }

func (p probeResult) String() string {
	return fmt.Sprintf("hash %s, walk %s", p.hash.Round(time.Millisecond), p.walk.Round(time.Millisecond))
}

// cpuProbe does the same work each time on one thread and returns the
// thread's CPU time for it: hashing (the clock and the core) and a random
// walk through memory (caches and memory shared with the rest of the
// host). A rise between phases is the machine doing work slower, not more
// work. Thread CPU time, not wall time, so that the other processes' load
// does not count, only what slows the thread while it runs.
func cpuProbe() (probeResult, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	in := probeInputs()
	buf, table := in.buf, in.table
	var r probeResult
	t0, err := threadCPU()
	if err != nil {
		return r, err
	}
	h := sha256.New()
	for range probeBytes / len(buf) {
		h.Write(buf)
	}
	h.Sum(nil)
	t1, err := threadCPU()
	if err != nil {
		return r, err
	}
	i := uint32(0)
	for range walkSteps {
		i = table[i]
	}
	t2, err := threadCPU()
	if err != nil {
		return r, err
	}
	probeSink = i
	r.hash, r.walk = t1-t0, t2-t1
	return r, nil
}

// probeInputs are cpuProbe's buffer and walk table, built once: built per
// probe, their 33 MiB of garbage could set off the bench process's
// collector inside the window a probe precedes.
var probeInputs = sync.OnceValue(func() (in struct {
	buf   []byte
	table []uint32
}) {
	in.buf = make([]byte, 1<<20)
	for i := range in.buf {
		in.buf[i] = byte(i)
	}
	in.table = make([]uint32, walkWords)
	for i := range in.table {
		// A full-period step through the table (odd, so coprime with its
		// power-of-two size): every read depends on the one before.
		in.table[i] = uint32((i + 5_000_011) % walkWords)
	}
	return in
})

// probeSink keeps the walk from being optimized away.
var probeSink uint32

// threadCPU is the calling thread's CPU time.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// TestCPUProbe checks the probe reads its own thread's CPU time: each
// part takes some.
func TestCPUProbe(t *testing.T) {
	p, err := cpuProbe()
	if err != nil {
		t.Fatal(err)
	}
	if p.hash <= 0 || p.walk <= 0 {
		t.Fatalf("cpuProbe() = %s, want each part's thread CPU time, more than 0", p)
	}
	t.Logf("cpuProbe: %s", p)
}

// TestControlPlaneState checks the files' sizes are reported (the
// processes' parts need a harness).
func TestControlPlaneState(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(log, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(db, make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	got := controlPlaneState(db, log)
	for _, want := range []string{"etcd db 2 MiB", "audit log 3 MiB"} {
		if !strings.Contains(got, want) {
			t.Fatalf("controlPlaneState = %q, want %q", got, want)
		}
	}
}
