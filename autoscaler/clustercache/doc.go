// Package clustercache is what the autoscaler keeps of the cluster in
// memory, so that a reconcile reads no object from the API server: the
// /scale of the built-in workload kinds from informers (ScaleCache), pods
// cut down to what the replica calculator reads (CacheTransform) and
// indexed by label (PodIndex, SelectPods), the pod selector of every
// autoscaler, to detect overlapping ones (SelectorTracker), and what each
// autoscaler's selector selected, while nothing it depends on changed
// (Selections).
package clustercache
