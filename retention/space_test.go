package retention

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

func openGuardedStore(t *testing.T, free *atomic.Int64) *pebblestore.Store {
	t.Helper()
	store, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20,
		FreeSpaceMin: 64 << 20, FreeSpaceProbe: func(string) (pebblestore.SpaceReading, error) {
			return pebblestore.SpaceReading{Free: free.Load(), Total: 1 << 30}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// TestSpaceTaskProbesAndReports: the periodic task measures the disk, so
// the guard turns low and back without any write, and /metrics shows it.
func TestSpaceTaskProbesAndReports(t *testing.T) {
	var free atomic.Int64
	free.Store(512 << 20)
	store := openGuardedStore(t, &free)
	reg := prometheus.NewRegistry()
	task := SpaceTask(store.Space(), reg, 0)
	if task.Interval != SpaceProbeInterval {
		t.Fatalf("interval %v", task.Interval)
	}
	free.Store(1 << 20)
	task.Run(time.Now())
	if !store.Space().Low() {
		t.Fatal("not low after the task measured 1 MiB free")
	}
	_ = store.Space().Check() // one refusal
	for name, want := range map[string]float64{
		"broker_disk_free_bytes":           1 << 20,
		"broker_disk_total_bytes":          1 << 30,
		"broker_disk_free_min_bytes":       64 << 20,
		"broker_disk_resume_bytes":         80 << 20,
		"broker_disk_low":                  1,
		"broker_disk_refused_writes_total": 1,
	} {
		if v, ok := metricValue(t, reg, name, nil); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	free.Store(80 << 20)
	task.Run(time.Now())
	if v, _ := metricValue(t, reg, "broker_disk_low", nil); v != 0 || store.Space().Low() {
		t.Fatalf("broker_disk_low %v after space returned", v)
	}
}

// TestCompactionPausedWhileDiskLow: compaction writes the records it keeps
// before the old ones' space returns, so it waits while the disk is low;
// retention, which only deletes, runs.
func TestCompactionPausedWhileDiskLow(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 20)
	store := openGuardedStore(t, &free)
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := tm.CreateTopic("old", 1, map[string]string{"retention.ms": "1000", "segment.ms": "10"}, false)
	table, _ := tm.CreateTopic("table", 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "10", "min.cleanable.dirty.ratio": "0.01"}, false)
	oldP, _ := old.Partition(0)
	tableP, _ := table.Partition(0)
	free.Store(1 << 30)
	_ = store.Space().Probe()
	for i := int64(0); i < 5; i++ {
		appendAt(t, tm, oldP, 1000+i*100, "k", "v")
		appendAt(t, tm, tableP, 1000+i*100, "k", "v", "other", "v")
	}
	free.Store(1 << 20)
	_ = store.Space().Probe()

	clock := time.UnixMilli(10_000_000)
	r := New(zerolog.Nop(), func() time.Time { return clock })
	reg := prometheus.NewRegistry()
	AddTopicTasks(r, tm, TopicTasksConfig{RetentionCheckInterval: 5 * time.Millisecond, CleanerBackoff: 5 * time.Millisecond, Registerer: reg, Space: store.Space()})
	r.Start()
	defer r.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for oldP.LogStartOffset() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("retention did not run while low: log start %d", oldP.LogStartOffset())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // twenty cleaner intervals
	if runs, _ := metricValue(t, reg, "broker_log_compaction_runs_total", nil); runs != 0 || tableP.Stats().Records != 10 {
		t.Fatalf("compaction ran while low: %v runs, %d records", runs, tableP.Stats().Records)
	}
	free.Store(1 << 30)
	_ = store.Space().Probe()
	for tableP.Stats().Records != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("compaction did not resume: %d records", tableP.Stats().Records)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
