//go:build !race

package raceflag

// Enabled: built with -race.
const Enabled = false
