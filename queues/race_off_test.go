//go:build !race

package queues

// raceEnabled is true under -race, which changes allocation counts
// (testing.AllocsPerRun): allocation assertions skip themselves.
const raceEnabled = false
