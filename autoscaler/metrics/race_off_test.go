//go:build !race

package metrics

// raceEnabled: see race_on_test.go.
const raceEnabled = false
