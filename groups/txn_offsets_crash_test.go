package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/pebblestore/crashfs"
	"github.com/vibemq/broker/topics"
)

// crashFS calls a hook after every write and sync (crashfs).
type crashFS = crashfs.FS

func openCrashStore(t *testing.T, fs vfs.FS) (*pebblestore.Store, *topics.Manager, *Coordinator) {
	t.Helper()
	store, err := pebblestore.Open("data", pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(store, tm, Config{OffsetsTopicPartitions: 1}, start)
	if err != nil {
		t.Fatal(err)
	}
	return store, tm, c
}

// txnCrashState is one group's t/0 and t/1 in a crash image: the
// committed offsets, and whether require_stable answers UNSTABLE.
type txnCrashState struct {
	offsets  [2]int64
	unstable [2]bool
}

func txnStateOf(c *Coordinator, g string) txnCrashState {
	var st txnCrashState
	q := FetchOffsetsRequest{Group: g, Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{0, 1}}}}
	for i, p := range c.FetchOffsets(q).Topics[0].Partitions {
		st.offsets[i] = p.Offset
	}
	q.RequireStable = true
	for i, p := range c.FetchOffsets(q).Topics[0].Partitions {
		st.unstable[i] = p.Err != nil
	}
	return st
}

// TestTxnOffsetsMarkerIsAtomicAcrossCrashes: a commit marker ending the
// pending offsets of two groups of one __consumer_offsets partition is one
// write: a crash image taken after any write or sync of the store holds
// either every pending offset (still pending, the old committed offset)
// or every one committed with no pending left, never a mix; the image
// after the marker returned holds the committed ones.
func TestTxnOffsetsMarkerIsAtomicAcrossCrashes(t *testing.T) {
	pending := map[string]txnCrashState{
		"a": {offsets: [2]int64{5, -1}, unstable: [2]bool{true, true}},
		"b": {offsets: [2]int64{-1, -1}, unstable: [2]bool{true, false}},
	}
	committed := map[string]txnCrashState{
		"a": {offsets: [2]int64{10, 11}},
		"b": {offsets: [2]int64{20, -1}},
	}
	seen := map[bool]int{} // committed or not, over every image
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			mem := vfs.NewCrashableMem()
			fs := &crashFS{FS: mem}
			store, tm, c := openCrashStore(t, fs)
			if _, err := tm.CreateTopic("t", 2, nil, false); err != nil {
				t.Fatal(err)
			}
			result(t, c.Commit(CommitRequest{Group: "a", Generation: -1, Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Offset: 5}}}}}, start))
			stage := func(g string, offsets ...int64) {
				req := TxnOffsetsRequest{Commit: CommitRequest{Group: g, Generation: -1, Topics: []CommitTopic{{Topic: "t"}}}, ProducerID: 7}
				for p, o := range offsets {
					req.Commit.Topics[0].Partitions = append(req.Commit.Topics[0].Partitions, CommitPartition{Partition: int32(p), Offset: o, LeaderEpoch: -1})
				}
				if err := c.StageTxnOffsets(req, start); err != nil {
					t.Fatal(err)
				}
			}
			stage("a", 10, 11)
			stage("b", 20)

			var images []*vfs.MemFS
			clone := func() {
				images = append(images, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}))
			}
			clone()
			fs.SetHook(clone)
			if err := c.EndTxnOffsets(TxnMarker{Partition: 0, ProducerID: 7, ProducerEpoch: 0, Commit: true}, start)(); err != nil {
				t.Fatal(err)
			}
			fs.SetHook(nil)
			clone()
			_ = store.Close()

			for i, img := range images {
				s, _, rc := openCrashStore(t, img)
				got := map[string]txnCrashState{"a": txnStateOf(rc, "a"), "b": txnStateOf(rc, "b")}
				_ = s.Close()
				isPending := got["a"] == pending["a"] && got["b"] == pending["b"]
				isCommitted := got["a"] == committed["a"] && got["b"] == committed["b"]
				if !isPending && !isCommitted {
					t.Fatalf("image %d/%d: %+v: the marker is not atomic", i, len(images), got)
				}
				seen[isCommitted]++
				if i == len(images)-1 && !isCommitted {
					t.Fatalf("the image after the marker returned: %+v, want committed", got)
				}
			}
		})
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("crash images: %d committed, %d pending; the test saw only one side", seen[true], seen[false])
	}
	t.Logf("crash images: %d committed, %d pending", seen[true], seen[false])
}
