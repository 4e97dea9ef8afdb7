//go:build race

package prom_test

// raceEnabled: the test binary runs with the race detector, whose runtime
// changes what tests of allocation and heap size measure.
const raceEnabled = true
