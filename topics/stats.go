package topics

// LogStats counts what the partition logs hold, for storage statistics
// (GET /v1/admin/storage, `broker storage stats`).
type LogStats struct {
	Topics     int
	Partitions int
	// Messages counts the records of every partition log (queues, dead
	// letters and event stores included): the offset span between each
	// log start and high watermark.
	Messages int64
}

// LogStats counts the topics, partitions and records of every log.
func (m *Manager) LogStats() LogStats {
	var out LogStats
	for _, t := range m.Topics() {
		out.Topics++
		for _, p := range t.Partitions() {
			out.Partitions++
			out.Messages += p.HighWatermark() - p.LogStartOffset()
		}
	}
	return out
}
