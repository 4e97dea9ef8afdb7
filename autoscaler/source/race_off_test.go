//go:build !race

package source

// raceEnabled: see race_on_test.go.
const raceEnabled = false
