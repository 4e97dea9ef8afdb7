//go:build race

package source

// raceEnabled: the test binary runs with the race detector, under which
// sync.Pool drops a quarter of what is put in it at random.
const raceEnabled = true
