// Package autoscaler benchmarks `tidal autoscaler` against
// kube-controller-manager's HPA controller on the real harness (etcd,
// kube-apiserver with the aggregator and an audit log, the workload
// controllers, kwok), in one run, one after the other on the same
// Deployments and the same metrics:
//
//   - AUTOSCALERS Deployments of PODS kwok pods each (cpu request 100m),
//     spread over NAMESPACES namespaces; PodMetrics from the test metrics
//     server (test/metricsserver) through the aggregator, every pod's cpu
//     usage changing every half period around 5 times its request, so every
//     reconcile sees new values (and writes a status) but never rescales.
//   - Phase tidal: `tidal autoscaler` with its default flags but the
//     client limit (QPS) reconciles one HorizontalAutoscaler per
//     Deployment (cpu utilization 500%, see targetUtilization).
//   - Phase kcm: the HPA-only kube-controller-manager reconciles one native
//     HPA per Deployment, with its client limit raised to the same QPS so
//     that it can do the same work; with its default 20 QPS it cannot.
//   - Phase tidal-sharded: SHARDS replicas of `tidal autoscaler --sharding`
//     (otherwise the tidal phase's flags, default lease timings) split the
//     same HorizontalAutoscalers; measured as the tidal phase, each
//     replica's CPU, RSS and reconciliations counter apart and summed.
//
// Each phase waits until every object has a status, lets one more period
// pass, then measures PERIODS sync periods of 15 s: the controller's CPU
// time (/proc/PID/stat), the API requests its identity made (the
// apiserver's audit log, by verb and resource), and the objects it
// reconciled (tidal: its reconciliations counter; kcm: its PodMetrics
// lists, one per reconcile), its work queue's depth (sampled once a
// period) and its workers' busy time (its workqueue_* metrics, kcm's
// read from its secure port), and kube-apiserver's, etcd's and the whole
// machine's CPU time (/proc/stat) in the same window. Reported per
// period. Both phases must leave every object at the same desired
// replicas (5) with no rescale.
//
// Run (the harness binaries come from `make tools`):
//
//	TIDAL_TOOLS_DIR=$(readlink -f _output/tools) go test -run '^$' -bench . -benchtime 1x -timeout 60m ./test/bench/autoscaler/
//
// Knobs (environment): TIDAL_BENCH_AUTOSCALERS (1000), TIDAL_BENCH_PODS
// (5), TIDAL_BENCH_NAMESPACES (10), TIDAL_BENCH_PERIODS (3),
// TIDAL_BENCH_QPS (200: both controllers' --kube-api-qps, burst 1.5
// times; Tidal's default is 100), TIDAL_BENCH_PHASES ("tidal,kcm"; also
// "baseline": TIDAL_BENCH_BASELINE, another tidal binary, run the same
// way, for before/after ratios from one run, and "baseline-native", the
// same in native mode, "baseline-sharded", the same sharded, and
// "baseline-bounded", the same with tidal-bounded's status bound;
// "tidal-sharded"; "tidal-bounded-sharded", SHARDS replicas with the
// status bound of tidal-bounded;
// "tidal-native": `tidal autoscaler --mode=native` on autoscaling/v2 HPAs,
// kcm's own objects, with kcm's HPA controller stopped for the phase;
// "tidal-native-sharded" and "baseline-native-sharded": SHARDS replicas
// of that with --sharding; a
// phase named twice reports its mean, so "tidal,baseline,baseline,tidal"
// evens out the order), TIDAL_BENCH_SHARDS (3, the replicas of tidal-sharded),
// TIDAL_BENCH_USAGE ("moving"; "steady": every pod at 500m throughout, so
// statuses stop changing after the first reconcile; tidal runs with leader
// election, so it writes no history refresh either),
// TIDAL_BENCH_PROFILE (a file: tidal runs with --profiling and a CPU
// profile of its measured periods is written there, its heap's allocation
// profiles at the window's ends to FILE.allocs-start and FILE.allocs),
// TIDAL_BENCH_KCM_PROFILE (the same for kube-controller-manager),
// TIDAL_BENCH_APISERVER_PROFILE (a path prefix: kube-apiserver runs with
// --profiling and a CPU profile of each phase's window is written to
// PREFIX-PHASE-N.pprof, N the phase's run),
// TIDAL_BENCH_SETTLE_PERIODS (12: the most periods the tidal phases wait,
// after every object has a status, for the autoscalers to join their
// namespaces' beats: one PodMetrics list per namespace, 98% of the
// objects reconciled and none off its beat in a period),
// TIDAL_BENCH_SYNC_PERIOD (15s; both controllers' sync period, shorter
// only for the smoke run), TIDAL_BENCH_SAMPLES (a file: every phase's
// figures appended as JSON lines, see test/bench/samples; kcm's also
// carry the longest time between two /scale reads of one HPA, from the
// audit log).
//
// Figures depend on the machine and its load; nothing here asserts on
// time.
package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tidal-autoscaler/tidal/autoscaler/shard"
	"github.com/tidal-autoscaler/tidal/autoscaler/source"
	"github.com/tidal-autoscaler/tidal/test/bench/samples"
	"github.com/tidal-autoscaler/tidal/test/harness"
	"github.com/tidal-autoscaler/tidal/test/metricsserver"
)

var (
	// kcmUser is the identity of the upstream HPA controller's requests
	// (--use-service-account-credentials).
	kcmUser = harness.HPAServiceAccount.User
	// tidalUser is the identity harness.StartAutoscaler runs tidal as.
	tidalUser = harness.ServiceAccountIdentity("tidal-system", "tidal-autoscaler").User
)

const (
	// nativeServiceAccount, in tidal-system, is the identity of the
	// tidal-native phases.
	nativeServiceAccount = "tidal-autoscaler-native"
)

// syncPeriod is both controllers' sync period: 15 s, their default, unless
// TIDAL_BENCH_SYNC_PERIOD says otherwise (the smoke run's short one).
var syncPeriod = envDuration("TIDAL_BENCH_SYNC_PERIOD", 15*time.Second)

// envDuration reads a duration knob.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// syncPeriodArgs set the sync period on either controller when it is not
// the default.
func syncPeriodArgs() []string {
	if syncPeriod == 15*time.Second {
		return nil
	}
	return []string{"--horizontal-pod-autoscaler-sync-period=" + syncPeriod.String()}
}

// logf writes a line of the benchmark's progress to stderr, with the
// time: b.Logf keeps only a benchmark's first ten lines (testing's
// trimOutput), and a fleet run's phases write many more, which the bench
// driver keeps in its job's log.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().UTC().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// config is the benchmark's size.
type config struct {
	autoscalers, pods, namespaces, periods int
	// qps is both controllers' client limit: with the same budget, the
	// requests a reconcile needs decide how many objects fit in a period.
	qps int
	// shards is the number of replicas of the tidal-sharded phase.
	shards int
	phases []string
	steady bool
	// statusInterval is the tidal-bounded phase's
	// --status-metrics-min-interval (TIDAL_BENCH_STATUS_INTERVAL, 60s).
	statusInterval time.Duration
}

func configFromEnv() config {
	c := config{
		autoscalers: envInt("TIDAL_BENCH_AUTOSCALERS", 1000),
		pods:        envInt("TIDAL_BENCH_PODS", 5),
		namespaces:  envInt("TIDAL_BENCH_NAMESPACES", 10),
		periods:     envInt("TIDAL_BENCH_PERIODS", 3),
		qps:         envInt("TIDAL_BENCH_QPS", 200),
		shards:      envInt("TIDAL_BENCH_SHARDS", 3),
		phases:      []string{"tidal", "kcm"},
	}
	c.steady = os.Getenv("TIDAL_BENCH_USAGE") == "steady"
	c.statusInterval = time.Minute
	if d, err := time.ParseDuration(os.Getenv("TIDAL_BENCH_STATUS_INTERVAL")); err == nil && d > 0 {
		c.statusInterval = d
	}
	if p := os.Getenv("TIDAL_BENCH_PHASES"); p != "" {
		c.phases = strings.Split(p, ",")
	}
	return c
}

// target is one Deployment and the autoscalers of it.
type target struct{ namespace, name string }

func (c config) targets() []target {
	out := make([]target, 0, c.autoscalers)
	for i := range c.autoscalers {
		out = append(out, target{namespace: fmt.Sprintf("bench-%d", i%c.namespaces), name: fmt.Sprintf("w-%04d", i)})
	}
	return out
}

func BenchmarkReconcileFleet(b *testing.B) {
	cfg := configFromEnv()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	auditDir := b.TempDir()
	apiArgs, auditLog, err := harness.AuditArgs(auditDir)
	if err != nil {
		b.Fatal(err)
	}
	h := harness.StartT(b, harness.Options{
		ControllerManager: true, Kwok: true,
		// Creating thousands of pods at the default 20 QPS takes minutes.
		ControllerManagerArgs: []string{"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-replicaset-syncs=20", "--concurrent-deployment-syncs=20"},
		HPAController:         true,
		HPAControllerArgs:     kcmArgs(cfg),
		APIServerArgs:         append(apiArgs, apiserverProfileArgs()...),
		Logf:                  b.Logf,
	})
	bin, err := harness.TidalBinary(ctx)
	if err != nil {
		b.Fatal(err)
	}
	metrics, err := metricsserver.Start(ctx, h, metricsserver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); _ = metrics.Wait() })
	admin := fastClient(b, h)

	targets := cfg.targets()
	start := time.Now()
	if err := createWorkload(ctx, admin, h.NodeName, cfg, targets); err != nil {
		b.Fatal(err)
	}
	logf("workload: %d Deployments x %d pods Ready in %s", len(targets), cfg.pods, time.Since(start).Round(time.Second))
	go jitterUsage(ctx, metrics, cfg)

	dyn, err := dynamic.NewForConfig(h.Admin)
	if err != nil {
		b.Fatal(err)
	}
	has := haFleet(dyn)
	runs := map[string][]phaseResult{}
	measured.pids = h.PIDs()
	measured.etcdDB = filepath.Join(h.EtcdDataDir, "member", "snap", "db")
	measured.pids[benchmarkProcess] = os.Getpid()
	if measured.apiserverGC, err = apiserverGC(h); err != nil {
		b.Fatal(err)
	}
	// The tidal-bounded phases' status bound (docs/operations.md):
	// values-only status changes written at most once per interval.
	statusBound := []string{"--status-metrics-min-interval=" + cfg.statusInterval.String()}
	for _, phase := range cfg.phases {
		var r phaseResult
		began := time.Now()
		measured.onWindow = apiserverProfiler(h, phase, len(runs[phase])+1)
		switch phase {
		case "tidal":
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: has})
		case "tidal-bounded":
			// The status bound on (statusBound).
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: has, args: statusBound})
		case "tidal-sharded":
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: has, shards: cfg.shards})
		case "tidal-bounded-sharded":
			// Sharding where kube-apiserver can take every reconcile's
			// status write: with the bound, both this and tidal-bounded
			// reconcile every object, the same work.
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: has, shards: cfg.shards, args: statusBound})
		case "tidal-native":
			// kcm's own objects, autoscaling/v2 HPAs (protobuf, no
			// schema), with kcm's HPA controller stopped.
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: hpaFleet(admin), native: true})
		case "tidal-native-sharded":
			r, err = runTidal(ctx, b, h, bin, cfg, targets, auditLog, tidalPhase{objects: hpaFleet(admin), native: true, shards: cfg.shards})
		case "baseline", "baseline-native", "baseline-sharded", "baseline-native-sharded", "baseline-bounded":
			base := os.Getenv("TIDAL_BENCH_BASELINE")
			if base == "" {
				err = fmt.Errorf("phase %s needs TIDAL_BENCH_BASELINE, a tidal binary", phase)
				break
			}
			ph := tidalPhase{objects: has}
			switch phase {
			case "baseline-native":
				ph = tidalPhase{objects: hpaFleet(admin), native: true}
			case "baseline-sharded":
				ph.shards = cfg.shards
			case "baseline-native-sharded":
				ph = tidalPhase{objects: hpaFleet(admin), native: true, shards: cfg.shards}
			case "baseline-bounded":
				ph.args = statusBound
			}
			r, err = runTidal(ctx, b, h, base, cfg, targets, auditLog, ph)
		case "kcm":
			r, err = runKCM(ctx, h, admin, cfg, targets, auditLog)
		default:
			err = fmt.Errorf("unknown phase %q", phase)
		}
		if err != nil {
			b.Fatalf("phase %s: %v", phase, err)
		}
		logf("%s (phase took %s) per period: %.2f CPU-s (system %.2f), RSS %.0f MiB, %.0f reconciles, %.0f requests; kube-apiserver %.2f CPU-s, etcd %.2f CPU-s, the machine %.2f CPU-s; requests over the %d periods: %s; desired replicas %v",
			phase, time.Since(began).Round(time.Second), r.cpuPerPeriod, r.systemPerPeriod, r.rssMiB, r.reconcilesPerPeriod, float64(r.requests.Total)/float64(cfg.periods), r.apiserverPerPeriod, r.etcdPerPeriod, r.machinePerPeriod, cfg.periods, r.requests, r.desired)
		if r.sharded() {
			logf("%s: %s", phase, r.replicaSummary())
		}
		logf("%s: the rest of the machine per period, in CPU-s: %v", phase, r.restPerPeriod)
		logf("%s: %s; the other clients' requests over the %d periods: %s", phase, r.apiserverGCSummary(), cfg.periods, busiestClients(r.otherRequests, 6))
		if phase == "kcm" {
			logf("kcm: %d of %d HPAs read their target's /scale in the window; longest time between two reads of one: %s; largest queue depth %.0f; %s", r.visited, cfg.autoscalers, r.longestGap.Round(time.Millisecond), r.maxQueueDepth, r.workers)
		} else {
			logf("%s: longest time between two reconciles of one autoscaler (its gauge, sampled once a period): %s; largest queue depth %.0f; %s", phase, r.longestGap.Round(time.Millisecond), r.maxQueueDepth, r.workers)
			logf("%s: status writes over the %d periods by reason (tidal_autoscaler_status_writes_total): %v", phase, cfg.periods, r.statusWrites)
		}
		runs[phase] = append(runs[phase], r)
		recordPhase(b, cfg, phase, len(runs[phase]), r)
	}
	// A phase named more than once (e.g. "tidal,baseline,baseline,tidal",
	// which evens out what running first or second does to the figures)
	// reports its mean.
	results := map[string]phaseResult{}
	for phase, rs := range runs {
		r := meanResult(rs)
		results[phase] = r
		if len(rs) > 1 {
			logf("%s, mean of %d runs: %.2f CPU-s per period", phase, len(rs), r.cpuPerPeriod)
		}
		b.ReportMetric(r.cpuPerPeriod, phase+"-cpu-s/period")
		b.ReportMetric(float64(r.requests.Total)/float64(cfg.periods), phase+"-requests/period")
		b.ReportMetric(r.reconcilesPerPeriod, phase+"-reconciles/period")
		b.ReportMetric(r.maxQueueDepth, phase+"-max-queue-depth")
		if r.sharded() {
			b.ReportMetric(r.cpuPerReplica(), phase+"-cpu-s/period/replica")
		}
	}
	for _, pair := range []struct{ replicas, one, metric string }{
		{"tidal-sharded", "tidal", "sharded"},
		{"tidal-bounded-sharded", "tidal-bounded", "bounded-sharded"},
	} {
		s, t := results[pair.replicas], results[pair.one]
		if s.cpuPerPeriod <= 0 || t.cpuPerPeriod <= 0 {
			continue
		}
		b.ReportMetric(s.cpuPerReplica()/t.cpuPerPeriod, pair.metric+"-cpu-per-replica-ratio")
		b.ReportMetric(s.cpuPerPeriod/t.cpuPerPeriod, pair.metric+"-total-cpu-ratio")
		if !maps2Equal(s.desired, t.desired) {
			b.Errorf("decisions differ: %s desired replicas %v, %s %v", pair.replicas, s.desired, pair.one, t.desired)
		}
	}
	if t, base := results["tidal"], results["baseline"]; t.cpuPerPeriod > 0 && base.cpuPerPeriod > 0 {
		b.ReportMetric(t.cpuPerPeriod/base.cpuPerPeriod, "cpu-ratio-to-baseline")
	}
	if t, base := results["tidal-native"], results["baseline-native"]; t.cpuPerPeriod > 0 && base.cpuPerPeriod > 0 {
		b.ReportMetric(t.cpuPerPeriod/base.cpuPerPeriod, "native-cpu-ratio-to-baseline")
	}
	if t, base := results["tidal-sharded"], results["baseline-sharded"]; t.cpuPerPeriod > 0 && base.cpuPerPeriod > 0 {
		b.ReportMetric(t.cpuPerReplica()/base.cpuPerReplica(), "sharded-cpu-per-replica-ratio-to-baseline")
	}
	if t, base := results["tidal-bounded"], results["baseline-bounded"]; t.reconcilesPerPeriod > 0 && base.reconcilesPerPeriod > 0 {
		b.ReportMetric(t.reconcilesPerPeriod/base.reconcilesPerPeriod, "bounded-reconciles-ratio-to-baseline")
		b.ReportMetric(t.cpuPerPeriod/base.cpuPerPeriod, "bounded-cpu-ratio-to-baseline")
	}
	if t, base := results["tidal-native-sharded"], results["baseline-native-sharded"]; t.cpuPerPeriod > 0 && base.cpuPerPeriod > 0 {
		b.ReportMetric(t.cpuPerReplica()/base.cpuPerReplica(), "native-sharded-cpu-per-replica-ratio-to-baseline")
	}
	if t, k := results["tidal-native"], results["kcm"]; t.reconcilesPerPeriod > 0 && k.reconcilesPerPeriod > 0 {
		b.ReportMetric(t.reconcilesPerPeriod/k.reconcilesPerPeriod, "native-reconciles-ratio")
		if !maps2Equal(t.desired, k.desired) {
			b.Errorf("decisions differ: tidal-native desired replicas %v, kcm %v", t.desired, k.desired)
		}
	}
	if t, k := results["tidal"], results["kcm"]; t.cpuPerPeriod > 0 && k.cpuPerPeriod > 0 {
		b.ReportMetric(t.cpuPerPeriod/k.cpuPerPeriod, "cpu-ratio")
		b.ReportMetric(float64(t.requests.Total)/float64(k.requests.Total), "requests-ratio")
		if !maps2Equal(t.desired, k.desired) {
			b.Errorf("decisions differ: tidal desired replicas %v, kcm %v", t.desired, k.desired)
		}
	}
}

// recordPhase appends one phase's figures to the samples file (every
// phase: the log's means over repeated phases hide the spread).
func recordPhase(b *testing.B, cfg config, phase string, round int, r phaseResult) {
	figures := []samples.Sample{
		{Metric: "cpu-per-period", Value: r.cpuPerPeriod, Unit: "CPU-s"},
		{Metric: "requests-per-period", Value: float64(r.requests.Total) / float64(cfg.periods), Unit: "requests"},
		{Metric: "reconciles-per-period", Value: r.reconcilesPerPeriod, Unit: "objects"},
		{Metric: "rss", Value: r.rssMiB, Unit: "MiB"},
		{Metric: "kube-apiserver-cpu-per-period", Value: r.apiserverPerPeriod, Unit: "CPU-s"},
		{Metric: "other-clients-requests-per-period", Value: float64(sumValues(r.otherRequests)) / float64(cfg.periods), Unit: "requests"},
		{Metric: "etcd-cpu-per-period", Value: r.etcdPerPeriod, Unit: "CPU-s"},
		{Metric: "machine-cpu-per-period", Value: r.machinePerPeriod, Unit: "CPU-s"},
		{Metric: "podmetrics-lists-per-period", Value: float64(r.requests.podMetricsLists()) / float64(cfg.periods), Unit: "requests"},
		{Metric: "autoscalers", Value: float64(cfg.autoscalers), Unit: "objects"},
	}
	for _, p := range restProcesses {
		if v, ok := r.restPerPeriod[p.name]; ok {
			figures = append(figures, samples.Sample{Metric: p.metric, Value: v, Unit: "CPU-s"})
		}
	}
	if r.gcErr == nil {
		figures = append(figures, samples.Sample{Metric: "kube-apiserver-gc-cpu-per-period", Value: r.apiserverGC.cpu, Unit: "CPU-s"})
	}
	figures = append(figures,
		samples.Sample{Metric: "max-queue-depth", Value: r.maxQueueDepth, Unit: "items"},
		samples.Sample{Metric: "longest-visit-gap", Value: r.longestGap.Seconds(), Unit: "s"})
	for _, reason := range slices.Sorted(maps.Keys(r.statusWrites)) {
		figures = append(figures, samples.Sample{Metric: "status-writes-" + reason + "-per-period", Value: r.statusWrites[reason] / float64(cfg.periods), Unit: "requests"})
	}
	if phase == "kcm" {
		figures = append(figures, samples.Sample{Metric: "objects-visited", Value: float64(r.visited), Unit: "objects"})
	} else {
		figures = append(figures, samples.Sample{Metric: "settle-periods", Value: float64(r.settlePeriods), Unit: "periods"})
	}
	if w := r.workers; w.measured() {
		figures = append(figures,
			samples.Sample{Metric: "worker-busy-share", Value: w.busyShare, Unit: "ratio"},
			samples.Sample{Metric: "mean-work-seconds", Value: w.meanWork.Seconds(), Unit: "s"},
			samples.Sample{Metric: "mean-queue-wait-seconds", Value: w.meanWait.Seconds(), Unit: "s"})
	}
	if r.sharded() {
		// cpu-per-period, reconciles-per-period and rss above are the
		// replicas' sums; per replica: the mean, and each replica's own
		// (numbered in start order; which objects a replica gets depends
		// on its random identity, so replica-1 of two rounds are not the
		// same share).
		figures = append(figures,
			samples.Sample{Metric: "replicas", Value: float64(len(r.replicas)), Unit: "processes"},
			samples.Sample{Metric: "cpu-per-period-per-replica", Value: r.cpuPerReplica(), Unit: "CPU-s"},
			samples.Sample{Metric: "rss-per-replica", Value: r.rssMiB / float64(len(r.replicas)), Unit: "MiB"},
			samples.Sample{Metric: "max-replica-cpu-per-period", Value: r.maxReplica(func(x replicaResult) float64 { return x.cpuPerPeriod }), Unit: "CPU-s"},
			samples.Sample{Metric: "max-replica-reconciles-per-period", Value: r.maxReplica(func(x replicaResult) float64 { return x.reconcilesPerPeriod }), Unit: "objects"})
		for i, x := range r.replicas {
			n := fmt.Sprintf("replica-%d-", i+1)
			figures = append(figures,
				samples.Sample{Metric: n + "cpu-per-period", Value: x.cpuPerPeriod, Unit: "CPU-s"},
				samples.Sample{Metric: n + "reconciles-per-period", Value: x.reconcilesPerPeriod, Unit: "objects"},
				samples.Sample{Metric: n + "rss", Value: x.rssMiB, Unit: "MiB"})
		}
	}
	for _, f := range figures {
		f.Row, f.Side, f.Round = "fleet", phase, round
		if err := samples.Record(f); err != nil {
			b.Errorf("samples: %v", err)
		}
	}
}

// benchmarkProcess is this process in measured.pids: the test metrics
// server, the usage jitter and the harness's own clients.
const benchmarkProcess = "benchmark"

// restProcesses are the processes besides the controller, kube-apiserver
// and etcd whose CPU a window measures, each with its sample's metric: so
// that a row bound by the machine says where the rest of the cores went.
// kube-controller-manager runs the workload controllers, among them the
// garbage collector, which watches every resource (the autoscalers too).
var restProcesses = []struct{ name, metric string }{
	{"kwok", samples.KwokCPU},
	{"kube-controller-manager", samples.WorkloadControllersCPU},
	{benchmarkProcess, samples.BenchmarkProcessCPU},
}

// measured holds the control plane's process ids, whose CPU each phase's
// window measures too, and what to do when a window starts.
var measured struct {
	pids     map[string]int
	etcdDB   string // etcd's database file, whose growth the windows log
	onWindow func(ctx context.Context, window time.Duration)
	// apiserverGC reads kube-apiserver's garbage collection so far.
	apiserverGC func(context.Context) (gcSample, error)
}

// gcSample is a Go process's garbage collection so far: CPU seconds and
// cycles.
type gcSample struct{ cpu, cycles float64 }

// apiserverGC returns what reads kube-apiserver's garbage collection so
// far from Go's runtime metrics on its /metrics page: at 10,000 objects
// its heap is several GiB, a collection costs it seconds of CPU, and a
// window that holds one shows kube-apiserver busy whatever the side
// measured did.
func apiserverGC(h *harness.Harness) (func(context.Context) (gcSample, error), error) {
	client, err := rest.HTTPClientFor(h.Admin)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (gcSample, error) {
		v, err := scrapeSums(ctx, client, h.APIServerURL+"/metrics", "go_cpu_classes_gc_total_cpu_seconds_total", "go_gc_cycles_total_gc_cycles_total")
		if err != nil {
			return gcSample{}, err
		}
		return gcSample{cpu: v[0], cycles: v[1]}, nil
	}, nil
}

// kcmArgs are the HPA controller manager's extra flags.
func kcmArgs(cfg config) []string {
	args := append(qpsArgs(cfg), syncPeriodArgs()...)
	if os.Getenv("TIDAL_BENCH_KCM_PROFILE") != "" {
		args = append(args, "--profiling=true")
	}
	return args
}

// apiserverProfileArgs turn kube-apiserver's profiling on when
// TIDAL_BENCH_APISERVER_PROFILE asks for its profiles.
func apiserverProfileArgs() []string {
	if os.Getenv("TIDAL_BENCH_APISERVER_PROFILE") == "" {
		return nil
	}
	return []string{"--profiling=true"} // the harness's --profiling=false comes first
}

// apiserverProfiler returns what starts kube-apiserver's CPU profile of
// run n of phase at its window's start (nil unless
// TIDAL_BENCH_APISERVER_PROFILE is set): where the control plane's CPU
// goes for each controller's requests, e.g. its status writes.
func apiserverProfiler(h *harness.Harness, phase string, n int) func(context.Context, time.Duration) {
	prefix := os.Getenv("TIDAL_BENCH_APISERVER_PROFILE")
	if prefix == "" {
		return nil
	}
	file := fmt.Sprintf("%s-%s-%d.pprof", prefix, phase, n)
	return func(ctx context.Context, window time.Duration) {
		go func() {
			err := func() error {
				client, err := rest.HTTPClientFor(h.Admin)
				if err != nil {
					return err
				}
				data, err := httpGetWith(ctx, client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", h.APIServerURL, int(window.Seconds())))
				if err != nil {
					return err
				}
				return os.WriteFile(file, []byte(data), 0o644)
			}()
			if err != nil {
				logf("kube-apiserver profile of %s: %v", phase, err)
				return
			}
			logf("kube-apiserver profile of %s's window: %s", phase, file)
		}()
	}
}

// qpsArgs set a controller's client limit, the same for both.
func qpsArgs(cfg config) []string {
	return []string{fmt.Sprintf("--kube-api-qps=%d", cfg.qps), fmt.Sprintf("--kube-api-burst=%d", cfg.qps*3/2)}
}

// fastClient is the admin client without a client-side rate limit, for
// creating the workload.
func fastClient(b testing.TB, h *harness.Harness) kubernetes.Interface {
	cfg := *h.Admin
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// createWorkload creates the Deployments, their pods pinned to the kwok
// node (no scheduler needed), and waits until every pod is Ready.
func createWorkload(ctx context.Context, c kubernetes.Interface, node string, cfg config, targets []target) error {
	for i := range cfg.namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, t := range targets {
		g.Go(func() error {
			d := harness.Deployment(t.namespace, t.name, int32(cfg.pods))
			d.Spec.Template.Spec.NodeName = node
			d.Spec.Template.Spec.NodeSelector = nil
			_, err := c.AppsV1().Deployments(t.namespace).Create(gctx, d, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("create Deployments: %w", err)
	}
	want := len(targets) * cfg.pods
	deadline := time.Now().Add(15 * time.Minute)
	for {
		pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		ready := 0
		for i := range pods.Items {
			if harness.PodReady(&pods.Items[i]) {
				ready++
			}
		}
		if ready >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d pods Ready after 15 minutes", ready, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// jitterUsage moves every pod's cpu usage every half sync period between
// 455m and 545m (455-545% of its request, inside the tolerance of the
// target): in step e every pod of namespace n uses usageMilli(e+n), so
// that every reconcile sees a new usage and writes a status (the moving
// rows measure that). The pods of a Deployment share one value because
// both controllers average their usage in whole millicores (upstream's
// GetResourceUtilizationRatio): with values that differed by rank, the
// truncated averages of two steps a period apart were equal in one step
// of nine, and a tenth of the reconciles at 1,000 autoscalers wrote
// nothing on either side. A reconcile comes at least 0.9 periods (1.8
// steps) after the one before, so it sees another value unless it comes
// a whole cycle of usageValues steps (45.5 periods) later. With
// cfg.steady every pod stays at 500m.
func jitterUsage(ctx context.Context, m *metricsserver.Server, cfg config) {
	for step := 0; ; step++ {
		for ns := range cfg.namespaces {
			milli := usageMilli(step + ns)
			if cfg.steady {
				milli = steadyMilli
			}
			m.SetPodUsage(fmt.Sprintf("bench-%d", ns), labels.Everything(), "app", corev1.ResourceCPU, metricsserver.Q(fmt.Sprintf("%dm", milli)))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(usageStepEvery(syncPeriod)):
		}
	}
}

// targetUtilization is every autoscaler's cpu target, in percent of the
// pods' 100m request. It is above 100% (pods may use more than they
// request) so that the tolerance (10%) holds usageValues whole-millicore
// usages. A 50% target held 9, so the usage repeated every 9 steps (4.5
// periods, 67.5 s): at 10,000 autoscalers kcm visits an object every 70
// to 87 s, and in two rounds a sixth and a third of its visits
// (2026-12-07 11:43 UTC) saw the usage of the visit before and wrote
// nothing.
const targetUtilization = 500

// requestMilli is every pod's cpu request, in millicores: read from
// harness.Deployment, which sets it, so that the usages below are checked
// against the request the pods have (TestUsageWithinTolerance).
var requestMilli = int(harness.Deployment("", "", 1).Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue())

// steadyMilli is every pod's usage with cfg.steady: the target exactly.
var steadyMilli = targetUtilization * requestMilli / 100

// usageLow and usageValues are the usages the steps cycle through, in
// millicores: usageLow up to usageLow+usageValues-1 (455m to 545m, 0.91
// to 1.09 of the target).
const usageLow, usageValues = 455, 91

// usageMilli is every pod's usage in step i, in millicores: a value no
// step 1 to usageValues-1 steps before or after it has.
func usageMilli(i int) int { return usageLow + i%usageValues }

// usageStepEvery is how long each usage step lasts: half the sync period.
func usageStepEvery(period time.Duration) time.Duration { return period / 2 }

// spec is every autoscaler's spec: cpu utilization targetUtilization,
// 1..10 replicas.
func spec(t target) autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: t.name},
		MinReplicas:    ptr.To[int32](1),
		MaxReplicas:    10,
		Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name:   corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](targetUtilization)},
			},
		}},
	}
}

// phaseResult is what one controller did per sync period.
type phaseResult struct {
	cpuPerPeriod float64
	// systemPerPeriod is the kernel's part of cpuPerPeriod (system calls,
	// and on loopback the receiving side's network processing too).
	systemPerPeriod     float64
	reconcilesPerPeriod float64
	requests            requestCount
	// desired counts the objects by status.desiredReplicas at the end.
	desired map[int32]int
	// settlePeriods is how many periods tidal's phases waited for its
	// autoscalers to join their namespaces' beats before the window.
	settlePeriods int
	// maxQueueDepth is the largest work queue depth sampled (tidal only).
	maxQueueDepth float64
	// rssMiB is the process's resident memory at the end of the window.
	rssMiB float64
	// apiserverPerPeriod and etcdPerPeriod are kube-apiserver's and etcd's
	// CPU seconds in the same window, per period.
	apiserverPerPeriod, etcdPerPeriod float64
	// apiserverGC is kube-apiserver's garbage collection in the window:
	// CPU seconds per period, cycles in the whole window; gcErr says why
	// it is unknown.
	apiserverGC gcSample
	gcErr       error
	// otherRequests counts the requests of every other client in the
	// window, by user name.
	otherRequests map[string]int
	// machinePerPeriod is every core's busy time in the same window, per
	// period: all processes, the harness's and the benchmark's included.
	machinePerPeriod float64
	// restPerPeriod is the CPU seconds per period of each of restProcesses
	// in the same window: what else the machine spent its cores on.
	restPerPeriod map[string]float64
	// from and to bound the measured window.
	from, to time.Time
	// longestGap is the longest time between two visits of one object in
	// the window: for kcm between two reads of its target's /scale (once
	// per reconcile, from the audit log), and visited the objects read at
	// least once; for tidal the largest sample of its reconcile gap gauge.
	longestGap time.Duration
	visited    int
	// statusWrites counts tidal's status writes in the window by reason,
	// from its own counter (nil for kcm).
	statusWrites map[string]float64
	// replicas are each process's own figures, in start order, when the
	// phase ran several (tidal-sharded); cpuPerPeriod, systemPerPeriod,
	// reconcilesPerPeriod and rssMiB are then their sums.
	replicas []replicaResult
	// workers are tidal's workers in the window, every replica's
	// together (none for kcm).
	workers workerFigures
}

// replicaResult is one replica's figures per period.
type replicaResult struct {
	cpuPerPeriod, reconcilesPerPeriod, rssMiB float64
}

func (r phaseResult) sharded() bool { return len(r.replicas) > 1 }

// apiserverGCSummary says kube-apiserver's garbage collection in the
// window, or why it is unknown.
func (r phaseResult) apiserverGCSummary() string {
	if r.gcErr != nil {
		return fmt.Sprintf("kube-apiserver's garbage collection unknown (%v)", r.gcErr)
	}
	return fmt.Sprintf("kube-apiserver's garbage collection %.2f CPU-s a period, %.0f cycles in the window", r.apiserverGC.cpu, r.apiserverGC.cycles)
}

// sumValues is the sum of counts.
func sumValues(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// cpuPerReplica is the mean CPU per period of one replica.
func (r phaseResult) cpuPerReplica() float64 {
	if len(r.replicas) == 0 {
		return r.cpuPerPeriod
	}
	return r.cpuPerPeriod / float64(len(r.replicas))
}

// maxReplica is the largest of one figure over the replicas.
func (r phaseResult) maxReplica(f func(replicaResult) float64) float64 {
	var m float64
	for _, x := range r.replicas {
		m = max(m, f(x))
	}
	return m
}

// replicaSummary describes each replica's share of the work.
func (r phaseResult) replicaSummary() string {
	parts := make([]string, 0, len(r.replicas))
	for i, x := range r.replicas {
		parts = append(parts, fmt.Sprintf("replica %d: %.2f CPU-s, %.0f reconciles, RSS %.0f MiB", i+1, x.cpuPerPeriod, x.reconcilesPerPeriod, x.rssMiB))
	}
	return fmt.Sprintf("%d replicas, per period %.2f CPU-s per replica (%.2f in all): %s",
		len(r.replicas), r.cpuPerReplica(), r.cpuPerPeriod, strings.Join(parts, "; "))
}

// meanResult averages the per-period figures of runs of one phase; the
// request counts and the desired replicas are the last run's, and the
// queue depth the largest.
func meanResult(rs []phaseResult) phaseResult {
	r := rs[len(rs)-1]
	var cpu, sys, rss, rec float64
	for _, x := range rs {
		cpu += x.cpuPerPeriod
		sys += x.systemPerPeriod
		rss += x.rssMiB
		rec += x.reconcilesPerPeriod
		r.maxQueueDepth = max(r.maxQueueDepth, x.maxQueueDepth)
		r.longestGap = max(r.longestGap, x.longestGap)
	}
	n := float64(len(rs))
	r.cpuPerPeriod, r.systemPerPeriod, r.rssMiB, r.reconcilesPerPeriod = cpu/n, sys/n, rss/n, rec/n
	// Replicas by start order (runs of one phase start as many).
	reps := make([]replicaResult, len(r.replicas))
	for _, x := range rs {
		for i := range min(len(reps), len(x.replicas)) {
			reps[i].cpuPerPeriod += x.replicas[i].cpuPerPeriod / n
			reps[i].reconcilesPerPeriod += x.replicas[i].reconcilesPerPeriod / n
			reps[i].rssMiB += x.replicas[i].rssMiB / n
		}
	}
	r.replicas = reps
	return r
}

func maps2Equal(a, b map[int32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// procSample is a process's user and system CPU seconds and its
// counters, read at one time.
type procSample struct {
	user, sys float64
	counters
}

// counters are what one scrape of a controller's /metrics reads: its
// reconciles counter and, where it has them (tidal), its work queue's
// totals.
type counters struct {
	n       float64
	work    workSample
	hasWork bool
	// writes are tidal's status writes so far by reason
	// (tidal_autoscaler_status_writes_total).
	writes map[string]float64
}

// proc is one measured controller process: its pid, its reconciles
// counter (nil: none) and what to start when the measured window opens
// (nil: nothing), such as a profile of the window.
type proc struct {
	pid      int
	counter  func(context.Context) (counters, error)
	onWindow func(ctx context.Context, window time.Duration)
	// workers is its worker count (0: unknown).
	workers int
	// work reads its work queue's totals where counter does not (kcm,
	// which has no reconciles counter; nil: none).
	work func(context.Context) (workSample, error)
}

// measure waits until statuses reports every object has a status, lets one
// more period pass, then measures periods sync periods of the processes
// procs (one, or the replicas of a sharded controller: each one's figures
// apart and their sums). Reconciles are the counters' increase over the
// window; without a counter, the PodMetrics lists (one per reconcile of a
// one-metric HPA upstream). A window that kwok's burst took part of the
// machine from is measured again (kwokBurst).
func measure(ctx context.Context, cfg config, procs []proc, users []string, auditLog string,
	statuses func(context.Context) (map[int32]int, int, error), queue func(context.Context) (queueSample, error), settleLists int,
) (phaseResult, error) {
	var r phaseResult
	deadline := time.Now().Add(10 * time.Minute)
	for {
		_, withStatus, err := statuses(ctx)
		if err != nil {
			return r, err
		}
		if withStatus == cfg.autoscalers {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("only %d of %d objects got a status in 10 minutes", withStatus, cfg.autoscalers)
		}
		time.Sleep(2 * time.Second)
	}
	hasCounter := false
	for _, p := range procs {
		hasCounter = hasCounter || p.counter != nil
	}
	// read samples every process's CPU times and counter.
	read := func() ([]procSample, error) {
		out := make([]procSample, len(procs))
		for i, p := range procs {
			var err error
			if out[i].user, out[i].sys, err = harness.CPUTimes(p.pid); err != nil {
				return nil, err
			}
			switch {
			case p.counter != nil:
				if out[i].counters, err = p.counter(ctx); err != nil {
					return nil, err
				}
			case p.work != nil:
				// A failed scrape leaves the window's worker figures
				// unknown, not the window failed.
				out[i].work, err = p.work(ctx)
				out[i].hasWork = err == nil
			}
		}
		return out, nil
	}
	// Objects may have had a status before the phase (native mode's are
	// kcm's HPAs): wait for the phase's own controllers to reconcile each
	// once, or settle would start while they are still starting and their
	// queues hold every object. (kcm's phase, which does not settle, has
	// no reconcile counter.)
	for settleLists > 0 && hasCounter {
		s, err := read()
		if err != nil {
			return r, err
		}
		var n float64
		for _, x := range s {
			n += x.n
		}
		if n >= float64(cfg.autoscalers) {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("only %.0f reconciles of %d objects in 10 minutes", n, cfg.autoscalers)
		}
		time.Sleep(2 * time.Second)
	}
	time.Sleep(syncPeriod)
	if settleLists > 0 {
		// A controller half a period behind (its queue holds half its
		// objects, waiting for a worker) cannot settle: its reconciles
		// come due when a worker is free, not on a beat. queue is the
		// largest replica's, and a replica holds its share of the objects.
		probe := func() (settleProbe, error) {
			var p settleProbe
			s, err := read()
			if err != nil {
				return p, err
			}
			for _, x := range s {
				p.reconciles += x.n
			}
			if queue == nil {
				return p, nil
			}
			if q, err := queue(ctx); err == nil {
				p.queued, p.share = true, float64(cfg.autoscalers)/float64(len(procs))
				p.queueSample = q
			}
			return p, nil
		}
		w, err := settle(ctx, users, auditLog, settleLists, cfg.autoscalers, probe)
		if err != nil {
			return r, err
		}
		r.settlePeriods = w.periods
		logf("%d PodMetrics lists, %.0f reconciles, %d autoscalers off the beat, a longest gap of %s and the largest queue %s in the last of %d periods waited for the autoscalers to join their namespaces' beats (settled at %d lists or fewer, %.0f reconciles or more and none off the beat): %s",
			w.lists, w.reconciles, w.offBeat, w.gap.Round(time.Millisecond), w.depths, w.periods, settleLists, onBeatReconciles(cfg.autoscalers), w.state)
	}
	w, err := quietWindow(func() (phaseResult, error) {
		return measureWindow(ctx, cfg, procs, users, auditLog, statuses, queue, read, hasCounter)
	}, maxWindows)
	if err != nil {
		return r, err
	}
	w.settlePeriods = r.settlePeriods
	return w, nil
}

// windowWorkers is workersOver for a window's processes and their
// readings at its ends: unknown unless every process's were read.
func windowWorkers(procs []proc, s0, s1 []procSample, window time.Duration) workerFigures {
	w0, w1, n := make([]workSample, len(procs)), make([]workSample, len(procs)), make([]int, len(procs))
	for i, p := range procs {
		if p.workers == 0 || !s0[i].hasWork || !s1[i].hasWork {
			return workerFigures{}
		}
		w0[i], w1[i], n[i] = s0[i].work, s1[i].work, p.workers
	}
	return workersOver(w0, w1, n, window)
}

// maxWindows is how many windows measure tries for one free of a kwok
// burst.
const maxWindows = 3

// quietWindow measures windows with window until one is free of a kwok
// burst (kwokBurst), at most limit of them: the first quiet one, or the
// last.
func quietWindow(window func() (phaseResult, error), limit int) (phaseResult, error) {
	for n := 1; ; n++ {
		w, err := window()
		if err != nil {
			return w, err
		}
		kwok := w.restPerPeriod["kwok"]
		if !kwokBurst(kwok) {
			return w, nil
		}
		if n >= limit {
			logf("kwok used %.2f CPU-s a period in %d windows in a row; keeping the last", kwok, n)
			return w, nil
		}
		logf("kwok used %.2f CPU-s a period in the window (it received its pods again): measuring the window again", kwok)
	}
}

// kwokBurst reports whether kwok's CPU per period in a window, cpu, is a
// burst that takes the machine from the side measured. kwok v0.8.0's pod
// informer sets resourceVersion=0 on its watch requests as well as its
// lists, so each time a watch ends (client-go's 5 to 10 minute timeout)
// the next one starts with every pod again, and kwok matches them all
// against its stages: about 3 CPU-s a period at 50,000 pods, where a
// quiet window has it at a few CPU-ms (it has nothing to do once the
// pods are Ready).
func kwokBurst(cpu float64) bool { return cpu >= 0.25 }

// measureWindow measures one window of cfg.periods sync periods (see
// measure); read samples the processes' CPU and counters.
func measureWindow(ctx context.Context, cfg config, procs []proc, users []string, auditLog string,
	statuses func(context.Context) (map[int32]int, int, error), queue func(context.Context) (queueSample, error),
	read func() ([]procSample, error), hasCounter bool,
) (phaseResult, error) {
	var r phaseResult
	window := time.Duration(cfg.periods) * syncPeriod
	if measured.onWindow != nil {
		measured.onWindow(ctx, window)
	}
	for _, p := range procs {
		if p.onWindow != nil {
			p.onWindow(ctx, window)
		}
	}
	probe0, probeErr := cpuProbe()
	// The scrapes of kube-apiserver's /metrics (2 to 3 MB) come before
	// the window's CPU readings and after them, outside its figures.
	gc0, gcErr := measured.apiserverGC(ctx)
	from := time.Now()
	s0, err := read()
	if err != nil {
		return r, err
	}
	api0, etcd0 := cpuOf("kube-apiserver"), cpuOf("etcd")
	rest0 := make(map[string]float64, len(restProcesses))
	for _, p := range restProcesses {
		rest0[p.name] = cpuOf(p.name)
	}
	machine0, err := harness.MachineBusySeconds()
	if err != nil {
		return r, err
	}
	// Sample the queue depth and the reconcile gap once a period (a scrape
	// costs the controller CPU too): items waiting for a worker, not for
	// their next period, mean reconciles fall behind; the gap gauge holds
	// the longest gap that ended in the last period, and the open ones.
	for end := from.Add(window); time.Now().Before(end); {
		time.Sleep(min(syncPeriod, time.Until(end)))
		if queue != nil {
			if q, err := queue(ctx); err == nil {
				r.maxQueueDepth = max(r.maxQueueDepth, q.depth)
				r.longestGap = max(r.longestGap, q.gap)
			}
		}
	}
	to := time.Now()
	s1, err := read()
	if err != nil {
		return r, err
	}
	if probe1, err := cpuProbe(); err == nil && probeErr == nil {
		logf("window's machine and control plane: the CPU probe (thread CPU time) %s at its start and %s at its end; %s",
			probe0, probe1, controlPlaneState(measured.etcdDB, auditLog))
	}
	r.apiserverPerPeriod = (cpuOf("kube-apiserver") - api0) / float64(cfg.periods)
	r.etcdPerPeriod = (cpuOf("etcd") - etcd0) / float64(cfg.periods)
	r.restPerPeriod = make(map[string]float64, len(restProcesses))
	for _, p := range restProcesses {
		r.restPerPeriod[p.name] = (cpuOf(p.name) - rest0[p.name]) / float64(cfg.periods)
	}
	machine1, err := harness.MachineBusySeconds()
	if err != nil {
		return r, err
	}
	if r.gcErr = gcErr; gcErr == nil {
		var gc1 gcSample
		if gc1, r.gcErr = measured.apiserverGC(ctx); r.gcErr == nil {
			r.apiserverGC = gcSample{cpu: (gc1.cpu - gc0.cpu) / float64(cfg.periods), cycles: gc1.cycles - gc0.cycles}
		}
	}
	r.machinePerPeriod = (machine1 - machine0) / float64(cfg.periods)
	r.from, r.to = from, to
	periods := float64(cfg.periods)
	var n, cpu, sys float64
	for i, p := range procs {
		x := replicaResult{
			cpuPerPeriod:        (s1[i].user - s0[i].user + s1[i].sys - s0[i].sys) / periods,
			reconcilesPerPeriod: (s1[i].n - s0[i].n) / periods,
		}
		if kib, err := harness.StatusKiB(p.pid, "VmRSS"); err == nil {
			x.rssMiB = kib / 1024
		}
		n += s1[i].n - s0[i].n
		for reason, v := range s1[i].writes {
			if r.statusWrites == nil {
				r.statusWrites = map[string]float64{}
			}
			r.statusWrites[reason] += v - s0[i].writes[reason]
		}
		cpu += x.cpuPerPeriod
		sys += (s1[i].sys - s0[i].sys) / periods
		r.rssMiB += x.rssMiB
		r.replicas = append(r.replicas, x)
	}
	if len(procs) == 1 {
		r.replicas = nil
	}
	r.workers = windowWorkers(procs, s0, s1, to.Sub(from))
	// The audit log is written in batches of at most 1 s.
	time.Sleep(3 * time.Second)
	c, err := countWindow(auditLog, users, from, to)
	if err != nil {
		return r, err
	}
	r.requests, r.otherRequests = c.mine, c.others
	if !hasCounter {
		n = float64(r.requests.podMetricsLists())
	}
	if r.desired, _, err = statuses(ctx); err != nil {
		return r, err
	}
	r.cpuPerPeriod, r.systemPerPeriod = cpu, sys
	r.reconcilesPerPeriod = n / periods
	return r, nil
}

// maxSettlePeriods bounds settle's wait (TIDAL_BENCH_SETTLE_PERIODS, 12):
// an autoscaler joins its beat within ten intervals (autoscaler/controller
// nextDue), and a controller that cannot keep up never settles.
var maxSettlePeriods = envInt("TIDAL_BENCH_SETTLE_PERIODS", 12)

// settleState is where settle's wait stands after a period.
type settleState int

const (
	settling settleState = iota // wait another period
	settled
	gaveUp // maxSettlePeriods waited
	behind // the queue holds half the objects or more, not draining, lateProbes times in a row
)

func (s settleState) String() string {
	if s == behind {
		return fmt.Sprintf("stopped: the queue held half the objects or more, not draining, at %d probes in a row", lateProbes)
	}
	return [...]string{"settling", "settled", "gave up"}[s]
}

// onBeatReconciles is the fewest reconciles in one period that settle
// takes for every autoscaler on its beat, of objects: on the beat each is
// reconciled exactly once a period, one still joining every 1.1 periods
// (autoscaler/controller maxDrift), so a fleet joining together falls
// about a tenth short. The 2% allowed is for the edges of the period: the
// last of a namespace's burst waits a few seconds behind the workers (up
// to 3 s at 300 autoscalers a namespace), and a reconcile near an edge
// may fall on either side of it from one period to the next.
func onBeatReconciles(objects int) float64 { return float64(objects) * 0.98 }

// lateProbes is how many probes in a row must find the queue holding half
// the objects, and not draining (lateProbe), before settle stops early.
// One is not enough: right after
// the objects' first reconciles the fleet comes due in one clump, and a
// replica that keeps up may still hold half its share for a moment (the
// 2026-12-06 10:54 run's first sharded round stopped so after one period,
// 4,023 reconciles and 1,795 keys queued, and measured the start's
// backlog: 8,307 objects a period, against 9,877 and 9,821 in the rounds
// that waited longer). A controller that cannot keep up holds them for
// good.
const lateProbes = 2

// settleVerdict judges one period of settle's wait, w: settled when its
// PodMetrics lists number want or fewer, it reconciled
// onBeatReconciles(objects) or more, and no autoscaler's next reconcile is
// off its beat; w.periods is how many periods were waited, w.late how
// many probes in a row, this one included, found the queue holding half
// the objects and not draining (behind at lateProbes).
func settleVerdict(w settleWait, want, objects int, maxPeriods int) settleState {
	switch {
	case w.lists <= want && w.reconciles >= onBeatReconciles(objects) && w.offBeat == 0:
		return settled
	case w.periods >= maxPeriods:
		return gaveUp
	case w.late >= lateProbes:
		return behind
	}
	return settling
}

// queueSample is one scrape of the controllers' queues: the largest
// replica's depth, the longest gap between two reconciles of one
// autoscaler, and how many autoscalers are off their beats (all the
// replicas'; 0 for a binary without the gauge).
type queueSample struct {
	depth   float64
	gap     time.Duration
	offBeat int
}

// settleProbe is what settle samples of the controllers at the end of
// each period: their reconciles so far (the counters' sum) and, when
// queued, their queues' scrape (its gap is only logged) and a replica's
// share of the objects.
type settleProbe struct {
	reconciles float64
	queued     bool
	share      float64
	queueSample
}

// lateProbe reports whether p, taken a period after prev, finds the
// largest replica's queue holding half its share or more and not
// draining: shorter than at prev by less than a tenth of the share. A
// controller that cannot keep up holds its backlog for good; one clearing
// the objects' first reconciles (each a status write, 10,000 at 10k) drains
// it, a tenth of its share a period or more, and settles within the wait
// (the 2026-12-07 20:11 UTC run's second sharded round stopped after 4
// periods with the status bound on and measured that backlog: a longest
// gap of 38.7 s, against 21.9 s in the round that waited 12).
func lateProbe(prev, p settleProbe) bool {
	if !p.queued || p.depth < p.share/2 {
		return false
	}
	return !prev.queued || prev.depth-p.depth < p.share/10
}

// settleWait is how settle's wait ended: its last period's lists,
// reconciles, autoscalers off the beat (at its end) and gap.
type settleWait struct {
	periods, lists, offBeat int
	reconciles              float64
	gap                     time.Duration
	// depths is the largest replica's queue at the last probe and the one
	// before, for the log.
	depths string
	// late counts the probes in a row, up to the last, that found the
	// largest replica's queue holding half its objects, not draining
	// (lateProbe).
	late  int
	state settleState
}

// settle waits, a period at a time and at most maxSettlePeriods, until
// the steady state: users' PodMetrics lists in the last period number
// want or fewer (every namespace's autoscalers come due together), the
// controllers reconciled about every one of objects in it
// (onBeatReconciles), and none has an autoscaler off its namespace's beat
// (their own gauge, tidal_autoscaler_autoscalers_off_beat). Lists alone
// are not enough: native mode's autoscalers start together, on kcm's
// HPAs, so one list a namespace serves them from the first period while
// they still drift towards their beats a tenth of a period per interval
// (a window of the 2026-11-30 run measured 786 reconciles a period of
// 1,000 so). Nor is the count: a fleet drifting together comes round in
// one clump every 1.1 periods, which a window of one period holds whole
// most of the time (a native window of the 2026-12-01 05:01 run settled
// so in one period and measured 930 reconciles a period). Nor is the longest gap, which this
// wait used before: on the beat it is a period plus the wait for a place
// in the namespace's burst, up to 18 s at 300 autoscalers a namespace,
// more than a joining autoscaler's 16.5 s (half of the 3k row's windows
// gave up on it, 2026-12-01). The periods are counted from one start, so
// that each sample of the counters is a whole period after the one before
// it, whatever the audit log's reading takes (and the count is scaled to
// a period should a reading take longer than one). It stops early once
// the queue has held half the objects, not draining, at lateProbes probes
// in a row (lateProbe): a controller that cannot keep up never settles.
func settle(ctx context.Context, users []string, auditLog string, want, objects int, probe func() (settleProbe, error)) (settleWait, error) {
	start := time.Now()
	last, err := probe()
	if err != nil {
		return settleWait{}, err
	}
	lastAt := time.Now()
	late := 0
	for periods := 1; ; periods++ {
		from, to := start.Add(time.Duration(periods-1)*syncPeriod), start.Add(time.Duration(periods)*syncPeriod)
		select {
		case <-ctx.Done():
			return settleWait{periods: periods}, ctx.Err()
		case <-time.After(time.Until(to)):
		}
		p, err := probe()
		if err != nil {
			return settleWait{periods: periods}, err
		}
		// Per period, should a slow read of the audit log have made this
		// sample late.
		at := time.Now()
		if lateProbe(last, p) {
			late++
		} else {
			late = 0
		}
		w := settleWait{periods: periods, reconciles: (p.reconciles - last.reconciles) * float64(syncPeriod) / float64(at.Sub(lastAt)), offBeat: p.offBeat, gap: p.gap, late: late}
		if p.queued {
			w.depths = fmt.Sprintf("%.0f keys (%.0f a period before)", p.depth, last.depth)
		} else {
			w.depths = "unknown"
		}
		last, lastAt = p, at
		// The audit log is written in batches of at most 1 s.
		time.Sleep(2 * time.Second)
		c, err := countRequests(auditLog, users, from, to)
		if err != nil {
			return w, err
		}
		w.lists = c.podMetricsLists()
		if w.state = settleVerdict(w, want, objects, maxSettlePeriods); w.state != settling {
			return w, nil
		}
	}
}

// cpuOf is the CPU seconds so far of the harness process name; 0 when
// unknown.
func cpuOf(name string) float64 {
	pid, ok := measured.pids[name]
	if !ok {
		return 0
	}
	v, err := harness.CPUSeconds(pid)
	if err != nil {
		return 0
	}
	return v
}

// runTidal runs the tidal phases: one `tidal autoscaler` with leader
// election (shards 0), or shards replicas with --sharding, each named
// tidal-sharded-N (the profile, if asked for, is then the first's).
func runTidal(ctx context.Context, b *testing.B, h *harness.Harness, bin string, cfg config, targets []target, auditLog string, tp tidalPhase) (phaseResult, error) {
	shards := tp.shards
	root, err := harness.RepoRoot()
	if err != nil {
		return phaseResult{}, err
	}
	if _, err := h.ApplyCRDs(ctx, filepath.Join(root, "manifests", "crd")); err != nil {
		return phaseResult{}, err
	}
	args := append(append(qpsArgs(cfg), syncPeriodArgs()...), tp.args...)
	profile := os.Getenv("TIDAL_BENCH_PROFILE")
	if profile != "" {
		args = append(args, "--profiling")
	}
	var replicas []*harness.Autoscaler
	stop := func() {
		for _, a := range replicas {
			_ = a.Process.Stop(10 * time.Second)
		}
	}
	defer stop()
	objs := tp.objects
	if tp.native {
		// Tidal is then the HPAs' only writer, as the docs ask.
		startKCM, err := h.StopHPAController()
		if err != nil {
			return phaseResult{}, err
		}
		defer func() {
			if err := startKCM(ctx); err != nil {
				b.Errorf("start the HPA controller again: %v", err)
			}
		}()
	}
	for i := range max(shards, 1) {
		name, sharding := "", shards > 0
		if sharding {
			name = fmt.Sprintf("tidal-sharded-%d", i+1)
			if tp.native {
				name = fmt.Sprintf("tidal-native-sharded-%d", i+1)
			}
		}
		var a *harness.Autoscaler
		var err error
		if tp.native {
			// Its own service account: the crd-mode phases'
			// tidal-autoscaler ClusterRole has no rights on HPAs, and a
			// second start keeps it.
			a, err = h.StartNativeAutoscaler(ctx, harness.NativeAutoscalerOptions{Binary: bin, Args: args, ServiceAccount: nativeServiceAccount, Name: name, Sharding: sharding})
		} else {
			a, err = h.StartAutoscaler(ctx, harness.AutoscalerOptions{Binary: bin, Args: args, Name: name, Sharding: sharding})
		}
		if err != nil {
			return phaseResult{}, err
		}
		replicas = append(replicas, a)
	}
	a := replicas[0]
	// /metrics and /debug/pprof/ are on the secure port, authorized by
	// the cluster: the admin's client certificate.
	scraper, err := adminClient(h)
	if err != nil {
		return phaseResult{}, err
	}
	if err := objs.create(ctx, targets); err != nil {
		return phaseResult{}, err
	}
	statuses := objs.statuses
	// The largest replica's queue, the longest time an autoscaler waited
	// between two reconciles (its own gauge, which holds every gap that
	// ended in the last period and every open one), and the autoscalers
	// off their beats in all the replicas.
	queue := func(ctx context.Context) (queueSample, error) {
		var q queueSample
		for _, a := range replicas {
			v, err := scrapeSums(ctx, scraper, a.MetricsURL("/metrics"), "workqueue_depth", "tidal_autoscaler_reconcile_gap_max_seconds", "tidal_autoscaler_autoscalers_off_beat")
			if err != nil && !errors.Is(err, errNoSeries) {
				return queueSample{}, err
			}
			q.depth, q.gap = max(q.depth, v[0]), max(q.gap, time.Duration(v[1]*float64(time.Second)))
			q.offBeat += int(v[2])
		}
		return q, nil
	}
	// One scrape a reading: the reconciles counter and the work queue's
	// totals.
	reconciles := func(a *harness.Autoscaler) func(context.Context) (counters, error) {
		return func(ctx context.Context) (counters, error) {
			url := a.MetricsURL("/metrics")
			body, err := httpGetWith(ctx, scraper, url)
			if err != nil {
				return counters{}, err
			}
			var c counters
			v, err := sumsOf(body, url, "tidal_autoscaler_reconciliations_total")
			if shards > 0 && errors.Is(err, errNoSeries) {
				// A replica whose share is empty (a handful of objects,
				// the smoke run's) has reconciled nothing.
				err = nil
			} else if err == nil {
				c.n = v[0]
			}
			if err != nil {
				return c, err
			}
			if c.writes, err = byLabel(body, url, "tidal_autoscaler_status_writes_total", "reason"); err != nil {
				return c, err
			}
			// A queue that has not yet handed out a key has no totals:
			// the window's figures are then unknown, not an error.
			c.work, err = parseWork(body, url, source.ComponentName)
			c.hasWork = err == nil
			return c, nil
		}
	}
	procs := make([]proc, len(replicas))
	for i, a := range replicas {
		procs[i] = proc{pid: a.Process.PID(), counter: reconciles(a)}
		if n, err := workersOf(procs[i].pid); err == nil {
			procs[i].workers = n
		}
	}
	if profile != "" {
		// Profile all of the window (one period alone holds too few
		// samples to tell small costs apart).
		// The heap's allocations are read at both ends of the window too
		// (PROFILE.allocs-start, PROFILE.allocs): go tool pprof -base
		// shows the window's.
		get := func(path, file string) {
			data, err := httpGetWith(ctx, scraper, a.MetricsURL(path))
			if err == nil {
				err = os.WriteFile(file, []byte(data), 0o644)
			}
			if err != nil {
				logf("profile %s: %v", file, err)
			}
		}
		procs[0].onWindow = func(ctx context.Context, window time.Duration) {
			get("/debug/pprof/allocs", profile+".allocs-start")
			go func() {
				get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(window.Seconds())), profile)
				get("/debug/pprof/allocs", profile+".allocs")
			}()
		}
	}
	// One PodMetrics list per namespace and replica and period once every
	// autoscaler is on its namespace's beat.
	user := tidalUser
	if tp.native {
		user = harness.ServiceAccountIdentity(a.Namespace, nativeServiceAccount).User
	}
	r, err := measure(ctx, cfg, procs, []string{user}, auditLog, statuses, queue, cfg.namespaces*len(replicas))
	if err != nil {
		return r, err
	}
	if shards > 0 {
		// A replica deletes its Lease when it stops cleanly; one left
		// behind would hold its share away from the next sharded phase's
		// replicas until it expired.
		stop()
		leases := h.Client.CoordinationV1().Leases(a.Namespace)
		if err := harness.WaitReady(ctx, nil, "the replicas' shard Leases deleted", time.Minute, func(ctx context.Context) error {
			l, err := leases.List(ctx, metav1.ListOptions{LabelSelector: shard.GroupLabel})
			if err == nil && len(l.Items) > 0 {
				err = fmt.Errorf("%d left, %s first", len(l.Items), l.Items[0].Name)
			}
			return err
		}); err != nil {
			return r, err
		}
	}
	// The next tidal phase (baseline) starts from no autoscalers again.
	return r, objs.deleteAll(ctx, cfg)
}

func runKCM(ctx context.Context, h *harness.Harness, admin kubernetes.Interface, cfg config, targets []target, auditLog string) (phaseResult, error) {
	pid, ok := h.PIDs()[harness.HPAControllerProcess]
	if !ok {
		return phaseResult{}, fmt.Errorf("no HPA controller manager in the harness")
	}
	objs := hpaFleet(admin)
	if err := objs.create(ctx, targets); err != nil {
		return phaseResult{}, err
	}
	statuses := objs.statuses
	p := proc{pid: pid}
	get, err := kcmGetter(h)
	if err != nil {
		return phaseResult{}, err
	}
	// Its HPA work queue, as tidal's is read: the workers' busy time and
	// the queue's depth (kcm's resync enqueues every HPA at once).
	p.work = func(ctx context.Context) (workSample, error) {
		page, url, err := get(ctx, "/metrics")
		if err != nil {
			return workSample{}, err
		}
		return parseWork(page, url, kcmQueue)
	}
	if n, err := workersOf(pid); err == nil {
		p.workers = n
	}
	queue := func(ctx context.Context) (queueSample, error) {
		page, url, err := get(ctx, "/metrics")
		if err != nil {
			return queueSample{}, err
		}
		v, err := sumsOf(page, url, `workqueue_depth{name="`+kcmQueue+`"}`)
		if err != nil {
			return queueSample{}, err
		}
		return queueSample{depth: v[0]}, nil
	}
	if profile := os.Getenv("TIDAL_BENCH_KCM_PROFILE"); profile != "" {
		p.onWindow = func(ctx context.Context, _ time.Duration) {
			go func() {
				if err := kcmProfile(ctx, get, profile); err != nil {
					logf("kcm profile: %v", err)
				}
			}()
		}
	}
	r, err := measure(ctx, cfg, []proc{p}, []string{kcmUser}, auditLog, statuses, queue, 0)
	if err != nil {
		return r, err
	}
	// Its gap is read from the audit log (the queue has none).
	r.longestGap, r.visited, err = visitGaps(auditLog, kcmUser, "get", "deployments.apps/scale", r.from, r.to, cfg.autoscalers)
	if err != nil {
		return r, err
	}
	// The next kcm phase starts from no HPAs again, as tidal's does.
	return r, objs.deleteAll(ctx, cfg)
}

// kcmQueue is the name of kube-controller-manager's HPA work queue in its
// workqueue_* metrics.
const kcmQueue = "horizontalpodautoscaler"

// kcmGetter returns a reader of a path on the harness's HPA controller
// manager's secure port, as the admin (its serving certificate is
// self-signed): the body, and the URL read.
func kcmGetter(h *harness.Harness) (func(ctx context.Context, path string) (body, url string, err error), error) {
	port, err := h.SecurePort(harness.HPAControllerProcess)
	if err != nil {
		return nil, err
	}
	client, err := adminClient(h)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, path string) (string, string, error) {
		url := "https://127.0.0.1:" + port + path
		body, err := httpGetWith(ctx, client, url)
		return body, url, err
	}, nil
}

// kcmProfile writes a CPU profile of one sync period of the HPA
// controller manager that get reads (kcmGetter).
func kcmProfile(ctx context.Context, get func(context.Context, string) (string, string, error), file string) error {
	data, _, err := get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(syncPeriod.Seconds())))
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(data), 0o644)
}

// scrapeSums sums every series of each of several metrics, names, on a
// Prometheus text page at url, from one scrape: a scrape of the
// autoscaler's per-object series costs it CPU (about 0.1 CPU-s at 1,000
// autoscalers), which the window must not be full of. A metric with no
// series yet is an error wrapping errNoSeries.
func scrapeSums(ctx context.Context, client *http.Client, url string, names ...string) ([]float64, error) {
	body, err := httpGetWith(ctx, client, url)
	if err != nil {
		return nil, err
	}
	return sumsOf(body, url, names...)
}

// adminClient presents the harness admin's client certificate to the
// autoscaler's secure port, whose serving certificate is self-signed.
func adminClient(h *harness.Harness) (*http.Client, error) {
	admin := rest.CopyConfig(h.Admin)
	admin.TLSClientConfig.CAData, admin.TLSClientConfig.CAFile = nil, ""
	admin.TLSClientConfig.Insecure = true
	tr, err := rest.TransportFor(admin)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr}, nil
}

// httpGetWith GETs url with client and returns the body; any status but
// 200 is an error.
func httpGetWith(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}
