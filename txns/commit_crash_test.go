package txns_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/pebblestore/crashfs"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// crashFS calls a hook after every write and sync (crashfs).
type crashFS = crashfs.FS

// broker is the part of a broker that transactions touch: the store,
// topics, the group coordinator and the transaction coordinator, wired as
// cmd/broker wires them.
type broker struct {
	store *pebblestore.Store
	tm    *topics.Manager
	gc    *groups.Coordinator
	tc    *txns.Coordinator
}

func openStore(t *testing.T, fs vfs.FS) (*pebblestore.Store, *topics.Manager, *groups.Coordinator) {
	t.Helper()
	store, err := pebblestore.Open("data", pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := groups.Open(store, tm, groups.Config{Logger: zerolog.Nop(), OffsetsTopicPartitions: 2}, crashStart)
	if err != nil {
		t.Fatal(err)
	}
	return store, tm, gc
}

func openTxns(t *testing.T, b *broker) {
	t.Helper()
	tc, err := txns.Open(b.store, b.tm, txns.Config{Logger: zerolog.Nop(), CommitOffsets: func(offsets map[string][]txns.Offset, markers []*topics.Append, extra func(*pebblestore.Batch), now time.Time) error {
		return b.gc.CommitTransaction(txnCommits(offsets), markers, extra, now)
	}}, crashStart)
	if err != nil {
		t.Fatal(err)
	}
	b.tc = tc
}

// txnCommits is what cmd/broker's wiring passes to CommitTransaction.
func txnCommits(offsets map[string][]txns.Offset) []groups.TxnCommit {
	var out []groups.TxnCommit
	for group, os := range offsets {
		tc := groups.TxnCommit{Group: group}
		for _, o := range os {
			tc.Topics = append(tc.Topics, groups.CommitTopic{Topic: o.Topic, Partitions: []groups.CommitPartition{{Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}}})
		}
		out = append(out, tc)
	}
	return out
}

var crashStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const crashOutputs = 3

// committedState is what a crash image holds of the transaction.
type committedState struct {
	markers  int             // COMMIT markers, over every output partition
	offsets  map[int32]int64 // the group's committed offsets of "in"
	rowState txns.State      // the coordinator row's state
	lso      map[int32]int64 // per output partition
	hwm      map[int32]int64 // per output partition
	perPart  map[int32]int   // markers per output partition
}

// inspect reads what the store of b holds of the transaction "tx"; every
// marker must be of the kind commit says.
func inspect(t *testing.T, b *broker, commit bool) committedState {
	t.Helper()
	st := committedState{offsets: map[int32]int64{}, lso: map[int32]int64{}, hwm: map[int32]int64{}, perPart: map[int32]int{}}
	out, ok := b.tm.Topic("out")
	if !ok {
		t.Fatal("topic out lost")
	}
	for _, p := range out.Partitions() {
		raw, _, err := p.Read(0, 1<<20, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(raw) > 0 {
			h, err := topics.ParseBatchHeader(raw)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsControl() {
				isCommit, err := topics.ControlBatchCommit(raw[:h.Size()])
				if err != nil {
					t.Fatal(err)
				}
				if isCommit != commit {
					t.Fatalf("out/%d holds a marker with commit=%v, want %v", p.Index, isCommit, commit)
				}
				st.markers++
				st.perPart[p.Index]++
			}
			raw = raw[h.Size():]
		}
		st.lso[p.Index], st.hwm[p.Index] = p.LastStableOffset(), p.HighWatermark()
	}
	res := b.gc.FetchOffsets(groups.FetchOffsetsRequest{Group: "g", Topics: []groups.FetchOffsetsTopic{{Topic: "in", Partitions: []int32{0, 1}}}})
	for _, tp := range res.Topics {
		for _, p := range tp.Partitions {
			if p.Err != nil {
				t.Fatalf("offset fetch in/%d: %v", p.Partition, p.Err)
			}
			if p.Offset >= 0 {
				st.offsets[p.Partition] = p.Offset
			}
		}
	}
	raw, err := b.store.Get(pebblestore.TxnKey("tx"))
	if err != nil {
		t.Fatalf("transaction row: %v", err)
	}
	var row struct {
		State txns.State `json:"state"`
	}
	if err := json.Unmarshal(raw, &row); err != nil {
		t.Fatal(err)
	}
	st.rowState = row.State
	return st
}

// TestCommitIsAtomicAcrossCrashes pins that ending a transaction is one
// write: the markers on every partition, on commit the consumer offsets it
// staged (records in __consumer_offsets and their index rows), and the
// coordinator's Complete row. EndTxn runs on a crashable filesystem that
// takes a crash image after every write and sync the store makes, each
// keeping a random share of unsynced data. In every image, before the
// transaction coordinator recovers, either all of them are there or none
// is; the row says CompleteCommit/CompleteAbort exactly when all are there
// and Ongoing otherwise (the decision has no durable record of its own:
// the one write is the decision). After recovery an ended transaction has
// exactly one marker per partition and the offsets on commit, never on
// abort, and one that did not end is still open.
//
// Before ending a transaction was one write, the markers were synced first
// and the offsets committed after them, so an image could hold the markers
// (the transaction's output readable by read_committed consumers) without
// the offsets saying its input was consumed, and recovery wrote every
// marker a second time.
func TestCommitIsAtomicAcrossCrashes(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) { testEndTxnCrashes(t, commit) })
	}
}

func testEndTxnCrashes(t *testing.T, commit bool) {
	completed := txns.StateCompleteAbort
	if commit {
		completed = txns.StateCompleteCommit
	}
	seen := map[txns.State]int{} // row states found in crash images
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			mem := vfs.NewCrashableMem()
			fs := &crashFS{FS: mem}
			b := &broker{}
			b.store, b.tm, b.gc = openStore(t, fs)
			openTxns(t, b)
			if _, err := b.tm.CreateTopic("out", crashOutputs, nil, false); err != nil {
				t.Fatal(err)
			}
			if _, err := b.tm.CreateTopic("in", 2, nil, false); err != nil {
				t.Fatal(err)
			}
			pid, epoch, err := b.tc.InitProducerID("tx", 60000, -1, -1, crashStart)
			if err != nil {
				t.Fatal(err)
			}
			var parts []txns.TopicPartition
			for i := int32(0); i < crashOutputs; i++ {
				parts = append(parts, txns.TopicPartition{Topic: "out", Partition: i})
			}
			if err := b.tc.AddPartitions("tx", pid, epoch, parts, crashStart); err != nil {
				t.Fatal(err)
			}
			if err := b.tc.AddOffsets("tx", pid, epoch, "g", crashStart); err != nil {
				t.Fatal(err)
			}
			if err := b.tc.StageOffsets("tx", pid, epoch, "g", []txns.Offset{{Topic: "in", Partition: 0, Offset: 5, LeaderEpoch: -1}, {Topic: "in", Partition: 1, Offset: 7, LeaderEpoch: -1}}); err != nil {
				t.Fatal(err)
			}
			out, _ := b.tm.Topic("out")
			for i := int32(0); i < crashOutputs; i++ {
				p, _ := out.Partition(i)
				batch, err := topics.EncodeBatch(topics.BatchHeader{Attributes: 0x10, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0,
					BaseTimestamp: crashStart.UnixMilli(), MaxTimestamp: crashStart.UnixMilli()}, []topics.Record{{Key: []byte("k"), Value: []byte("v")}})
				if err != nil {
					t.Fatal(err)
				}
				a := &topics.Append{Partition: p, Batch: batch}
				if err := b.tm.Append([]*topics.Append{a}, crashStart).Wait(); err != nil || a.Err != nil {
					t.Fatalf("produce: %v %v", err, a.Err)
				}
			}

			var images []*vfs.MemFS
			clone := func() {
				images = append(images, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}))
			}
			clone()
			fs.SetHook(clone)
			if err := b.tc.EndTxn("tx", pid, epoch, commit, crashStart); err != nil {
				t.Fatal(err)
			}
			fs.SetHook(nil)
			clone()
			_ = b.store.Close()

			for i, img := range images {
				r := &broker{}
				r.store, r.tm, r.gc = openStore(t, img)
				before := inspect(t, r, commit)
				seen[before.rowState]++
				if len(before.offsets) != 0 && !commit {
					t.Fatalf("image %d/%d: offsets %v of an aborted transaction", i, len(images), before.offsets)
				}
				all := before.markers == crashOutputs && (len(before.offsets) == 2 || !commit)
				none := before.markers == 0 && len(before.offsets) == 0
				if !all && !none {
					t.Fatalf("image %d/%d (row %v): %d of %d markers and offsets %v: ending the transaction is not atomic", i, len(images), before.rowState, before.markers, crashOutputs, before.offsets)
				}
				if all != (before.rowState == completed) {
					t.Fatalf("image %d/%d: row %v with markers and offsets all=%v", i, len(images), before.rowState, all)
				}
				decided := before.rowState == completed
				if !decided && before.rowState != txns.StateOngoing {
					t.Fatalf("image %d/%d: row state %v", i, len(images), before.rowState)
				}

				openTxns(t, r)
				after := inspect(t, r, commit)
				if decided {
					if after.rowState != completed || (commit && (after.offsets[0] != 5 || after.offsets[1] != 7)) || (!commit && len(after.offsets) != 0) {
						t.Fatalf("image %d/%d after recovery: row %v offsets %v", i, len(images), after.rowState, after.offsets)
					}
					for p := int32(0); p < crashOutputs; p++ {
						if after.perPart[p] != 1 || after.lso[p] != after.hwm[p] || after.hwm[p] != 2 {
							t.Fatalf("image %d/%d after recovery: out/%d has %d markers, lso %d, hwm %d; want one marker at offset 1", i, len(images), p, after.perPart[p], after.lso[p], after.hwm[p])
						}
					}
				} else {
					if after.rowState != txns.StateOngoing || after.markers != 0 || len(after.offsets) != 0 {
						t.Fatalf("image %d/%d after recovery of an undecided transaction: row %v, %d markers, offsets %v", i, len(images), after.rowState, after.markers, after.offsets)
					}
					for p := int32(0); p < crashOutputs; p++ {
						if after.lso[p] != 0 {
							t.Fatalf("image %d/%d: out/%d lso %d with the transaction open", i, len(images), p, after.lso[p])
						}
					}
				}
				_ = r.store.Close()
			}
		})
	}
	// The images must have caught the transaction open and ended.
	for _, st := range []txns.State{txns.StateOngoing, completed} {
		if seen[st] == 0 {
			t.Errorf("no crash image with the transaction %v (images by state: %v)", st, seen)
		}
	}
	t.Logf("crash images by state: %v", seen)
}
