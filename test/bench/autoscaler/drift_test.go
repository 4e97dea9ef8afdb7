package autoscaler

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
// etcd's resident memory, etcd's database file and the audit log.
func controlPlaneState(auditLog string) string {
	var parts []string
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if pid, ok := measured.pids[name]; ok {
			if kib, err := harness.StatusKiB(pid, "VmRSS"); err == nil {
				parts = append(parts, fmt.Sprintf("%s RSS %.0f MiB", name, kib/1024))
			}
		}
	}
	if pid, ok := measured.pids["etcd"]; ok {
		if dir := etcdDataDir(pid); dir != "" {
			if fi, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err == nil {
				parts = append(parts, fmt.Sprintf("etcd db %.0f MiB", float64(fi.Size())/(1<<20)))
			}
		}
	}
	if fi, err := os.Stat(auditLog); err == nil {
		parts = append(parts, fmt.Sprintf("audit log %.0f MiB", float64(fi.Size())/(1<<20)))
	}
	return strings.Join(parts, ", ")
}

// etcdDataDir reads --data-dir from etcd's command line ("" if absent).
func etcdDataDir(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	for _, arg := range strings.Split(string(data), "\x00") {
		if dir, ok := strings.CutPrefix(arg, "--data-dir="); ok {
			return dir
		}
	}
	return ""
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
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	table := make([]uint32, walkWords)
	for i := range table {
		// A full-period step through the table (odd, so coprime with its
		// power-of-two size): every read depends on the one before.
		table[i] = uint32((i + 5_000_011) % walkWords)
	}
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

// TestControlPlaneState checks the audit log's size is reported (the
// processes' parts need a harness).
func TestControlPlaneState(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(log, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := controlPlaneState(log); !strings.Contains(got, "audit log 3 MiB") {
		t.Fatalf("controlPlaneState = %q, want the audit log's 3 MiB", got)
	}
}
