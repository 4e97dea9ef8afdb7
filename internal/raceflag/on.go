//go:build race

// Package raceflag tells a test whether its binary runs with the race
// detector, whose runtime allocates differently (its sync.Pool, for one,
// drops a quarter of what is put back at random), so that tests of
// allocation counts and heap size skip their bounds under it.
package raceflag

// Enabled: built with -race.
const Enabled = true
