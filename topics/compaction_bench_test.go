package topics

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// BenchmarkCompaction measures one full compaction of a partition holding
// BROKER_BENCH_COMPACTION_BYTES of 1 KiB records (16 per uncompressed
// batch) whose keys are drawn from a key space of 10% of the record count,
// so about 10% of the records are live. Segments are 128 MiB (an eighth
// of smaller totals); the last one is active and not cleaned. It is skipped unless the variable is set, so
// normal runs stay fast:
//
//	BROKER_BENCH_COMPACTION_BYTES=1073741824 go test ./topics -run '^$' -bench BenchmarkCompaction -benchtime 1x
//
// The data directory is on the real filesystem (TMPDIR). Reported: the
// pass's wall time, record bytes read and written by compaction, and the
// bytes Pebble wrote meanwhile (WAL, flushes, compactions including blob
// files), then the disk usage after a manual compaction of the store.
func BenchmarkCompaction(b *testing.B) {
	total, _ := strconv.ParseInt(os.Getenv("BROKER_BENCH_COMPACTION_BYTES"), 10, 64)
	if total <= 0 {
		b.Skip("set BROKER_BENCH_COMPACTION_BYTES (e.g. 1073741824) to run the compaction benchmark")
	}
	const valueSize, perBatch = 1024, 16
	store, err := pebblestore.Open(b.TempDir(), pebblestore.Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, CompactionMapEntries: 4 << 20, CompactionBytesPerCall: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	segment := min(128<<20, max(1<<20, total/8))
	topic, err := m.CreateTopic("bench", 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": strconv.FormatInt(segment, 10), "min.cleanable.dirty.ratio": "0.01",
	}, false)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := topic.Partition(0)
	records := total / (valueSize + 30)
	keys := records / 10
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	start := time.Now()
	now := start.UnixMilli()
	var pending []*PendingAppend
	for n := int64(0); n < records; n += perBatch {
		recs := make([]Record, perBatch)
		for i := range recs {
			recs[i] = Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("key-%09d", rng.Int64N(keys))), Value: value}
		}
		batch, err := EncodeBatch(BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			b.Fatal(err)
		}
		a := &Append{Partition: p, Batch: batch}
		pending = append(pending, m.Append([]*Append{a}, time.UnixMilli(now)))
		if a.Err != nil {
			b.Fatal(a.Err)
		}
		if len(pending) == 64 {
			for _, pa := range pending {
				if err := pa.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			pending = pending[:0]
		}
	}
	for _, pa := range pending {
		if err := pa.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	if err := store.Flush(); err != nil {
		b.Fatal(err)
	}
	before := p.Stats()
	b.Logf("wrote %d records, %d MiB in %v; disk %d MiB", before.Records, before.Bytes>>20, time.Since(start).Round(time.Millisecond), store.DiskUsage()>>20)

	written := func() uint64 {
		mt := store.Metrics()
		tot := mt.Total()
		return mt.WAL.BytesWritten + tot.TableBytesFlushed + tot.TableBytesCompacted + tot.BlobBytesFlushed + tot.BlobBytesCompacted
	}
	pebbleBefore := written()
	var read, rewritten int64
	var pass time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		for {
			res := m.Compact(time.Now())
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			read += res.BytesRead
			rewritten += res.BytesWritten
			if res.Done {
				pass = time.Since(t0)
				b.Logf("pass removed %d records, %d MiB", res.RecordsRemoved, res.BytesRemoved>>20)
			}
			if !res.More {
				break
			}
		}
	}
	b.StopTimer()
	after := p.Stats()
	pebbleWritten := written() - pebbleBefore
	if err := store.Compact([]byte{0}, []byte{0xff}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(pass.Seconds(), "s/pass")
	b.ReportMetric(float64(read)/(1<<20), "MiB-read")
	b.ReportMetric(float64(rewritten)/(1<<20), "MiB-rewritten")
	b.ReportMetric(float64(pebbleWritten)/(1<<20), "MiB-pebble-written")
	b.ReportMetric(float64(after.Bytes)/(1<<20), "MiB-left")
	b.Logf("records %d -> %d, bytes %d MiB -> %d MiB, disk after store compaction %d MiB",
		before.Records, after.Records, before.Bytes>>20, after.Bytes>>20, store.DiskUsage()>>20)
}
