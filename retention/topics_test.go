package retention

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

func appendAt(t *testing.T, tm *topics.Manager, p *topics.Partition, ts int64, kv ...string) {
	t.Helper()
	var recs []topics.Record
	for i := 0; i+1 < len(kv); i += 2 {
		recs = append(recs, topics.Record{OffsetDelta: int32(len(recs)), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	a := &topics.Append{Partition: p, Batch: batch}
	if err := tm.Append([]*topics.Append{a}, time.UnixMilli(ts)).Wait(); err != nil || a.Err != nil {
		t.Fatalf("append: %v %v", err, a.Err)
	}
}

// metricValue returns the value of the series name with the given labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			// Getters of the absent kinds return zero.
			return m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestTopicTasks runs the retention and compaction loops on a store whose
// records are far older than the injected clock: nothing waits for time to
// pass, only for the loops' short intervals.
func TestTopicTasks(t *testing.T) {
	store, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := tm.CreateTopic("old", 1, map[string]string{"retention.ms": "1000", "segment.ms": "10"}, false)
	table, _ := tm.CreateTopic("table", 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "10", "min.cleanable.dirty.ratio": "0.01"}, false)
	oldP, _ := old.Partition(0)
	tableP, _ := table.Partition(0)
	for i := int64(0); i < 5; i++ {
		appendAt(t, tm, oldP, 1000+i*100, "k", "v")
		appendAt(t, tm, tableP, 1000+i*100, "k", "v", "other", "v")
	}

	clock := time.UnixMilli(10_000_000)
	r := New(zerolog.Nop(), func() time.Time { return clock })
	reg := prometheus.NewRegistry()
	AddTopicTasks(r, tm, TopicTasksConfig{RetentionCheckInterval: 5 * time.Millisecond, CleanerBackoff: 5 * time.Millisecond, Registerer: reg})
	r.Start()
	defer r.Stop()

	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, _ := metricValue(t, reg, "broker_log_compaction_runs_total", nil)
		if oldP.LogStartOffset() == 5 && runs >= 1 && tableP.Stats().Records == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loops did not run: log start %d, compaction runs %v, table records %d", oldP.LogStartOffset(), runs, tableP.Stats().Records)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.Stop()
	for _, c := range []struct {
		name   string
		labels map[string]string
		check  func(float64) bool
	}{
		{"broker_partition_log_start_offset", map[string]string{"topic": "old", "partition": "0"}, func(v float64) bool { return v == 5 }},
		{"broker_partition_log_end_offset", map[string]string{"topic": "old", "partition": "0"}, func(v float64) bool { return v == 5 }},
		{"broker_partition_bytes", map[string]string{"topic": "old"}, func(v float64) bool { return v == 0 }},
		{"broker_partition_records", map[string]string{"topic": "table"}, func(v float64) bool { return v == 4 }},
		{"broker_log_reclaimed_bytes_total", map[string]string{"reason": "retention"}, func(v float64) bool { return v > 0 }},
		{"broker_log_reclaimed_bytes_total", map[string]string{"reason": "compaction"}, func(v float64) bool { return v > 0 }},
		{"broker_log_retention_deleted_segments_total", nil, func(v float64) bool { return v == 5 }},
		{"broker_log_compaction_duration_seconds", nil, func(v float64) bool { return v >= 1 }},
		{"broker_log_compaction_read_bytes_total", nil, func(v float64) bool { return v > 0 }},
	} {
		v, ok := metricValue(t, reg, c.name, c.labels)
		if !ok || !c.check(v) {
			t.Errorf("%s%v = %v (present %v)", c.name, c.labels, v, ok)
		}
	}
}
