// Package heapbytes measures the heap that objects kept alive hold, for
// benchmarks of what a cache costs per object.
package heapbytes

import "runtime"

// PerObject builds n objects with build, keeps them all alive, and
// returns the heap they hold per object: the live heap after a
// collection, less the live heap before them. Nothing else may allocate
// meanwhile (run it in a benchmark, not beside other tests).
func PerObject(n int, build func(i int) any) float64 {
	kept := make([]any, n)
	before := live()
	for i := range kept {
		kept[i] = build(i)
	}
	after := live()
	runtime.KeepAlive(kept)
	return (float64(after) - float64(before)) / float64(n)
}

func live() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
