package topics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// TestReplicatedRetentionStart: the retention decision for a replicated
// log, each batch a segment, at an injected time: retention.ms drops the
// batches older than the limit from the oldest, retention.bytes the
// oldest while the rest holds the limit, never below the log start nor
// past the high watermark; nothing with neither limit; DeleteRecords
// refused on a compacted topic.
func TestReplicatedRetentionStart(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	now := time.UnixMilli(10_000)
	batches := []RetainedBatch{{Base: 0, Size: 100, MaxTimestamp: 1_000}, {Base: 5, Size: 100, MaxTimestamp: 4_000}, {Base: 10, Size: 100, MaxTimestamp: 9_000}}
	for _, tc := range []struct {
		name     string
		configs  map[string]string
		logStart int64
		want     int64
	}{
		{"no limit", nil, 0, 0},
		{"time", map[string]string{"retention.ms": "5000"}, 0, 10},    // 1000 and 4000 are older than 5000
		{"time all", map[string]string{"retention.ms": "500"}, 0, 15}, // the log end
		{"time kept start", map[string]string{"retention.ms": "8000"}, 3, 5},
		{"size", map[string]string{"retention.bytes": "100"}, 0, 10},        // 300 bytes: two go, 100 stay
		{"size between", map[string]string{"retention.bytes": "150"}, 0, 5}, // two going would leave less
		{"size exact", map[string]string{"retention.bytes": "200"}, 0, 5},
		{"start above", map[string]string{"retention.bytes": "200"}, 7, 7}, // never lowered
	} {
		topic, err := m.CreateTopic("r-"+strings.ReplaceAll(tc.name, " ", "-"), 1, tc.configs, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := topic.ReplicatedRetentionStart(batches, 15, tc.logStart, now); got != tc.want {
			t.Errorf("%s: log start %d, want %d", tc.name, got, tc.want)
		}
		if err := topic.CheckDeleteRecords(); err != nil {
			t.Errorf("%s: DeleteRecords refused: %v", tc.name, err)
		}
	}
	compacted, err := m.CreateTopic("compacted", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := compacted.CheckDeleteRecords(); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("DeleteRecords on a compacted topic: %v, want a policy violation", err)
	}
}

// TestReplicatedCompaction: the leader's compaction decision for a
// replicated partition at an injected time: the range ends at the last
// batch, the LSO or min.compaction.lag.ms; it is due past
// min.cleanable.dirty.ratio, past max.compaction.lag.ms, or once a kept
// tombstone's horizon passed; never for a delete-only topic.
func TestReplicatedCompaction(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	now := time.UnixMilli(10_000)
	batches := []RetainedBatch{{Base: 0, Size: 100, MaxTimestamp: 1_000}, {Base: 5, Size: 100, MaxTimestamp: 4_000},
		{Base: 10, Size: 100, MaxTimestamp: 9_000}, {Base: 12, Size: 100, MaxTimestamp: 9_500}}
	bounds := ReplicatedCompactionBounds{HighWatermark: 15, LastStable: 15, TombstoneHorizon: -1}
	for _, tc := range []struct {
		name    string
		configs map[string]string
		change  func(*ReplicatedCompactionBounds)
		end     int64
		due     bool
	}{
		{"delete only", map[string]string{"cleanup.policy": "delete"}, nil, 0, false},
		{"all dirty", nil, nil, 12, true}, // the last batch is never compacted
		{"lso", nil, func(b *ReplicatedCompactionBounds) { b.LastStable = 7 }, 5, true},
		{"lag", map[string]string{"min.compaction.lag.ms": "3000"}, nil, 10, true}, // 9000 is within 3000 of now
		{"ratio under", nil, func(b *ReplicatedCompactionBounds) { b.CleanEnd = 10 }, 12, false},
		{"ratio over", map[string]string{"min.cleanable.dirty.ratio": "0.3"}, func(b *ReplicatedCompactionBounds) { b.CleanEnd = 10 }, 12, true},
		{"max lag", map[string]string{"max.compaction.lag.ms": "500"}, func(b *ReplicatedCompactionBounds) { b.CleanEnd = 10 }, 12, true},
		{"clean", nil, func(b *ReplicatedCompactionBounds) { b.CleanEnd = 12 }, 12, false},
		{"horizon passed", nil, func(b *ReplicatedCompactionBounds) { b.CleanEnd, b.TombstoneHorizon = 12, 10_000 }, 12, true},
		{"horizon ahead", nil, func(b *ReplicatedCompactionBounds) { b.CleanEnd, b.TombstoneHorizon = 12, 10_001 }, 12, false},
	} {
		configs := map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "77"}
		for k, v := range tc.configs {
			configs[k] = v
		}
		topic, err := m.CreateTopic("c-"+strings.ReplaceAll(tc.name, " ", "-"), 1, configs, false)
		if err != nil {
			t.Fatal(err)
		}
		b := bounds
		if tc.change != nil {
			tc.change(&b)
		}
		end, dr, due := topic.ReplicatedCompaction(batches, b, now)
		if due != tc.due || (due && (end != tc.end || dr != 77)) {
			t.Errorf("%s: end %d delete.retention.ms %d due %v, want %d 77 %v", tc.name, end, dr, due, tc.end, tc.due)
		}
	}
}

// TestCoordinatorCompaction: a coordinator topic with a catalog row
// (__consumer_offsets) is compacted with its configs; one without
// (__transaction_state) with Kafka's cleanup.policy=compact over the
// broker's defaults (log.cleaner.* unless overridden).
func TestCoordinatorCompaction(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	now := time.UnixMilli(10_000)
	batches := []RetainedBatch{{Base: 0, Size: 100, MaxTimestamp: 1_000}, {Base: 5, Size: 100, MaxTimestamp: 4_000}, {Base: 10, Size: 100, MaxTimestamp: 9_000}}
	// 100 bytes clean, 100 dirty: under the default ratio 0.5.
	bounds := ReplicatedCompactionBounds{HighWatermark: 15, LastStable: 15, CleanEnd: 5, TombstoneHorizon: -1}
	if _, _, due := m.CoordinatorCompaction("__transaction_state", batches, bounds, now); due {
		t.Error("no row, default ratio 0.5: compacted at a dirty ratio of 0.5")
	}
	bounds.CleanEnd = 0
	if end, dr, due := m.CoordinatorCompaction("__transaction_state", batches, bounds, now); !due || end != 10 || dr != 86400000 {
		t.Errorf("no row, all dirty: end %d delete.retention.ms %d due %v, want 10 86400000 true", end, dr, due)
	}
	if _, err := m.CreateTopic("__consumer_offsets", 1, map[string]string{"cleanup.policy": "delete"}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, due := m.CoordinatorCompaction("__consumer_offsets", batches, bounds, now); due {
		t.Error("a row with cleanup.policy=delete: compacted")
	}

	store, err := pebblestore.Open("defaults", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1,
		BrokerDefaults: map[string]string{"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	bounds.CleanEnd = 5
	if end, dr, due := d.CoordinatorCompaction("__transaction_state", batches, bounds, now); !due || end != 10 || dr != 5 {
		t.Errorf("no row, broker defaults: end %d delete.retention.ms %d due %v, want 10 5 true", end, dr, due)
	}
}
