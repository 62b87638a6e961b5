//go:build race

package engine

// raceEnabled trims the property tests, which the race detector slows
// down tenfold without finding more.
const raceEnabled = true
