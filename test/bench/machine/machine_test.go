// Package machine measures what the machine charges for the operations
// the Kubernetes clients and servers in the other benchmarks repeat on
// every request: a system call, waking a sleeping thread, a page fault and
// a loopback TCP round trip. Figures from two machines compare only after
// these: a nested virtual machine can charge ten times the usual price for
// a wake-up or a fault, and every process in the benchmarks pays it.
//
// Each benchmark reports cpu-ns/op, the process's user and system CPU per
// operation (getrusage), beside ns/op, the wall time:
//
//	go test -run '^$' -bench . -benchtime 2s -count 3 ./test/bench/machine/
package machine

import (
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		b.Fatal(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// measure runs op b.N times and reports its CPU per operation.
func measure(b *testing.B, op func()) {
	b.ResetTimer()
	c0 := cpuTime(b)
	for range b.N {
		op()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSyscall is the cheapest real system call (getppid has no
// vDSO shortcut).
func BenchmarkSyscall(b *testing.B) {
	measure(b, func() { syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0) })
}

// BenchmarkThreadWake passes a token between two goroutines locked to
// their own OS threads: each operation wakes the other thread and puts
// this one to sleep twice (futex), as a client's request goroutine and
// its connection's read loop do per response.
func BenchmarkThreadWake(b *testing.B) {
	ping, pong := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		for range ping {
			pong <- struct{}{}
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	measure(b, func() {
		ping <- struct{}{}
		<-pong
	})
	close(ping)
	<-done
}

// BenchmarkPageFault maps 1 MiB, touches each 4 KiB page once and unmaps
// it: 256 minor faults per operation, what a growing heap pays for fresh
// memory.
func BenchmarkPageFault(b *testing.B) {
	const size, page = 1 << 20, 4096
	measure(b, func() {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < size; i += page {
			m[i] = 1
		}
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(size/page), "faults/op")
}

// BenchmarkLoopbackRoundTrip sends 32 bytes over a TCP connection on
// 127.0.0.1 and reads them back from an echo in the same process: both
// ends' system calls and the loopback network stack.
func BenchmarkLoopbackRoundTrip(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, buf := make([]byte, 32), make([]byte, 64)
	measure(b, func() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(msg); {
			n, err := c.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	})
}
