package topics

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// The append and read paths' microbenchmarks and allocation assertions
// (issue 14), on a real pebblestore in a temp dir (TMPDIR):
//
//	go test ./topics -run '^$' -bench 'BenchmarkAppend|BenchmarkRead' -benchmem -count 3
//	go test ./topics -run 'TestAppendAllocs|TestReadAllocs' -v
//
// MB/s counts batch bytes (records, their framing and the 61-byte batch
// header: 1.3% above the record bytes broker-load counts).

// benchRecordSize is the value size of every benchmark record, as in
// bench/run.sh.
const benchRecordSize = 1024

// benchAppend is the one place the benchmarks call Manager.Append, so a
// change of its signature (the clock's type) is a one-line change here.
func benchAppend(m *Manager, appends []*Append) *PendingAppend {
	return m.Append(appends, time.UnixMilli(benchNow()))
}

// benchNow is the broker clock the benchmarks append with.
func benchNow() int64 { return time.Now().UnixMilli() }

// benchBatch encodes one uncompressed batch of n records with 1 KiB values
// and no keys, timestamped now; producerID -1 is a plain producer, >= 0 an
// idempotent one (epoch 0, base sequence 0).
func benchBatch(tb testing.TB, n int, producerID int64) []byte {
	tb.Helper()
	now := benchNow()
	value := make([]byte, benchRecordSize)
	for i := range value {
		value[i] = byte(i * 7)
	}
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Value: value}
	}
	seq := int32(-1)
	if producerID >= 0 {
		seq = 0
	}
	batch, err := EncodeBatch(BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: producerID, ProducerEpoch: 0, BaseSequence: seq}, recs)
	if err != nil {
		tb.Fatal(err)
	}
	return batch
}

// benchSetSequence rewrites an idempotent batch's base sequence and its
// CRC in place, so that the same buffer can be appended again as the
// producer's next batch.
func benchSetSequence(batch []byte, seq int32) {
	batch[batchBaseSequenceOffset] = byte(seq >> 24)
	batch[batchBaseSequenceOffset+1] = byte(seq >> 16)
	batch[batchBaseSequenceOffset+2] = byte(seq >> 8)
	batch[batchBaseSequenceOffset+3] = byte(seq)
	batchUpdateCRC(batch)
}

// openBenchManager opens a store in a fresh temp dir with the broker's
// defaults (64 MiB memtables, value separation), synced unless noSync, and
// a topic of the given partitions.
func openBenchManager(tb testing.TB, noSync bool, partitions int32) (*Manager, []*Partition) {
	tb.Helper()
	store, err := pebblestore.Open(tb.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), NoSync: noSync})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		tb.Fatal(err)
	}
	topic, err := m.CreateTopic("bench", partitions, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	return m, topic.Partitions()
}

// BenchmarkAppend appends one batch of 1 KiB records to each of 1 or 8
// partitions per operation (one Append call, as one produce request
// carries them) and waits until it is durable, as the produce handler
// does: validation and CRC, offsets, the Pebble batch, its apply (WAL write
// and memtable insert) and, unless nosync, the fsync. Memtable flushes
// and blob files run in Pebble's background goroutines and show in the
// time only as far as they take CPU from the loop (2 cores here). One
// writer: every op waits for its own fsync, so sync/16KiB is fsync-bound.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []string{"sync", "nosync"} {
		for _, records := range []int{16, 1000} {
			for _, partitions := range []int32{1, 8} {
				name := fmt.Sprintf("%s/batch=%s/partitions=%d", sync, batchSizeName(records), partitions)
				b.Run(name, func(b *testing.B) {
					m, parts := openBenchManager(b, sync == "nosync", partitions)
					appends := make([]*Append, len(parts))
					batches := make([][]byte, len(parts))
					bytes := 0
					for i := range parts {
						batches[i] = benchBatch(b, records, -1)
						bytes += len(batches[i])
					}
					b.SetBytes(int64(bytes))
					for b.Loop() {
						for i, p := range parts {
							// Append rewrites the header (base offset) in
							// place and Pebble copies the bytes: the buffer
							// can be sent again.
							appends[i] = &Append{Partition: p, Batch: batches[i]}
						}
						pa := benchAppend(m, appends)
						if err := pa.Wait(); err != nil {
							b.Fatal(err)
						}
						for _, a := range appends {
							if a.Err != nil {
								b.Fatal(a.Err)
							}
						}
					}
				})
			}
		}
	}
}

// batchSizeName names a batch of n 1 KiB records by its size.
func batchSizeName(n int) string {
	if n >= 1000 {
		return "1MiB"
	}
	return fmt.Sprintf("%dKiB", n)
}

// BenchmarkRead reads batches back as a fetch does (Partition.Read into a
// reused buffer, maxBytes 1 MiB, the fetch default per partition), from a
// partition of 64 MiB written before the timer starts, cycling through its
// offsets. After the writes the store is flushed, so the values come
// from blob files through the block cache, as for a consumer that is not
// at the tail; "memtable" reads the tail before any flush.
func BenchmarkRead(b *testing.B) {
	for _, records := range []int{16, 1000} {
		for _, where := range []string{"flushed", "memtable"} {
			b.Run(fmt.Sprintf("batch=%s/%s", batchSizeName(records), where), func(b *testing.B) {
				m, parts := openBenchManager(b, true, 1)
				p := parts[0]
				batch := benchBatch(b, records, -1)
				total := 32 << 20 // half a memtable: no flush before the reads
				if where == "flushed" {
					total = 64 << 20
				}
				for n := 0; n < total; n += len(batch) {
					a := &Append{Partition: p, Batch: batch}
					if err := benchAppend(m, []*Append{a}).Wait(); err != nil || a.Err != nil {
						b.Fatal(err, a.Err)
					}
				}
				if where == "flushed" {
					if err := m.store.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				hwm := p.HighWatermark()
				const maxBytes = 1 << 20
				perRead := int64(maxBytes / len(batch)) // batches every read returns
				b.SetBytes(perRead * int64(len(batch)))
				dst := make([]byte, 0, maxBytes)
				var offset int64
				for b.Loop() {
					var res ReadResult
					var err error
					dst, res, err = p.Read(offset, maxBytes, true, dst[:0])
					if err != nil {
						b.Fatal(err)
					}
					if int64(res.Bytes) != perRead*int64(len(batch)) {
						b.Fatalf("read %d bytes at offset %d, want %d", res.Bytes, offset, perRead*int64(len(batch)))
					}
					offset += perRead * int64(records)
					if offset+perRead*int64(records) > hwm {
						offset = 0
					}
				}
			})
		}
	}
}

// BenchmarkAppendIdempotent is BenchmarkAppend/nosync with 1 MiB batches
// of an idempotent producer (as kgo sends them by default, and
// bench/run.sh): each append also writes the producer-state row. The
// loop re-stamps each batch's sequence and CRC, a CRC pass more than the
// broker does. Its B/op is the figure to watch: keep -benchtime small
// enough (8 partitions: 6x; 1 partition: 48x) that no memtable flush runs,
// whose allocations would count too.
//
//	go test ./topics -run '^$' -bench BenchmarkAppendIdempotent/partitions=8 -benchmem -benchtime 6x
func BenchmarkAppendIdempotent(b *testing.B) {
	for _, partitions := range []int32{1, 8} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			m, parts := openBenchManager(b, true, partitions)
			appends := make([]*Append, len(parts))
			batches := make([][]byte, len(parts))
			bytes := 0
			for i := range parts {
				batches[i] = benchBatch(b, 1000, int64(i+1))
				bytes += len(batches[i])
			}
			b.SetBytes(int64(bytes))
			seq := int32(0)
			for b.Loop() {
				for i, p := range parts {
					benchSetSequence(batches[i], seq)
					appends[i] = &Append{Partition: p, Batch: batches[i]}
				}
				seq += 1000
				if err := benchAppend(m, appends).Wait(); err != nil {
					b.Fatal(err)
				}
				for _, a := range appends {
					if a.Err != nil || a.Duplicate {
						b.Fatal(a.Err, a.Duplicate)
					}
				}
			}
		})
	}
}
