package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// job is one `go test -bench` process; several rows may read one job's
// samples, and jobs with the same package, pattern and environment (the
// smoke run's, whose sizes coincide) run once.
type job struct {
	id      string
	pkg     string
	bench   string
	env     map[string]string
	timeout time.Duration
}

// key identifies what the job runs.
func (j job) key() string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(j.env)) {
		env = append(env, k+"="+j.env[k])
	}
	return j.pkg + " " + j.bench + " " + strings.Join(env, " ")
}

// sizes are the figures the rows are defined at; the smoke run's are tiny.
type sizes struct {
	pods, clients, requests int
	duration                time.Duration
	// discovery: names x label sets, the two rows' sizes.
	discSmall, discLarge [2]int
	// fleet: autoscalers per row, pods per Deployment, namespaces,
	// periods, sync period.
	fleet1k, fleet3k, fleet10k  int
	fleetPods, fleetNS, periods int
	// settlePeriods bounds the fleet phases' wait for the autoscalers to
	// join their namespaces' beats before the window (a check that the
	// wait works is all the smoke run needs).
	settlePeriods int
	syncPeriod    time.Duration
	// qps is both controllers' client limit in the fleet rows.
	qps int
	// shards is the replicas of the sharded fleet row.
	shards                       int
	adapterTimeout, fleetTimeout time.Duration
	// closed loop: replicas before and after the load step, the rule's
	// rate window (the sync period is syncPeriod's).
	loopFrom, loopTo int
	rateWindow       time.Duration
	loopTimeout      time.Duration
}

func fullSizes() sizes {
	return sizes{
		pods: 100, clients: 32, requests: 5000, duration: 30 * time.Second,
		discSmall: [2]int{1000, 100}, discLarge: [2]int{10000, 100},
		fleet1k: 1000, fleet3k: 3000, fleet10k: 10000, fleetPods: 5, fleetNS: 10, periods: 3, settlePeriods: 12,
		syncPeriod: 15 * time.Second, qps: 200, shards: 3,
		adapterTimeout: 90 * time.Minute, fleetTimeout: 180 * time.Minute,
		loopFrom: 3, loopTo: 6, rateWindow: time.Minute, loopTimeout: 60 * time.Minute,
	}
}

// smokeSizes check that every row runs end to end, never its figures:
// a few pods and requests, a handful of autoscalers for one short period,
// a closed loop stepping from 1 to 2 replicas over a 5 s rate window.
// Rows of the same shape then share a job (1k, 3k and 10k autoscalers
// are all 3 here).
func smokeSizes() sizes {
	return sizes{
		pods: 3, clients: 2, requests: 300, duration: 5 * time.Second,
		discSmall: [2]int{10, 5}, discLarge: [2]int{20, 5},
		fleet1k: 3, fleet3k: 3, fleet10k: 3, fleetPods: 1, fleetNS: 1, periods: 2, settlePeriods: 1,
		syncPeriod: 3 * time.Second, qps: 200, shards: 3,
		adapterTimeout: 6 * time.Minute, fleetTimeout: 6 * time.Minute,
		loopFrom: 1, loopTo: 2, rateWindow: 5 * time.Second, loopTimeout: 6 * time.Minute,
	}
}

// peerArgs tune prometheus-adapter as the comparison asks: its client's
// 5 QPS limit (it lists pods for every pods/* request) raised out of the
// way.
const peerArgs = "--client-qps=1000 --client-burst=2000"

// plan is every job of a run.
type plan struct {
	sz     sizes
	rounds int
	jobs   map[string]job
}

func newPlan(sz sizes, rounds int, peer, noop string) plan {
	p := plan{sz: sz, rounds: rounds, jobs: map[string]job{}}
	adapterEnv := map[string]string{
		"TIDAL_BENCH_PODS": strconv.Itoa(sz.pods), "TIDAL_BENCH_CLIENTS": strconv.Itoa(sz.clients),
		"TIDAL_BENCH_REQUESTS": strconv.Itoa(sz.requests), "TIDAL_BENCH_DURATION": sz.duration.String(),
		"TIDAL_BENCH_ROUNDS": strconv.Itoa(rounds), "TIDAL_BENCH_ROUTES": "aggregator,direct",
		"TIDAL_BENCH_PEER": peer, "TIDAL_BENCH_PEER_ARGS": peerArgs, "TIDAL_BENCH_NOOP": noop,
	}
	// Both request benchmarks in one process: they share the harness and
	// the pods, each round of each is A B C at both routes.
	p.add(job{id: "adapter-requests", pkg: "./test/bench/adapter", bench: "^(BenchmarkPodsCustomMetric|BenchmarkPodMetrics)$", env: adapterEnv, timeout: sz.adapterTimeout})
	p.add(job{id: "discovery", pkg: "./test/bench/adapter", bench: "^BenchmarkDiscoveryMemory$", env: map[string]string{
		"TIDAL_BENCH_DISCOVERY_SIZES": fmt.Sprintf("%dx%d,%dx%d", sz.discSmall[0], sz.discSmall[1], sz.discLarge[0], sz.discLarge[1]),
		"TIDAL_BENCH_ROUNDS":          strconv.Itoa(rounds), "TIDAL_BENCH_PEER": peer,
	}, timeout: sz.adapterTimeout})
	fleet := func(id string, autoscalers int, usage string, sides ...string) {
		var phases []string
		for range rounds {
			phases = append(phases, sides...)
		}
		env := map[string]string{
			"TIDAL_BENCH_AUTOSCALERS": strconv.Itoa(autoscalers), "TIDAL_BENCH_PODS": strconv.Itoa(sz.fleetPods),
			"TIDAL_BENCH_NAMESPACES": strconv.Itoa(sz.fleetNS), "TIDAL_BENCH_PERIODS": strconv.Itoa(sz.periods),
			"TIDAL_BENCH_SYNC_PERIOD": sz.syncPeriod.String(), "TIDAL_BENCH_QPS": strconv.Itoa(sz.qps),
			"TIDAL_BENCH_USAGE": usage, "TIDAL_BENCH_PHASES": strings.Join(phases, ","),
			"TIDAL_BENCH_SETTLE_PERIODS": strconv.Itoa(sz.settlePeriods),
		}
		if slices.Contains(sides, sharded) || slices.Contains(sides, boundedSharded) {
			env["TIDAL_BENCH_SHARDS"] = strconv.Itoa(sz.shards)
		}
		p.add(job{id: id, pkg: "./test/bench/autoscaler", bench: "^BenchmarkReconcileFleet$", env: env, timeout: sz.fleetTimeout})
	}
	// Every moving row runs movingSides; tidal-native's status writes
	// are protobuf HPAs, as kcm's, and cost kube-apiserver the same.
	moving := movingSides
	// The sharded rows' replicas beside one replica, usage moving, without
	// and with the status bound. At the smoke sizes every moving row has
	// the same autoscalers, so the sharded phases join their job (one job,
	// two more phases) instead of starting harnesses of their own.
	if sz.fleet1k == sz.fleet10k && sz.fleet3k == sz.fleet10k {
		moving = slices.Insert(slices.Clone(movingSides), 2, sharded)
		moving = slices.Insert(moving, slices.Index(moving, bounded)+1, boundedSharded)
		fleet("fleet-10k-sharded", sz.fleet10k, "moving", moving...)
		fleet("fleet-10k-sharded-bounded", sz.fleet10k, "moving", moving...)
	} else {
		fleet("fleet-10k-sharded", sz.fleet10k, "moving", sharded, tidal)
		fleet("fleet-10k-sharded-bounded", sz.fleet10k, "moving", boundedSharded, bounded)
	}
	fleet("fleet-1k-moving", sz.fleet1k, "moving", moving...)
	fleet("fleet-10k-steady", sz.fleet10k, "steady", "tidal", "kcm")
	// Tidal's CPU per autoscaler at 1k with usage steady, the 10k
	// steady row's reference; the smoke run's is the same job as 10k's.
	if sz.fleet1k == sz.fleet10k {
		fleet("fleet-1k-steady", sz.fleet1k, "steady", "tidal", "kcm")
	} else {
		fleet("fleet-1k-steady", sz.fleet1k, "steady", "tidal")
	}
	fleet("fleet-3k-moving", sz.fleet3k, "moving", moving...)
	fleet("fleet-10k-moving", sz.fleet10k, "moving", moving...)
	// The closed loop's sides take turns inside the benchmark (only one
	// adapter can own custom.metrics.k8s.io at a time): tidal, upstream,
	// -rounds times.
	p.add(job{id: "closed-loop", pkg: "./test/bench/closedloop", bench: "^BenchmarkClosedLoop$", env: map[string]string{
		"TIDAL_BENCH_FROM": strconv.Itoa(sz.loopFrom), "TIDAL_BENCH_TO": strconv.Itoa(sz.loopTo),
		"TIDAL_BENCH_RATE_WINDOW": sz.rateWindow.String(), "TIDAL_BENCH_SYNC_PERIOD": sz.syncPeriod.String(),
		"TIDAL_BENCH_ROUNDS": strconv.Itoa(rounds), "TIDAL_BENCH_PEER": peer,
	}, timeout: sz.loopTimeout})
	return p
}

func (p *plan) add(j job) { p.jobs[j.id] = j }
