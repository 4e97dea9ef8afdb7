package sandbox

import (
	"math"
	"time"
)

// Phase is one part of the demand curve: demand goes linearly from From to
// To (requests per second) over the phase.
type Phase struct {
	Name string
	// Frac is the phase's share of the whole curve's duration.
	Frac     float64
	From, To float64
	// BatchCPU is background work (cores) shared by the ready pods that
	// no request counter shows, such as a nightly batch.
	BatchCPU float64
}

// DefaultCurve is the demo's demand, one phase for each metric to lead:
// the ramp grows requests per pod above their target before CPU notices
// (requests per second leads); the batch adds CPU work that serves no
// request (CPU leads); the burst is more than the pods can serve, so jobs
// queue (the queue leads); the quiet tail shows the scale-down.
var DefaultCurve = []Phase{
	{Name: "baseline", Frac: 0.08, From: 100, To: 100},
	{Name: "ramp", Frac: 0.22, From: 100, To: 480},
	{Name: "batch", Frac: 0.15, From: 300, To: 300, BatchCPU: 1.2},
	{Name: "burst", Frac: 0.12, From: 1900, To: 1900},
	{Name: "quiet", Frac: 0.43, From: 40, To: 40},
}

// Curve is a demand curve stretched over a duration.
type Curve struct {
	Phases   []Phase
	Duration time.Duration
}

// At returns the demand and the phase name at t since the start; past the
// end it stays at the last phase's final demand.
func (c Curve) At(t time.Duration) (float64, string) {
	d, p := c.PhaseAt(t)
	return d, p.Name
}

// PhaseAt returns the demand and the phase at t since the start.
func (c Curve) PhaseAt(t time.Duration) (float64, Phase) {
	total := 0.0
	for _, p := range c.Phases {
		total += p.Frac
	}
	start := time.Duration(0)
	for _, p := range c.Phases {
		d := time.Duration(float64(c.Duration) * p.Frac / total)
		if t < start+d {
			f := float64(t-start) / float64(d)
			return p.From + (p.To-p.From)*f, p
		}
		start += d
	}
	last := c.Phases[len(c.Phases)-1]
	return last.To, last
}

// LoadChange is a moment the load rises: the start of a phase whose
// demand or batch work is above that just before it.
type LoadChange struct {
	At     time.Duration
	Name   string
	From   float64
	ToPeak float64
	// Batch is the phase's batch work (cores) when it rose.
	Batch float64
}

// Increases lists the curve's load increases in time order.
func (c Curve) Increases() []LoadChange {
	total := 0.0
	for _, p := range c.Phases {
		total += p.Frac
	}
	var out []LoadChange
	start := time.Duration(0)
	prev, prevBatch := math.NaN(), 0.0
	for _, p := range c.Phases {
		d := time.Duration(float64(c.Duration) * p.Frac / total)
		if !math.IsNaN(prev) && (math.Max(p.From, p.To) > prev+1e-9 || p.BatchCPU > prevBatch+1e-9) {
			lc := LoadChange{At: start, Name: p.Name, From: prev, ToPeak: math.Max(p.From, p.To)}
			if p.BatchCPU > prevBatch {
				lc.Batch = p.BatchCPU
			}
			out = append(out, lc)
		}
		prev, prevBatch = p.To, p.BatchCPU
		start += d
	}
	return out
}
