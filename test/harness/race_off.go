//go:build !race

package harness

// raceEnabled reports whether the tests run with -race.
const raceEnabled = false
