package topics

import (
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAppendUndoRollback pins the undo log of appendBatches on its own:
// whatever a write changed in a locked partition's memory after
// lockPartitions took the snapshot (next offset, active segment, open
// transactions, aborted and ending transactions, producer states, new
// producers included) is as before after rollback, and the size counters
// move only on commit.
func TestAppendUndoRollback(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer func() { _ = store.Close() }()
	topic, err := m.CreateTopic("a", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	// An open transaction of producer 7 and an idempotent producer 8.
	if a := appendOne(t, m, p, txnBatch(t, 2, 7, 0, 0)); a.Err != nil {
		t.Fatal(a.Err)
	}
	if a := appendOne(t, m, p, testBatch(t, "x", 1, 8, 0, 0, 1000)); a.Err != nil {
		t.Fatal(a.Err)
	}

	type state struct {
		next      int64
		active    segment
		ongoing   map[int64]int64
		aborted   []AbortedTxn
		ending    []endingTxn
		producers map[int64]producerState
	}
	snapshot := func() state {
		s := state{next: p.mu.nextOffset, active: *p.mu.active, ongoing: map[int64]int64{},
			aborted: append([]AbortedTxn(nil), p.mu.aborted...), ending: append([]endingTxn(nil), p.mu.ending...),
			producers: map[int64]producerState{}}
		for k, v := range p.mu.ongoing {
			s.ongoing[k] = v
		}
		for id, st := range p.mu.producers {
			c := *st.clone()
			s.producers[id] = c
		}
		return s
	}

	ok := []checkedAppend{{a: &Append{Partition: p}}}
	undo := lockPartitions(ok)
	before := snapshot()
	bytes, records := p.sizeBytes.Load(), p.records.Load()

	// What an append may do to the partition, done by hand.
	u := undo.of(p)
	p.mu.nextOffset += 10
	p.mu.active = &segment{Base: 99}
	delete(p.mu.ongoing, 7)
	p.mu.ongoing[9] = 50
	p.mu.aborted = append(p.mu.aborted, AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2})
	p.mu.ending = append(p.mu.ending, endingTxn{first: 0, marker: 3})
	u.saveProducer(8, p.mu.producers[8])
	p.mu.producers[8].Epoch = 5
	p.mu.producers[8].Batches = nil
	u.saveProducer(10, p.mu.producers[10])
	p.mu.producers[10] = &producerState{Epoch: 1}
	u.bytes, u.records = 100, 4

	undo.rollback()
	after := snapshot()
	undo.unlock()
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("after rollback:\n%+v\nwant\n%+v", after, before)
	}
	if p.sizeBytes.Load() != bytes || p.records.Load() != records {
		t.Fatalf("size counters moved on rollback: %d bytes %d records, want %d %d", p.sizeBytes.Load(), p.records.Load(), bytes, records)
	}

	undo = lockPartitions(ok)
	undo.of(p).bytes, undo.of(p).records = 100, 4
	undo.commit()
	undo.unlock()
	if p.sizeBytes.Load() != bytes+100 || p.records.Load() != records+4 {
		t.Fatalf("after commit: %d bytes %d records, want %d %d", p.sizeBytes.Load(), p.records.Load(), bytes+100, records+4)
	}
}
