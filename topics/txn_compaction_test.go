package topics

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// txnLogModel is what a test wrote to one partition: every record, which
// transaction each transactional batch and marker belongs to, and how each
// transaction ended.
type txnLogModel struct {
	recs     map[int64]modelRecord
	batchTxn map[int64]int // base offset of a transactional data batch -> transaction
	markers  map[int64]int // marker offset -> transaction (0: a marker without data)
	txns     map[int]*modelTxn
}

type modelRecord struct {
	key   string
	value *string
	txn   int // 0: not transactional
}

type modelTxn struct {
	pid    int64
	ended  bool
	commit bool
	marker int64 // offset of its marker, once ended
}

// committed reports whether a record is visible to read_committed readers
// once below the LSO.
func (m *txnLogModel) committed(r modelRecord) bool {
	return r.txn == 0 || (m.txns[r.txn].ended && m.txns[r.txn].commit)
}

// checkTxnLog checks the transactional invariants of a partition against
// the model: the aborted index agrees with its rows and every entry has
// its ABORT marker (checkAbortedIndex); every stored batch of an aborted
// transaction is covered by an index entry; the marker of an ended
// transaction stays while any batch of the transaction does (Kafka's
// cleaner keeps it until its data is gone); and a read_committed consumer
// (one fetch, or fetches of one batch) gets only committed records, each
// the one written at its offset, and the latest committed value of every
// key below the LSO.
func checkTxnLog(t *testing.T, store *pebblestore.Store, p *Partition, m *txnLogModel, stage string) {
	t.Helper()
	index := checkAbortedIndex(t, store, p)
	it, err := store.NewIter(p.batchPrefix, pebblestore.PrefixEnd(p.batchPrefix))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]bool{}
	var txnBatches []int64
	for ok := it.First(); ok; ok = it.Next() {
		base := pebblestore.OffsetFromKey(it.Key())
		stored[base] = true
		v, _ := it.Value()
		h, err := ParseBatchHeader(v)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsControl() {
			if _, ok := m.markers[base]; !ok {
				t.Fatalf("%s: a marker at %d that was never written", stage, base)
			}
			continue
		}
		tx := m.txns[m.batchTxn[base]]
		if tx != nil && tx.ended {
			txnBatches = append(txnBatches, base)
		}
		if !h.IsTransactional() || tx == nil || !tx.ended || tx.commit {
			continue
		}
		covered := false
		for _, a := range index {
			covered = covered || (a.ProducerID == h.ProducerID && a.FirstOffset <= base && base <= a.LastOffset)
		}
		if !covered {
			t.Fatalf("%s: the aborted batch at %d (producer %d) has no aborted-index entry: %+v", stage, base, h.ProducerID, index)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for _, base := range txnBatches {
		if tx := m.txns[m.batchTxn[base]]; !stored[tx.marker] {
			t.Fatalf("%s: the marker at %d is gone while the batch at %d of its transaction is stored", stage, tx.marker, base)
		}
	}
	for _, maxBytes := range []int{1 << 20, 1} {
		view, lso := readCommittedRecords(t, p, maxBytes)
		got := map[int64]bool{}
		for _, r := range view {
			w, ok := m.recs[r.offset]
			if !ok || w.key != r.key || (w.value == nil) != (r.value == nil) || (w.value != nil && *w.value != *r.value) {
				t.Fatalf("%s (fetches of %d bytes): offset %d holds %s=%v, which was not written there", stage, maxBytes, r.offset, r.key, r.value)
			}
			if !m.committed(w) {
				t.Fatalf("%s (fetches of %d bytes): read_committed got %s=%s at %d of an aborted transaction", stage, maxBytes, r.key, *r.value, r.offset)
			}
			got[r.offset] = true
		}
		latest := map[string]int64{}
		for o := p.LogStartOffset(); o < lso; o++ {
			if w, ok := m.recs[o]; ok && m.committed(w) {
				latest[w.key] = o
			}
		}
		for k, o := range latest {
			if m.recs[o].value != nil && !got[o] {
				t.Fatalf("%s (fetches of %d bytes): the latest committed value of %s (offset %d) is not read", stage, maxBytes, k, o)
			}
		}
	}
}

// TestCompactionWithTransactionsRandomized interleaves plain appends,
// transactional appends of three producers, commits, aborts, markers of
// producers without data, and compaction in small steps (so that passes
// span many calls, and markers and their data are removed in different
// steps), checking checkTxnLog after every operation. At a random point
// it restarts from a crash image (a pass in the middle), checks again,
// ends every transaction and compacts past every horizon: then no ABORT
// marker is left outside the active segment, a COMMIT marker is left only
// while a batch of its transaction is, and the aborted index holds only
// transactions whose marker is in the active segment.
func TestCompactionWithTransactionsRandomized(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 98))
			mem := vfs.NewCrashableMem()
			open := func(fs vfs.FS) (*pebblestore.Store, *Manager) {
				store, err := pebblestore.Open("data", pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, CompactionBytesPerCall: 150})
				if err != nil {
					t.Fatal(err)
				}
				return store, m
			}
			store, m := open(mem)
			topic, err := m.CreateTopic("t", 1, map[string]string{
				"cleanup.policy": "compact", "segment.ms": "100",
				"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "300",
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := topic.Partition(0)
			model := &txnLogModel{recs: map[int64]modelRecord{}, batchTxn: map[int64]int{}, markers: map[int64]int{}, txns: map[int]*modelTxn{}}
			pids := []int64{100, 101, 102}
			open_ := map[int64]int{} // producer -> its open transaction
			seq := map[int64]int32{}
			nextTxn := 1

			appendBatch := func(now int64, pid int64, txn int) {
				n := 1 + rng.IntN(2)
				recs := make([]Record, n)
				for i := range recs {
					recs[i] = Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("k%d", rng.IntN(5))), Value: []byte(fmt.Sprintf("v%d-%d", now, i))}
					if rng.IntN(8) == 0 {
						recs[i].Value = nil
					}
				}
				h := BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
				if txn != 0 {
					h.Attributes, h.ProducerID, h.ProducerEpoch, h.BaseSequence = batchAttributeTransactional, pid, 0, seq[pid]
				}
				batch, err := EncodeBatch(h, recs)
				if err != nil {
					t.Fatal(err)
				}
				a := &Append{Partition: p, Batch: batch}
				if err := m.Append([]*Append{a}, time.UnixMilli(now)).Wait(); err != nil || a.Err != nil {
					t.Fatalf("append: %v %v", err, a.Err)
				}
				if txn != 0 {
					seq[pid] += int32(n)
					model.batchTxn[a.BaseOffset] = txn
				}
				for i, r := range recs {
					w := modelRecord{key: string(r.Key), txn: txn}
					if r.Value != nil {
						v := string(r.Value)
						w.value = &v
					}
					model.recs[a.BaseOffset+int64(i)] = w
				}
			}
			end := func(now int64, pid int64, commit bool) {
				pa, err := m.AppendAtomic(MarkerAppends([]Marker{{Partition: p, ProducerID: pid, Commit: commit}}, time.UnixMilli(now)), nil, time.UnixMilli(now))
				if err != nil {
					t.Fatal(err)
				}
				if err := pa.Wait(); err != nil {
					t.Fatal(err)
				}
				marker := p.HighWatermark() - 1
				if tx := open_[pid]; tx != 0 {
					model.txns[tx].ended, model.txns[tx].commit, model.txns[tx].marker = true, commit, marker
					model.markers[marker] = tx
					delete(open_, pid)
				} else {
					model.markers[marker] = 0
				}
			}

			crashAt := 60 + rng.IntN(120)
			var crashed *vfs.MemFS
			var now int64
			for step := 0; crashed == nil; step++ {
				now = int64(step) * 40
				pid := pids[rng.IntN(len(pids))]
				switch op := rng.IntN(20); {
				case op < 6:
					appendBatch(now, -1, 0)
				case op < 12:
					if open_[pid] == 0 {
						open_[pid] = nextTxn
						model.txns[nextTxn] = &modelTxn{pid: pid}
						nextTxn++
					}
					appendBatch(now, pid, open_[pid])
				case op < 15:
					if open_[pid] != 0 || rng.IntN(4) == 0 {
						end(now, pid, rng.IntN(2) == 0)
					}
				default:
					if res := m.Compact(time.UnixMilli(now)); res.Err != nil {
						t.Fatal(res.Err)
					}
				}
				checkTxnLog(t, store, p, model, fmt.Sprintf("step %d", step))
				if step == crashAt {
					crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
				}
			}
			_ = store.Close()

			store, m = open(crashed)
			defer func() { _ = store.Close() }()
			topic, _ = m.Topic("t")
			p, _ = topic.Partition(0)
			checkTxnLog(t, store, p, model, "after the crash")

			// End every transaction, roll the active segment, and compact
			// until the horizons of everything stamped have passed.
			now += 1000
			for _, pid := range pids {
				if open_[pid] != 0 {
					end(now, pid, rng.IntN(2) == 0)
				}
			}
			appendBatch(now+1000, -1, 0)
			for round := int64(0); round < 4; round++ {
				at := time.UnixMilli(now + 2000 + round*1000)
				for i := 0; ; i++ {
					res := m.Compact(at)
					if res.Err != nil {
						t.Fatal(res.Err)
					}
					if !res.More {
						break
					}
					if i > 100000 {
						t.Fatal("compaction does not finish")
					}
				}
				checkTxnLog(t, store, p, model, fmt.Sprintf("compaction round %d", round))
				checkSegments(t, store, p)
			}

			segs, err := p.loadSegments()
			if err != nil {
				t.Fatal(err)
			}
			active := segs[len(segs)-1].Base
			for _, a := range p.AbortedTransactions() {
				if a.LastOffset < active {
					t.Fatalf("aborted index entry %+v outside the active segment (from %d) after full compaction", a, active)
				}
			}
			dataOf := map[int]bool{} // transactions with a stored data batch
			it, err := store.NewIter(p.batchPrefix, pebblestore.PrefixEnd(p.batchPrefix))
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			var markers []int64
			for ok := it.First(); ok; ok = it.Next() {
				base := pebblestore.OffsetFromKey(it.Key())
				v, _ := it.Value()
				h, _ := ParseBatchHeader(v)
				if h.IsControl() {
					markers = append(markers, base)
				} else if tx := model.batchTxn[base]; tx != 0 {
					dataOf[tx] = true
				}
			}
			for _, base := range markers {
				if base >= active {
					continue
				}
				tx := model.markers[base]
				if tx == 0 || !model.txns[tx].commit {
					t.Fatalf("ABORT marker at %d (transaction %d) left in the closed segments after full compaction", base, tx)
				}
				if !dataOf[tx] {
					t.Fatalf("COMMIT marker at %d left after full compaction removed every batch of its transaction %d", base, tx)
				}
			}
		})
	}
}
