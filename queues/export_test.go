package queues

// RaceEnabled tells the external test package (queues_test) whether the
// race detector is on: its slowest tests do less under it and run in full
// without it (.ci/run runs them again so).
const RaceEnabled = raceEnabled
