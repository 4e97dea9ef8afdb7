// Package failover checks that `tidal autoscaler` keeps its stabilization
// history across a leader failover: two replicas run with leader election
// on one harness control plane, a HorizontalAutoscaler scales a Deployment
// up on high load, the load drops, and the leader is killed (SIGKILL)
// during the downscale stabilization window. The new leader must take over
// within the lease duration and scale down neither before the window has
// passed since the last high recommendation nor noticeably after it.
//
// Without the persisted history (status.tidal.history)
// the new leader would start from an empty history, record the current
// count as its first recommendation and hold the scale-down for a whole
// window from the takeover: late by the time between the drop and the
// takeover. The test's deadline is tighter than that.
//
// Run it with TIDAL_TOOLS_DIR set (see test/harness).
package failover
