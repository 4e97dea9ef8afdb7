// Package closedloop runs Tidal end to end in a closed loop: the harness's
// exporter serves a per-pod request counter whose rate follows a demand the
// test sets, spread over the ready pods of a kwok Deployment as a load
// balancer would; Prometheus scrapes it, `tidal adapter` turns it into the
// Pods metric http_requests_per_second, and `tidal autoscaler` (mode crd)
// scales the Deployment through a HorizontalAutoscaler on that metric.
//
// The test checks scale-up with the load, scale-down only after the
// downscale stabilization window, and a Prometheus outage: while the
// metric cannot be read the autoscaler must not scale down (however long
// the outage and whatever it had recommended before), must report
// ScalingActive=False/FailedGetPodsMetric with Warning events, and must
// resume once Prometheus is back.
//
// Run it with TIDAL_TOOLS_DIR set (see test/harness).
package closedloop
