package topics

import "github.com/vibemq/broker/pebblestore"

// LogDir describes the one log directory of this broker: the data
// directory that holds the Pebble database, and its filesystem's size.
type LogDir struct {
	// Path is the data directory as configured.
	Path string
	// TotalBytes and UsableBytes are the filesystem's size and the bytes
	// the broker may still write (statfs f_bavail); -1 when the
	// filesystem could not be measured (Kafka's answer for "unknown").
	TotalBytes, UsableBytes int64
}

// LogDir measures the data directory now. Every partition of every topic
// lives in it (one Pebble database per data directory).
func (m *Manager) LogDir() LogDir {
	d := LogDir{Path: m.store.Dir(), TotalBytes: -1, UsableBytes: -1}
	if r, err := pebblestore.StatfsProbe(d.Path); err == nil {
		d.TotalBytes, d.UsableBytes = r.Total, r.Free
	}
	return d
}
