package topics

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

func openTestManager(t *testing.T, fs vfs.FS, dir string) (*pebblestore.Store, *Manager) {
	t.Helper()
	store, err := pebblestore.Open(dir, pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	return store, m
}

// testBatch builds one batch of n records whose values are "<tag>-<i>".
func testBatch(t testing.TB, tag string, n int, producerID int64, epoch int16, seq int32, ts int64) []byte {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	b, err := EncodeBatch(BatchHeader{
		BaseTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendOne(t testing.TB, m *Manager, p *Partition, batch []byte) *Append {
	t.Helper()
	a := &Append{Partition: p, Batch: batch}
	pa := m.Append([]*Append{a}, time.UnixMilli(1000))
	if err := pa.Wait(); err != nil {
		t.Fatal(err)
	}
	return a
}

// readAll decodes every record of a partition from offset 0, returning the
// values by offset.
func readAll(t testing.TB, p *Partition) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	off := p.LogStartOffset()
	for off < p.HighWatermark() {
		buf, res, err := p.Read(off, 1<<20, true, nil)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if res.Bytes == 0 {
			t.Fatalf("read at %d below hwm %d returned nothing", off, p.HighWatermark())
		}
		for len(buf) > 0 {
			h, err := ParseBatchHeader(buf)
			if err != nil {
				t.Fatal(err)
			}
			_, recs, err := DecodeRecords(buf[:h.Size()])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if _, dup := out[o]; dup {
					t.Fatalf("offset %d read twice", o)
				}
				out[o] = string(r.Value)
			}
			off = h.LastOffset() + 1
			buf = buf[h.Size():]
		}
	}
	return out
}

func TestAppendAssignsContiguousOffsetsAndReadsBack(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	topic, err := m.CreateTopic("orders", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(1)
	var want int64
	for i := 0; i < 10; i++ {
		a := appendOne(t, m, p, testBatch(t, fmt.Sprint(i), 3, -1, -1, -1, 100))
		if a.Err != nil || a.BaseOffset != want {
			t.Fatalf("append %d: base %d err %v, want base %d", i, a.BaseOffset, a.Err, want)
		}
		want += 3
	}
	if p.HighWatermark() != 30 {
		t.Fatalf("hwm %d, want 30", p.HighWatermark())
	}
	got := readAll(t, p)
	for o := int64(0); o < 30; o++ {
		if got[o] != fmt.Sprintf("%d-%d", o/3, o%3) {
			t.Fatalf("offset %d holds %q", o, got[o])
		}
	}
	// Reading from the middle of a batch returns that whole batch first.
	buf, _, err := p.Read(4, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseBatchHeader(buf)
	if h.BaseOffset != 3 || len(buf) != h.Size() {
		t.Fatalf("read at 4 with 1 byte returned base %d and %d bytes; want the whole batch at 3", h.BaseOffset, len(buf))
	}
	// Without minOne nothing fits in one byte.
	if buf, _, _ := p.Read(4, 1, false, nil); len(buf) != 0 {
		t.Fatalf("read without minOne returned %d bytes", len(buf))
	}
	if _, _, err := p.Read(31, 100, true, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v, want ErrOffsetOutOfRange", err)
	}
	if buf, _, err := p.Read(30, 100, true, nil); err != nil || len(buf) != 0 {
		t.Fatalf("read at the end: %d bytes, %v", len(buf), err)
	}
}

func TestIdempotentProducerSequences(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	topic, _ := m.CreateTopic("idem", 1, nil, false)
	p, _ := topic.Partition(0)
	first := appendOne(t, m, p, testBatch(t, "a", 2, 7, 0, 0, 1))
	second := appendOne(t, m, p, testBatch(t, "b", 2, 7, 0, 2, 1))
	if first.Err != nil || second.Err != nil || second.BaseOffset != 2 {
		t.Fatalf("appends: %v %v base %d", first.Err, second.Err, second.BaseOffset)
	}
	dup := appendOne(t, m, p, testBatch(t, "a", 2, 7, 0, 0, 1))
	if dup.Err != nil || !dup.Duplicate || dup.BaseOffset != 0 {
		t.Fatalf("retry of the first batch: dup=%v base=%d err=%v, want the original offset 0", dup.Duplicate, dup.BaseOffset, dup.Err)
	}
	gap := appendOne(t, m, p, testBatch(t, "c", 1, 7, 0, 9, 1))
	if !errors.Is(gap.Err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v, want ErrOutOfOrderSequence", gap.Err)
	}
	fresh := appendOne(t, m, p, testBatch(t, "d", 1, 8, 0, 5, 1))
	if !errors.Is(fresh.Err, ErrOutOfOrderSequence) {
		t.Fatalf("new producer starting at 5: %v, want ErrOutOfOrderSequence", fresh.Err)
	}
	bumped := appendOne(t, m, p, testBatch(t, "e", 1, 7, 1, 0, 1))
	if bumped.Err != nil {
		t.Fatalf("new epoch at sequence 0: %v", bumped.Err)
	}
	stale := appendOne(t, m, p, testBatch(t, "f", 1, 7, 0, 4, 1))
	if !errors.Is(stale.Err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v, want ErrInvalidProducerEpoch", stale.Err)
	}
	if p.HighWatermark() != 5 {
		t.Fatalf("hwm %d, want 5: rejected and duplicate batches must write nothing", p.HighWatermark())
	}
}

func TestIncrementSequenceWraps(t *testing.T) {
	if got := incrementSequence(1<<31-2, 3); got != 1 {
		t.Fatalf("got %d, want 1", got)
	}
	if got := incrementSequence(5, 3); got != 8 {
		t.Fatalf("got %d, want 8", got)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	topic, _ := m.CreateTopic("ts", 1, nil, false)
	p, _ := topic.Partition(0)
	appendOne(t, m, p, testBatch(t, "a", 3, -1, -1, -1, 100)) // offsets 0-2, ts 100-102
	appendOne(t, m, p, testBatch(t, "b", 3, -1, -1, -1, 200)) // offsets 3-5, ts 200-202
	cases := []struct{ ts, off, stamp int64 }{
		{TimestampEarliest, 0, -1},
		{TimestampLatest, 6, -1},
		{0, 0, 100},
		{101, 1, 101},
		{150, 3, 200},
		{202, 5, 202},
		{203, -1, -1},
		{TimestampMaxTimestamp, 5, 202},
	}
	for _, c := range cases {
		off, stamp, err := p.OffsetForTimestamp(c.ts)
		if err != nil || off != c.off || stamp != c.stamp {
			t.Errorf("ts %d: got (%d, %d, %v), want (%d, %d)", c.ts, off, stamp, err, c.off, c.stamp)
		}
	}
}

func TestDeleteTopicRemovesData(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	topic, _ := m.CreateTopic("gone", 1, nil, false)
	p, _ := topic.Partition(0)
	appendOne(t, m, p, testBatch(t, "a", 2, 3, 0, 0, 1))
	if err := m.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Read(0, 100, true, nil); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("read after delete: %v", err)
	}
	if a := appendOne(t, m, p, testBatch(t, "b", 1, -1, -1, -1, 1)); !errors.Is(a.Err, ErrUnknownTopic) {
		t.Fatalf("append after delete: %v", a.Err)
	}
	if _, err := store.Get(pebblestore.TopicKey(topic.ID)); !errors.Is(err, pebblestore.ErrNotFound) {
		t.Errorf("catalog row left after delete: %v", err)
	}
	it, _ := store.NewIter([]byte{pebblestore.PrefixBatch}, []byte{pebblestore.PrefixProducerState + 1})
	for ok := it.First(); ok; ok = it.Next() {
		t.Errorf("key %x left after delete", it.Key())
	}
	_ = it.Close()
	if _, err := m.CreateTopic("gone", 1, nil, false); err != nil {
		t.Fatalf("recreate: %v", err)
	}
}

func TestCreateTopicValidation(t *testing.T) {
	_, m := openTestManager(t, vfs.NewMem(), "data")
	bad := map[string]error{"": ErrInvalidTopic, "a/b": ErrInvalidTopic, "..": ErrInvalidTopic}
	for name, want := range bad {
		if _, err := m.CreateTopic(name, 1, nil, false); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", name, err, want)
		}
	}
	if _, err := m.CreateTopic("x", 1, map[string]string{"retention.ms": "soon"}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad config: %v", err)
	}
	if _, err := m.CreateTopic("x", 1, map[string]string{"no.such.config": "1"}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown config: %v", err)
	}
	if _, err := m.CreateTopic("v", 3, nil, true); err != nil {
		t.Errorf("validate only: %v", err)
	}
	if _, ok := m.Topic("v"); ok {
		t.Error("validate-only created the topic")
	}
	if _, err := m.CreateTopic("x", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTopic("x", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := m.CreateTopic("a.b", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a_b"} {
		if _, err := m.CreateTopic(name, 1, nil, false); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q next to a.b: %v, want ErrInvalidTopic (collision)", name, err)
		}
	}
}

// TestCrashKeepsAcknowledgedAppends appends from several goroutines, takes
// a crash image of the filesystem at a random moment (keeping a random share
// of unsynced data), and checks that recovery from the image holds every
// append acknowledged before the crash, at its offset, with no gaps, and
// that producer state survives (a retry gets the original offset).
func TestCrashKeepsAcknowledgedAppends(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			fs := vfs.NewCrashableMem()
			store, m := openTestManager(t, fs, "data")
			topic, _ := m.CreateTopic("crash", 2, nil, false)

			type acked struct {
				part  int32
				base  int64
				value string
				pid   int64
				seq   int32
			}
			var mu sync.Mutex
			var acks []acked
			var crashed *vfs.MemFS
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					pid := int64(100 + w)
					p, _ := topic.Partition(int32(w % 2))
					for i := 0; i < 40; i++ {
						tag := fmt.Sprintf("w%d-%d", w, i)
						a := &Append{Partition: p, Batch: testBatch(t, tag, 2, pid, 0, int32(2*i), 1)}
						if err := m.Append([]*Append{a}, time.UnixMilli(1)).Wait(); err != nil || a.Err != nil {
							t.Errorf("append: %v %v", err, a.Err)
							return
						}
						mu.Lock()
						if crashed == nil {
							acks = append(acks, acked{p.Index, a.BaseOffset, tag + "-0", pid, int32(2 * i)})
						}
						mu.Unlock()
					}
				}(w)
			}
			crashAfter := rng.IntN(100)
			for {
				mu.Lock()
				n := len(acks)
				mu.Unlock()
				if n >= crashAfter {
					break
				}
			}
			mu.Lock()
			crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			kept := append([]acked(nil), acks...)
			mu.Unlock()
			wg.Wait()
			_ = store.Close()

			_, m2 := openTestManager(t, crashed, "data")
			topic2, ok := m2.Topic("crash")
			if !ok {
				t.Fatal("topic lost in the crash")
			}
			values := map[int32]map[int64]string{}
			for _, p := range topic2.Partitions() {
				values[p.Index] = readAll(t, p)
				for o := int64(0); o < p.HighWatermark(); o++ {
					if _, ok := values[p.Index][o]; !ok {
						t.Fatalf("partition %d has a gap at %d (hwm %d)", p.Index, o, p.HighWatermark())
					}
				}
			}
			for _, a := range kept {
				if got := values[a.part][a.base]; got != a.value {
					t.Fatalf("acknowledged %q at %d/%d, found %q after the crash", a.value, a.part, a.base, got)
				}
			}
			// The last acknowledged batch of each producer is remembered.
			last := map[int64]acked{}
			for _, a := range kept {
				if a.seq >= last[a.pid].seq {
					last[a.pid] = a
				}
			}
			for _, a := range last {
				p, _ := topic2.Partition(a.part)
				retry := appendOne(t, m2, p, testBatch(t, "retry", 2, a.pid, 0, a.seq, 1))
				if retry.Err != nil || !retry.Duplicate || retry.BaseOffset != a.base {
					t.Fatalf("retry after crash of producer %d seq %d: dup=%v base=%d err=%v, want base %d", a.pid, a.seq, retry.Duplicate, retry.BaseOffset, retry.Err, a.base)
				}
			}
		})
	}
}
