//go:build !race

package prom_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
