package groups

import (
	"fmt"
	"testing"
)

// txnState prints what a load rebuilt of partition p: the coordinator
// epochs, and each group's committed and pending offsets (fmt sorts map
// keys).
func (h *harness) txnState(p int32) string {
	h.t.Helper()
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	out := fmt.Sprintf("epochs %v\n", h.c.mu.txnCoordEpochs[p])
	names := map[string]string{}
	for name, g := range h.c.mu.groups {
		if g.partition != p {
			continue
		}
		committed := map[topicPartition]int64{}
		for tp, e := range g.offsets {
			committed[tp] = e.offset
		}
		pending := map[string]string{}
		for pid, tp := range g.txnOffsets {
			offs := map[topicPartition]int64{}
			for k, e := range tp.offsets {
				offs[k] = e.offset
			}
			pending[fmt.Sprint(pid)] = fmt.Sprintf("epoch %d %v superseded %v", tp.epoch, offs, tp.superseded)
		}
		names[name] = fmt.Sprintf("committed %v pending %v", committed, pending)
	}
	return out + fmt.Sprint(names)
}

// fencedMarker applies a marker of pid with coordinator epoch ce on g's
// partition of __consumer_offsets.
func (h *harness) fencedMarker(g string, pid int64, epoch int16, ce int32, commit bool) error {
	h.t.Helper()
	return h.c.EndTxnOffsets(TxnMarker{Partition: h.c.PartitionFor(g), ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: ce, Commit: commit}, h.now)()
}

// TestTxnOffsetsCoordinatorFenced pins the bug where a deposed transaction
// coordinator's late COMMIT (coordinator epoch 4) committed the pending
// offsets of the producer's next transaction, started at the same producer
// epoch after the new coordinator (epoch 5) ended the first one: the
// partition of __consumer_offsets keeps the coordinator epoch of the
// producer's last marker and refuses a lower one, changing nothing, across
// a restart; a marker that ends nothing still records a higher epoch; the
// producer epoch is checked first; another partition is not affected.
func TestTxnOffsetsCoordinatorFenced(t *testing.T) {
	h := newHarness(t, Config{OffsetsTopicPartitions: 5})
	h.createTopic("t", 2)
	h.mustStage("g", 7, 0, 0, 10)
	wantErr(t, "commit of epoch 5", h.fencedMarker("g", 7, 0, 5, true), nil)
	h.wantTxn("first transaction", "g", 0, 10, false)
	h.mustStage("g", 7, 0, 0, 20) // the next transaction, same producer epoch
	wantErr(t, "late commit of epoch 4", h.fencedMarker("g", 7, 0, 4, true), ErrTransactionCoordinatorFenced)
	wantErr(t, "late abort of epoch 4", h.fencedMarker("g", 7, 0, 4, false), ErrTransactionCoordinatorFenced)
	h.wantTxn("after the fenced markers", "g", 0, 10, true)
	h.reopen()
	wantErr(t, "late commit after a restart", h.fencedMarker("g", 7, 0, 4, true), ErrTransactionCoordinatorFenced)
	h.wantTxn("after a restart", "g", 0, 10, true)
	wantErr(t, "commit of the same epoch", h.fencedMarker("g", 7, 0, 5, true), nil)
	h.wantTxn("second transaction", "g", 0, 20, false)

	// A marker that ends nothing records its higher epoch: the old
	// coordinator's marker is fenced whichever arrived first.
	wantErr(t, "marker ending nothing", h.fencedMarker("g", 8, 0, 6, false), nil)
	h.mustStage("g", 8, 0, 1, 30)
	h.reopen()
	wantErr(t, "older than a marker that ended nothing", h.fencedMarker("g", 8, 0, 5, true), ErrTransactionCoordinatorFenced)
	h.wantTxn("pending after the fenced marker", "g", 1, -1, true)

	// The producer epoch first: an older one is INVALID_PRODUCER_EPOCH
	// whatever its coordinator epoch.
	h.mustStage("g", 8, 1, 1, 31)
	wantErr(t, "older producer epoch", h.fencedMarker("g", 8, 0, 1, true), ErrInvalidProducerEpoch)
	wantErr(t, "newer coordinator", h.fencedMarker("g", 8, 1, 7, true), nil)
	h.wantTxn("committed by the newer coordinator", "g", 1, 31, false)

	// Each partition of __consumer_offsets keeps its own epochs.
	other := "h"
	for h.c.PartitionFor(other) == h.c.PartitionFor("g") {
		other += "h"
	}
	h.mustStage(other, 7, 0, 0, 40)
	wantErr(t, "another partition", h.fencedMarker(other, 7, 0, 1, true), nil)
	h.wantTxn("another partition", other, 0, 40, false)
}

// TestTxnOffsetsReplicatedCoordinatorFenced: on a replicated
// __consumer_offsets a marker of a lower coordinator epoch than the
// producer's last one is refused and appends nothing, so a load after it
// is the state before it, and the loading coordinator refuses it too (the
// epoch is rebuilt from the log, also when recorded by a marker that ended
// nothing).
func TestTxnOffsetsReplicatedCoordinatorFenced(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	h.loadAll()
	h.mustStage("g", 7, 0, 0, 10)
	wantErr(t, "commit of epoch 5", h.fencedMarker("g", 7, 0, 5, true), nil)
	h.mustStage("g", 7, 0, 0, 20)
	wantErr(t, "marker ending nothing", h.fencedMarker("g", 8, 0, 6, true), nil)
	h.mustStage("g", 8, 0, 1, 30)
	p := h.c.PartitionFor("g")
	loadedBefore := replicatedHarness(t, logs)
	loadedBefore.loadAll()
	log := logs[p]
	before := logLen(log)
	wantErr(t, "late commit of epoch 4", h.fencedMarker("g", 7, 0, 4, true), ErrTransactionCoordinatorFenced)
	wantErr(t, "late commit of epoch 5", h.fencedMarker("g", 8, 0, 5, true), ErrTransactionCoordinatorFenced)
	if after := logLen(log); after != before {
		t.Fatalf("fenced markers appended %d records", after-before)
	}
	h.wantTxn("after the fenced markers", "g", 0, 10, true)
	h.wantTxn("after the fenced markers", "g", 1, -1, true)

	h2 := replicatedHarness(t, logs)
	h2.loadAll()
	if got, want := h2.txnState(p), loadedBefore.txnState(p); got != want {
		t.Fatalf("loaded after the fenced markers:\n%s\nwant, as loaded before them:\n%s", got, want)
	}
	if got, want := h2.txnState(p), h.txnState(p); got != want {
		t.Fatalf("loaded:\n%s\nwant the writer's:\n%s", got, want)
	}
	h2.wantTxn("loaded", "g", 0, 10, true)
	h2.wantTxn("loaded", "g", 1, -1, true)
	if h2.c.mu.txnCoordEpochs[p][7] != 5 || h2.c.mu.txnCoordEpochs[p][8] != 6 {
		t.Fatalf("loaded coordinator epochs %v, want 7: 5, 8: 6", h2.c.mu.txnCoordEpochs)
	}
	wantErr(t, "late commit after the load", h2.fencedMarker("g", 7, 0, 4, true), ErrTransactionCoordinatorFenced)
	wantErr(t, "late commit after the load", h2.fencedMarker("g", 8, 0, 5, true), ErrTransactionCoordinatorFenced)
	h2.wantTxn("after the fenced markers", "g", 0, 10, true)
	wantErr(t, "commit of the newer coordinator", h2.fencedMarker("g", 7, 0, 5, true), nil)
	h2.wantTxn("committed", "g", 0, 20, false)
}

// FuzzTxnCoordEpochRecord: the decoders of a coordinator epoch record
// and row never panic, and what ops writes reads back as written.
func FuzzTxnCoordEpochRecord(f *testing.F) {
	w := &coordEpochWrite{partition: 3, producerID: 7, epoch: 5}
	rec := w.ops()[0].rec
	f.Add(rec.Key, rec.Value)
	f.Add(rec.Key[:5], rec.Value[:3])
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c := &Coordinator{}
		_ = c.loadTxnCoordEpochRecordLocked(key, value)
		_, _, _, _ = decodeTxnCoordEpochRow(key, value)
		for _, cut := range []int{len(key) / 2, len(key)} { // inputs in two halves
			_ = c.loadTxnCoordEpochRecordLocked(key[:cut], value)
		}
		if len(value) >= 6 {
			w := &coordEpochWrite{partition: int32(len(key)), producerID: int64(len(value)), epoch: int32(value[0])<<8 | int32(value[1])}
			r := w.ops()[0].rec
			c := &Coordinator{}
			if err := c.loadTxnCoordEpochRecordLocked(r.Key, r.Value); err != nil || c.txnCoordEpochLocked(w.partition, w.producerID) != w.epoch {
				t.Fatalf("round trip of %+v: %v, read %d", w, err, c.txnCoordEpochLocked(w.partition, w.producerID))
			}
			row := w.ops()[0]
			if p, pid, e, err := decodeTxnCoordEpochRow(row.key, row.value); err != nil || p != w.partition || pid != w.producerID || e != w.epoch {
				t.Fatalf("row round trip of %+v: %d %d %d %v", w, p, pid, e, err)
			}
		}
	})
}
