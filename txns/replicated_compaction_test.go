package txns

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vibemq/broker/internal/testtools/coordlog"
	"github.com/vibemq/broker/topics"
)

// compact compacts l as a replicated partition's compaction command does
// (coordlog.Compact) and returns the log's bytes and tombstones after.
func (l *memStateLog) compact(t *testing.T, now time.Time, deleteRetention time.Duration) (size, tombstones int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	kept, err := coordlog.Compact(l.batches, now, deleteRetention)
	if err != nil {
		t.Fatal(err)
	}
	if tombstones, err = coordlog.Tombstones(kept); err != nil {
		t.Fatal(err)
	}
	l.batches = kept
	return coordlog.Size(kept), tombstones
}

// loadedRows is every transactional ID's row a coordinator loaded from
// log (at epoch), printed in ID order.
func loadedRows(t *testing.T, log *memStateLog, epoch uint64) string {
	t.Helper()
	h := replicatedCoordinator(t, newTestSender(), log, epoch)
	h.delivered()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(h.c.mu.txns)) {
		fmt.Fprintf(&b, "%s %s\n", id, encodeTxn(h.c.mu.txns[id]))
	}
	return b.String()
}

// TestReplicatedStateCompactedLoad: a coordinator loading a compacted
// replicated __transaction_state partition loads exactly the rows a load
// of the log before compaction loaded (issue 13: the log is compacted as
// Kafka compacts the topic): an ID with two committed transactions (many
// rows of one key), an open transaction, an expired ID (a tombstone),
// compared before compaction, after one that keeps the tombstone and
// after one past its horizon, which removes it. PartitionLoaded, which
// gates the leader's compaction, is true only once loaded, in the epoch
// of the load.
func TestReplicatedStateCompactedLoad(t *testing.T) {
	log := &memStateLog{}
	sender := newTestSender()
	h := newHarness(t, Config{Markers: sender, MarkerBackoff: time.Millisecond, IDExpiration: time.Hour})
	if err := h.c.UseReplicatedLog(func(string) int32 { return 0 }); err != nil {
		t.Fatal(err)
	}
	h.c.StartLoad(0, 1, log)
	if h.c.PartitionLoaded(0, 1) {
		t.Fatal("a partition being loaded reported loaded: the leader would compact it under the load")
	}
	if _, err := h.c.Load(0, 1); err != nil {
		t.Fatal(err)
	}
	if !h.c.PartitionLoaded(0, 1) || h.c.PartitionLoaded(0, 2) {
		t.Fatal("PartitionLoaded: want loaded at epoch 1 only")
	}
	if _, _, err := h.c.InitProducerID("x", 1000, -1, -1, h.now); err != nil {
		t.Fatal(err)
	}
	h.c.Tick(h.now.Add(2 * time.Hour)) // x expires: a tombstone
	for range 2 {
		pid, epoch := h.begin("a", 60000)
		if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
			t.Fatal(err)
		}
		h.delivered()
	}
	h.begin("b", 60000) // stays open
	before := loadedRows(t, log, 2)
	if !strings.Contains(before, "a ") || !strings.Contains(before, "b ") || strings.Contains(before, "x ") {
		t.Fatalf("loaded before compaction:\n%s", before)
	}
	log.mu.Lock()
	records := 0
	for _, b := range log.batches {
		_, recs, _ := topics.DecodeRecords(b)
		records += len(recs)
	}
	log.mu.Unlock()

	size, tombstones := log.compact(t, h.now, 24*time.Hour)
	if tombstones != 1 {
		t.Fatalf("compaction within delete.retention.ms kept %d tombstones, want x's", tombstones)
	}
	if got := loadedRows(t, log, 3); got != before {
		t.Fatalf("loaded after compaction:\n%s\nwant:\n%s", got, before)
	}
	_, tombstones = log.compact(t, h.now.Add(25*time.Hour), 24*time.Hour)
	if tombstones != 0 {
		t.Fatalf("compaction past the horizon kept %d tombstones", tombstones)
	}
	if got := loadedRows(t, log, 4); got != before {
		t.Fatalf("loaded after the tombstone went:\n%s\nwant:\n%s", got, before)
	}
	log.mu.Lock()
	left := len(log.batches)
	log.mu.Unlock()
	t.Logf("%d records compacted to %d batches (%d bytes after the first compaction)", records, left, size)
	if left > 3 {
		t.Fatalf("%d batches left of %d records, want at most a's, b's and the last", left, records)
	}
}
