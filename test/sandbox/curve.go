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
}

// DefaultCurve is the demo's demand: a steady baseline, a ramp, a spike,
// a drop back and a quiet tail long enough to show a scale-down.
var DefaultCurve = []Phase{
	{Name: "baseline", Frac: 0.10, From: 100, To: 100},
	{Name: "ramp", Frac: 0.25, From: 100, To: 400},
	{Name: "spike", Frac: 0.15, From: 900, To: 900},
	{Name: "cool-down", Frac: 0.10, From: 300, To: 300},
	{Name: "quiet", Frac: 0.40, From: 40, To: 40},
}

// Curve is a demand curve stretched over a duration.
type Curve struct {
	Phases   []Phase
	Duration time.Duration
}

// At returns the demand and the phase name at t since the start; past the
// end it stays at the last phase's final demand.
func (c Curve) At(t time.Duration) (float64, string) {
	total := 0.0
	for _, p := range c.Phases {
		total += p.Frac
	}
	start := time.Duration(0)
	for _, p := range c.Phases {
		d := time.Duration(float64(c.Duration) * p.Frac / total)
		if t < start+d {
			f := float64(t-start) / float64(d)
			return p.From + (p.To-p.From)*f, p.Name
		}
		start += d
	}
	last := c.Phases[len(c.Phases)-1]
	return last.To, last.Name
}

// LoadChange is a moment the demand rises: the start of a phase whose
// demand is above the demand just before it.
type LoadChange struct {
	At     time.Duration
	Name   string
	From   float64
	ToPeak float64
}

// Increases lists the curve's load increases in time order.
func (c Curve) Increases() []LoadChange {
	total := 0.0
	for _, p := range c.Phases {
		total += p.Frac
	}
	var out []LoadChange
	start := time.Duration(0)
	prev := math.NaN()
	for _, p := range c.Phases {
		d := time.Duration(float64(c.Duration) * p.Frac / total)
		if !math.IsNaN(prev) && math.Max(p.From, p.To) > prev+1e-9 {
			out = append(out, LoadChange{At: start, Name: p.Name, From: prev, ToPeak: math.Max(p.From, p.To)})
		}
		prev = p.To
		start += d
	}
	return out
}
