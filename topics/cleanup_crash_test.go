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

// TestCleanupSurvivesCrash interleaves appends, compaction passes (in small
// steps, so that crashes land inside passes), retention and DeleteRecords
// on a compact,delete topic, takes a crash image of the filesystem at a
// random point, and checks that the image recovers to a log that is valid:
// segment rows match the batches, the log end never moves back, the log
// start is at least where an acknowledged move put it, every record read is
// the one written at its offset, and the latest value of every key above
// the log start is readable. A full compaction of the recovered log then
// leaves exactly the latest record of each key in the closed segments.
func TestCleanupSurvivesCrash(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fs := vfs.NewCrashableMem()
			open := func(fs vfs.FS) (*pebblestore.Store, *Manager) {
				store, err := pebblestore.Open("data", pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, CompactionBytesPerCall: 300})
				if err != nil {
					t.Fatal(err)
				}
				return store, m
			}
			store, m := open(fs)
			topic, err := m.CreateTopic("t", 1, map[string]string{
				"cleanup.policy":            "compact,delete",
				"segment.ms":                "100",
				"min.cleanable.dirty.ratio": "0.01",
				"delete.retention.ms":       "300",
				"retention.ms":              "4000",
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := topic.Partition(0)

			type written struct {
				key   string
				value *string
			}
			writes := map[int64]written{}
			var leo, ackedStart int64
			crashAt := 20 + rng.IntN(100)
			var crashed *vfs.MemFS
			var crashLEO, crashStart int64
			for step := 0; crashed == nil; step++ {
				now := int64(step) * 60
				switch op := rng.IntN(10); {
				case op < 6:
					n := 1 + rng.IntN(3)
					recs := make([]Record, n)
					for i := range recs {
						k := fmt.Sprintf("k%d", rng.IntN(6))
						recs[i] = Record{OffsetDelta: int32(i), Key: []byte(k), Value: []byte(fmt.Sprintf("v%d-%d", step, i))}
						if rng.IntN(8) == 0 {
							recs[i].Value = nil
						}
					}
					batch, err := EncodeBatch(BatchHeader{Attributes: int16(rng.IntN(2) * int(CodecLZ4)), BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
					if err != nil {
						t.Fatal(err)
					}
					a := &Append{Partition: p, Batch: batch}
					if err := m.Append([]*Append{a}, time.UnixMilli(now)).Wait(); err != nil || a.Err != nil {
						t.Fatalf("append: %v %v", err, a.Err)
					}
					for i, r := range recs {
						w := written{key: string(r.Key)}
						if r.Value != nil {
							v := string(r.Value)
							w.value = &v
						}
						writes[a.BaseOffset+int64(i)] = w
					}
					leo = a.BaseOffset + int64(n)
				case op < 8:
					if res := m.Compact(time.UnixMilli(now)); res.Err != nil {
						t.Fatal(res.Err)
					}
				case op < 9:
					if res := m.EnforceRetention(time.UnixMilli(now)); res.Err != nil {
						t.Fatal(res.Err)
					}
					ackedStart = p.LogStartOffset()
				default:
					if leo > 0 {
						low, err := p.DeleteRecordsBefore(rng.Int64N(leo + 1))
						if err != nil {
							t.Fatal(err)
						}
						ackedStart = low
					}
				}
				if step == crashAt {
					crashed = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
					crashLEO, crashStart = leo, p.LogStartOffset()
				}
			}
			_ = store.Close()

			store2, m2 := open(crashed)
			defer store2.Close()
			topic2, _ := m2.Topic("t")
			p2, _ := topic2.Partition(0)
			checkSegments(t, store2, p2)
			if p2.HighWatermark() != crashLEO {
				t.Fatalf("log end %d after the crash, want %d", p2.HighWatermark(), crashLEO)
			}
			if s := p2.LogStartOffset(); s < ackedStart || s > crashStart {
				t.Fatalf("log start %d after the crash; acknowledged %d, at the crash %d", s, ackedStart, crashStart)
			}
			verify := func(stage string) map[string]int64 {
				got := readRecords(t, p2)
				latest := map[string]int64{}
				for o := int64(0); o < p2.HighWatermark(); o++ {
					if w, ok := writes[o]; ok {
						latest[w.key] = o
					}
				}
				for o, r := range got {
					w, ok := writes[o]
					if !ok || w.key != r.key || (w.value == nil) != (r.value == nil) || (w.value != nil && *w.value != *r.value) {
						t.Fatalf("%s: offset %d holds %q=%v, which was not written there", stage, o, r.key, r.value)
					}
				}
				for k, o := range latest {
					if o < p2.LogStartOffset() || writes[o].value == nil {
						continue
					}
					if _, ok := got[o]; !ok {
						t.Fatalf("%s: the latest value of %s (offset %d) is gone", stage, k, o)
					}
				}
				return latest
			}
			verify("after the crash")

			// Clean everything; then clean again after the horizon that the
			// first pass stamped on the tombstones it kept.
			for _, later := range []time.Time{time.UnixMilli(1 << 40), time.UnixMilli(1<<40 + 1000)} {
				for i := 0; ; i++ {
					if res := m2.Compact(later); res.Err != nil {
						t.Fatal(res.Err)
					} else if !res.More {
						break
					}
					if i > 10000 {
						t.Fatal("compaction does not finish")
					}
				}
			}
			checkSegments(t, store2, p2)
			verify("after compaction")
			// The active segment is never mapped nor cleaned: in the closed
			// segments, each key keeps its latest record among them.
			segs, _ := p2.loadSegments()
			activeBase := p2.HighWatermark()
			if len(segs) > 0 {
				activeBase = segs[len(segs)-1].Base
			}
			latestClosed := map[string]int64{}
			for o := int64(0); o < activeBase; o++ {
				if w, ok := writes[o]; ok {
					latestClosed[w.key] = o
				}
			}
			for o, r := range readRecords(t, p2) {
				if o >= activeBase {
					continue
				}
				if latestClosed[r.key] != o {
					t.Fatalf("after compaction offset %d holds %s, whose latest offset in the closed segments is %d", o, r.key, latestClosed[r.key])
				}
				if r.value == nil {
					t.Fatalf("after compaction, past every horizon, the tombstone of %s at %d is still there", r.key, o)
				}
			}
		})
	}
}

type readRecord struct {
	key   string
	value *string
}

// readRecords reads a partition from its log start to its high watermark
// and returns its records by offset.
func readRecords(t testing.TB, p *Partition) map[int64]readRecord {
	t.Helper()
	out := map[int64]readRecord{}
	off := p.LogStartOffset()
	for off < p.HighWatermark() {
		buf, _, err := p.Read(off, 1<<20, true, nil)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(buf) == 0 {
			t.Fatalf("read at %d below the high watermark %d returned nothing", off, p.HighWatermark())
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
				if o < p.LogStartOffset() {
					continue
				}
				rr := readRecord{key: string(r.Key)}
				if r.Value != nil {
					v := string(r.Value)
					rr.value = &v
				}
				out[o] = rr
			}
			off = h.LastOffset() + 1
			buf = buf[h.Size():]
		}
	}
	return out
}

// TestCleanupConcurrent runs appends, reads, compaction, retention and
// DeleteRecords on one partition at once (run it with -race): readers never
// see an error other than a log start that moved past them, offsets only
// grow, and the segment rows match the batches at the end.
func TestCleanupConcurrent(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer store.Close()
	m.cfg.CompactionBytesPerCall = 2000
	topic, err := m.CreateTopic("busy", 1, map[string]string{
		"cleanup.policy": "compact,delete", "segment.ms": "10", "retention.ms": "400",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "50",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	var clock struct {
		sync.Mutex
		now int64
	}
	tick := func() int64 {
		clock.Lock()
		defer clock.Unlock()
		clock.now += 7
		return clock.now
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
			}
		}()
	}
	var appended sync.Map
	run(func(i int) {
		now := tick()
		recs := []Record{{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint(i))}}
		if i%9 == 0 {
			recs[0].Value = nil
		}
		batch, _ := EncodeBatch(BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		a := &Append{Partition: p, Batch: batch}
		if err := m.Append([]*Append{a}, time.UnixMilli(now)).Wait(); err != nil || a.Err != nil {
			t.Errorf("append: %v %v", err, a.Err)
		}
		appended.Store(a.BaseOffset, true)
	})
	run(func(int) {
		off := p.LogStartOffset()
		for off < p.HighWatermark() {
			buf, _, err := p.Read(off, 4096, true, nil)
			if errors.Is(err, ErrOffsetOutOfRange) && off < p.LogStartOffset() {
				return // retention or DeleteRecords moved past us
			}
			if err != nil {
				t.Errorf("read at %d: %v", off, err)
				return
			}
			for len(buf) > 0 {
				h, err := ParseBatchHeader(buf)
				if err != nil {
					t.Errorf("read at %d: %v", off, err)
					return
				}
				if h.LastOffset() < off {
					t.Errorf("read at %d returned batch %d-%d", off, h.BaseOffset, h.LastOffset())
					return
				}
				off = h.LastOffset() + 1
				buf = buf[h.Size():]
			}
		}
	})
	run(func(int) {
		now := time.UnixMilli(tick())
		if res := m.Compact(now); res.Err != nil {
			t.Errorf("compact: %v", res.Err)
		}
		if res := m.EnforceRetention(now); res.Err != nil {
			t.Errorf("retention: %v", res.Err)
		}
	})
	run(func(i int) {
		if i%50 == 0 {
			if hwm := p.HighWatermark(); hwm > 10 {
				if _, err := p.DeleteRecordsBefore(hwm - 10); err != nil {
					t.Errorf("delete records: %v", err)
				}
			}
		}
		time.Sleep(time.Millisecond)
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	checkSegments(t, store, p)
	n := 0
	appended.Range(func(any, any) bool { n++; return true })
	if p.HighWatermark() != int64(n) {
		t.Fatalf("high watermark %d after %d appends", p.HighWatermark(), n)
	}
	if p.LogStartOffset() == 0 {
		t.Fatal("retention never moved the log start")
	}
}
