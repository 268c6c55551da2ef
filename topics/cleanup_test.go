package topics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// TestCleanupDataDriven runs the scripts in testdata/retention,
// testdata/compaction and testdata/txn-compaction (transaction markers and
// the aborted-transaction index under compaction). Time is explicit in every command (Unix ms), so
// nothing waits. Commands:
//
//	create-topic name=T [partitions=N]     input: one config k=v per line
//	alter-configs topic=T                   input: k=v to set, -k to delete
//	append topic=T ts=MS [partition=P] [now=MS] [codec=none|gzip|lz4|snappy|zstd] [pid=ID seq=S [epoch=E] [txn]] [nowait]
//	                                        input: one record per line, key=value;
//	                                        key "-" is null, value "~" a tombstone;
//	                                        txn: a transactional batch
//	marker topic=T pid=ID commit|abort now=MS [partition=P] [epoch=E]
//	                                        a COMMIT or ABORT marker (AppendAtomic)
//	aborted topic=T [partition=P]           the aborted-transaction index, checked
//	                                        against its rows and the markers
//	read-committed topic=T [partition=P] [max=BYTES]
//	                                        what a read_committed consumer gets from
//	                                        the log start (Kafka's consumer logic,
//	                                        per fetch of at most BYTES)
//	log topic=T [partition=P]               the batches a reader sees, from the log start
//	segments topic=T [partition=P]          the segment rows
//	offsets topic=T [partition=P]           log start, high watermark, size counters
//	fetch topic=T offset=O [partition=P]    the first batch Read returns
//	retention now=MS                        one EnforceRetention call
//	compact now=MS [budget=BYTES] [calls=N]  Compact calls until no work remains (at most N)
//	delete-records topic=T offset=O [partition=P]
//	list-offsets topic=T ts=TS [partition=P]
//	wait-pending                            Wait for appends made with nowait
//	restart                                 close and reopen the store
func TestCleanupDataDriven(t *testing.T) {
	for _, file := range []string{"testdata/retention", "testdata/compaction", "testdata/txn-compaction"} {
		t.Run(file, func(t *testing.T) {
			h := newCleanupHarness(t)
			datadriven.RunTest(t, file, h.run)
		})
	}
}

type cleanupHarness struct {
	t       *testing.T
	fs      vfs.FS
	store   *pebblestore.Store
	m       *Manager
	budget  int64
	pending []*PendingAppend
}

func newCleanupHarness(t *testing.T) *cleanupHarness {
	h := &cleanupHarness{t: t, fs: vfs.NewMem()}
	h.open(0)
	t.Cleanup(func() { _ = h.store.Close() })
	return h
}

func (h *cleanupHarness) open(budget int64) {
	store, err := pebblestore.Open("data", pebblestore.Options{FS: h.fs, Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, CompactionBytesPerCall: budget})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.m, h.budget = store, m, budget
}

func (h *cleanupHarness) partition(t testing.TB, td *datadriven.TestData) *Partition {
	var name string
	td.ScanArgs(t, "topic", &name)
	part := 0
	td.MaybeScanArgs(t, "partition", &part)
	topic, ok := h.m.Topic(name)
	if !ok {
		t.Fatalf("%s: no topic %s", td.Pos, name)
	}
	p, ok := topic.Partition(int32(part))
	if !ok {
		t.Fatalf("%s: no partition %d", td.Pos, part)
	}
	return p
}

func (h *cleanupHarness) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "create-topic":
		var name string
		td.ScanArgs(t, "name", &name)
		parts := 1
		td.MaybeScanArgs(t, "partitions", &parts)
		configs := map[string]string{}
		for _, line := range nonEmptyLines(td.Input) {
			k, v, _ := strings.Cut(line, "=")
			configs[k] = v
		}
		if _, err := h.m.CreateTopic(name, int32(parts), configs, false); err != nil {
			return "error: " + err.Error()
		}
		return "ok"

	case "alter-configs":
		var name string
		td.ScanArgs(t, "topic", &name)
		var ops []ConfigOp
		for _, line := range nonEmptyLines(td.Input) {
			if k, ok := strings.CutPrefix(line, "-"); ok {
				ops = append(ops, ConfigOp{Name: k, Op: ConfigOpDelete})
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			ops = append(ops, ConfigOp{Name: k, Op: ConfigOpSet, Value: &v})
		}
		if err := h.m.AlterTopicConfigs(name, ops, false); err != nil {
			return "error: " + err.Error()
		}
		return "ok"

	case "append":
		p := h.partition(t, td)
		var ts int64
		td.ScanArgs(t, "ts", &ts)
		now := ts
		td.MaybeScanArgs(t, "now", &now)
		codec := CodecNone
		if td.HasArg("codec") {
			var name string
			td.ScanArgs(t, "codec", &name)
			codec = map[string]Codec{"none": CodecNone, "gzip": CodecGzip, "snappy": CodecSnappy, "lz4": CodecLZ4, "zstd": CodecZstd}[name]
		}
		var recs []Record
		for i, line := range nonEmptyLines(td.Input) {
			k, v, _ := strings.Cut(line, "=")
			r := Record{OffsetDelta: int32(i), Key: []byte(k), Value: []byte(v)}
			if k == "-" {
				r.Key = nil
			}
			if v == "~" {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		pid, seq := int64(-1), int32(-1)
		td.MaybeScanArgs(t, "pid", &pid)
		td.MaybeScanArgs(t, "seq", &seq)
		epoch := -1
		if pid >= 0 {
			epoch = 0
		}
		td.MaybeScanArgs(t, "epoch", &epoch)
		attrs := int16(codec)
		if td.HasArg("txn") {
			attrs |= batchAttributeTransactional
		}
		batch, err := EncodeBatch(BatchHeader{Attributes: attrs, BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: int16(epoch), BaseSequence: seq}, recs)
		if err != nil {
			t.Fatal(err)
		}
		a := &Append{Partition: p, Batch: batch}
		pa := h.m.Append([]*Append{a}, time.UnixMilli(now))
		if td.HasArg("nowait") {
			// Applied but not synced: the high watermark stays behind
			// until wait-pending.
			h.pending = append(h.pending, pa)
		} else if err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
		if a.Err != nil {
			return "error: " + a.Err.Error()
		}
		return fmt.Sprintf("offsets %d-%d", a.BaseOffset, a.end-1)

	case "marker":
		p := h.partition(t, td)
		var pid, now int64
		td.ScanArgs(t, "pid", &pid)
		td.ScanArgs(t, "now", &now)
		epoch := 0
		td.MaybeScanArgs(t, "epoch", &epoch)
		if td.HasArg("commit") == td.HasArg("abort") {
			t.Fatalf("%s: marker needs commit or abort", td.Pos)
		}
		appends := MarkerAppends([]Marker{{Partition: p, ProducerID: pid, ProducerEpoch: int16(epoch), Commit: td.HasArg("commit")}}, time.UnixMilli(now))
		pa, err := h.m.AppendAtomic(appends, nil, time.UnixMilli(now))
		if err != nil {
			return "error: " + err.Error()
		}
		if err := pa.Wait(); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("offset %d", appends[0].BaseOffset)

	case "aborted":
		p := h.partition(t, td)
		var sb strings.Builder
		for _, a := range checkAbortedIndex(t, h.store, p) {
			fmt.Fprintf(&sb, "pid=%d first=%d marker=%d\n", a.ProducerID, a.FirstOffset, a.LastOffset)
		}
		if sb.Len() == 0 {
			return "none"
		}
		return sb.String()

	case "read-committed":
		p := h.partition(t, td)
		maxBytes := 1 << 20
		td.MaybeScanArgs(t, "max", &maxBytes)
		return readCommittedView(t, p, maxBytes)

	case "wait-pending":
		for _, pa := range h.pending {
			if err := pa.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		h.pending = nil
		return "ok"

	case "log":
		return describeLog(t, h.partition(t, td))

	case "segments":
		p := h.partition(t, td)
		segs, err := p.loadSegments()
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for _, s := range segs {
			fmt.Fprintf(&sb, "[%d-%d] size=%d records=%d roll=%d max=%d\n", s.Base, s.LastOffset, s.Size, s.Records, s.RollTimestamp, s.MaxTimestamp)
		}
		checkSegments(t, h.store, p)
		if sb.Len() == 0 {
			return "none"
		}
		return sb.String()

	case "offsets":
		st := h.partition(t, td).Stats()
		return fmt.Sprintf("start=%d hwm=%d bytes=%d records=%d", st.LogStartOffset, st.HighWatermark, st.Bytes, st.Records)

	case "fetch":
		p := h.partition(t, td)
		var off int64
		td.ScanArgs(t, "offset", &off)
		buf, _, err := p.Read(off, 1, true, nil)
		if err != nil {
			return "error: " + err.Error()
		}
		if len(buf) == 0 {
			return "no records"
		}
		bh, err := ParseBatchHeader(buf)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("batch %d-%d", bh.BaseOffset, bh.LastOffset())

	case "list-offsets":
		p := h.partition(t, td)
		var ts int64
		td.ScanArgs(t, "ts", &ts)
		off, stamp, err := p.OffsetForTimestamp(ts)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("offset=%d timestamp=%d", off, stamp)

	case "retention":
		var now int64
		td.ScanArgs(t, "now", &now)
		res := h.m.EnforceRetention(time.UnixMilli(now))
		if res.Err != nil {
			return "error: " + res.Err.Error()
		}
		var sb strings.Builder
		for _, tr := range res.Trimmed {
			fmt.Fprintf(&sb, "%s/%d: deleted %d segments, %d bytes, %d records; log start %d\n", tr.Topic, tr.Partition, tr.Segments, tr.Bytes, tr.Records, tr.LogStartOffset)
		}
		if sb.Len() == 0 {
			return "nothing to delete"
		}
		return sb.String()

	case "compact":
		var now int64
		td.ScanArgs(t, "now", &now)
		if td.HasArg("budget") {
			var budget int64
			td.ScanArgs(t, "budget", &budget)
			h.m.cfg.CompactionBytesPerCall = budget
		}
		maxCalls := 1000
		td.MaybeScanArgs(t, "calls", &maxCalls)
		var sb strings.Builder
		calls := 0
		for {
			if calls == maxCalls {
				fmt.Fprintf(&sb, "stopped after %d calls\n", calls)
				break
			}
			res := h.m.Compact(time.UnixMilli(now))
			if res.Err != nil {
				return "error: " + res.Err.Error()
			}
			if !res.More {
				break
			}
			calls++
			if calls > 1000 {
				t.Fatal("compaction does not finish")
			}
			if res.Done {
				fmt.Fprintf(&sb, "cleaned %s/%d: removed %d records, %d bytes\n", res.Topic, res.Partition, res.RecordsRemoved, res.BytesRemoved)
			}
		}
		if sb.Len() == 0 {
			return "nothing to clean"
		}
		return sb.String()

	case "delete-records":
		p := h.partition(t, td)
		var off int64
		td.ScanArgs(t, "offset", &off)
		low, err := p.DeleteRecordsBefore(off)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("low watermark %d", low)

	case "restart":
		budget := h.m.cfg.CompactionBytesPerCall
		if err := h.store.Close(); err != nil {
			t.Fatal(err)
		}
		h.open(budget)
		return "ok"
	}
	t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
	return ""
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// describeLog reads the partition from its log start to the high
// watermark as a consumer would and prints each batch: its offset range,
// whether compaction stamped a delete horizon, and its records as
// offset:key=value (- null key, ~ tombstone) with their timestamps.
func describeLog(t testing.TB, p *Partition) string {
	var sb strings.Builder
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
			fmt.Fprintf(&sb, "batch %d-%d", h.BaseOffset, h.LastOffset())
			if h.HasDeleteHorizon() {
				fmt.Fprintf(&sb, " horizon=%d", h.BaseTimestamp)
			}
			if c := h.Codec(); c != CodecNone {
				fmt.Fprintf(&sb, " codec=%d", c)
			}
			if h.IsControl() {
				commit, err := ControlBatchCommit(buf[:h.Size()])
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&sb, " pid=%d marker=%s\n", h.ProducerID, map[bool]string{true: "COMMIT", false: "ABORT"}[commit])
				off = h.LastOffset() + 1
				buf = buf[h.Size():]
				continue
			}
			if h.IsTransactional() {
				sb.WriteString(" txn")
			}
			if h.ProducerID >= 0 {
				fmt.Fprintf(&sb, " pid=%d seq=%d", h.ProducerID, h.BaseSequence)
			}
			sb.WriteString(":")
			for _, r := range recs {
				k, v := string(r.Key), string(r.Value)
				if r.Key == nil {
					k = "-"
				}
				if r.Value == nil {
					v = "~"
				}
				fmt.Fprintf(&sb, " %d:%s=%s@%d", h.BaseOffset+int64(r.OffsetDelta), k, v, h.BaseTimestamp+r.TimestampDelta)
			}
			sb.WriteString("\n")
			off = h.LastOffset() + 1
			buf = buf[h.Size():]
		}
	}
	if sb.Len() == 0 {
		return "empty"
	}
	return sb.String()
}

// checkSegments verifies the segment invariants of pebblestore/keys.go
// against the stored batches: every batch at or after the first segment
// lies in the segment with the greatest base <= its base, each segment row
// sums its batches, and the size counters equal the sums.
func checkSegments(t testing.TB, store *pebblestore.Store, p *Partition) {
	t.Helper()
	segs, err := loadSegments(store, p.Topic, p.Index)
	if err != nil {
		t.Fatal(err)
	}
	type sum struct{ size, records int64 }
	sums := map[int64]*sum{}
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixBatch, p.Topic.ID, p.Index)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var last int64 = -1
	for ok := it.First(); ok; ok = it.Next() {
		base := pebblestore.OffsetFromKey(it.Key())
		v, _ := it.Value()
		h, err := ParseBatchHeader(v)
		if err != nil {
			t.Fatal(err)
		}
		i := sort.Search(len(segs), func(i int) bool { return segs[i].Base > base }) - 1
		if i < 0 {
			t.Fatalf("batch at %d has no segment (segments %v)", base, segs)
		}
		if idx, err := store.Get(pebblestore.BatchIndexKey(p.Topic.ID, p.Index, base)); err != nil {
			t.Fatalf("batch at %d has no index row: %v", base, err)
		} else if bi, _ := decodeBatchIndex(idx); bi.LastOffset != h.LastOffset() || int(bi.Size) != len(v) {
			t.Fatalf("index row of batch %d says last %d size %d; the batch has %d and %d", base, bi.LastOffset, bi.Size, h.LastOffset(), len(v))
		}
		s := sums[segs[i].Base]
		if s == nil {
			s = &sum{}
			sums[segs[i].Base] = s
		}
		s.size += int64(len(v))
		s.records += int64(h.NumRecords)
		last = h.LastOffset()
	}
	var size, records int64
	for _, seg := range segs {
		s := sums[seg.Base]
		if s == nil {
			s = &sum{}
		}
		if s.size != seg.Size || s.records != seg.Records {
			t.Fatalf("segment %d says size %d records %d; its batches hold %d and %d", seg.Base, seg.Size, seg.Records, s.size, s.records)
		}
		size += s.size
		records += s.records
	}
	if len(segs) > 0 && segs[len(segs)-1].LastOffset != last {
		t.Fatalf("the active segment ends at %d, the last batch at %d", segs[len(segs)-1].LastOffset, last)
	}
	if st := p.Stats(); st.Bytes != size || st.Records != records {
		t.Fatalf("size counters say %d bytes %d records; the segments %d and %d", st.Bytes, st.Records, size, records)
	}
}

// checkAbortedIndex returns the partition's aborted-transaction index and
// checks it: the stored rows equal the index in memory, and every entry's
// marker is an ABORT marker still in the store (an entry without its
// marker would make readers drop the producer's later data).
func checkAbortedIndex(t testing.TB, store *pebblestore.Store, p *Partition) []AbortedTxn {
	t.Helper()
	index := p.AbortedTransactions()
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixTxnAborted, p.Topic.ID, p.Index)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		at := pebblestore.OffsetFromKey(it.Key())
		if i >= len(index) || index[i].LastOffset != at {
			t.Fatalf("aborted index row for the marker at %d; the index in memory: %+v", at, index)
		}
		i++
	}
	if i != len(index) {
		t.Fatalf("%d aborted index rows, %d entries in memory: %+v", i, len(index), index)
	}
	for _, a := range index {
		raw, err := store.Get(pebblestore.BatchKey(p.Topic.ID, p.Index, a.LastOffset))
		if err != nil {
			t.Fatalf("aborted transaction %+v: its marker is gone: %v", a, err)
		}
		h, err := ParseBatchHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		commit, err := ControlBatchCommit(raw)
		if err != nil || !h.IsControl() || commit || h.ProducerID != a.ProducerID {
			t.Fatalf("aborted transaction %+v: the batch at its marker offset is not its ABORT marker", a)
		}
	}
	return index
}

// committedRecord is one record a read_committed consumer got.
type committedRecord struct {
	offset int64
	key    string
	value  *string
}

// readCommittedRecords reads the partition from its log start to its last
// stable offset as a read_committed Kafka consumer does (the Java
// consumer's CompletedFetch): each fetch of at most maxBytes returns
// batches and the aborted transactions overlapping them; a producer enters
// the aborted set when a batch reaches the first offset of one of its
// aborted transactions, and leaves it at its ABORT marker; its
// transactional batches in between are dropped, control batches are never
// delivered. It returns the records delivered and the LSO.
func readCommittedRecords(t testing.TB, p *Partition, maxBytes int) ([]committedRecord, int64) {
	t.Helper()
	var out []committedRecord
	off := p.LogStartOffset()
	lso := p.LastStableOffset()
	for off < lso {
		buf, res, err := p.ReadCommitted(off, maxBytes, true, nil)
		if err != nil {
			t.Fatalf("read_committed at %d: %v", off, err)
		}
		if len(buf) == 0 {
			break
		}
		queue := append([]AbortedTxn(nil), res.Aborted...)
		sort.Slice(queue, func(i, j int) bool { return queue[i].FirstOffset < queue[j].FirstOffset })
		abortedPIDs := map[int64]bool{}
		for len(buf) > 0 {
			h, err := ParseBatchHeader(buf)
			if err != nil {
				t.Fatal(err)
			}
			raw := buf[:h.Size()]
			buf = buf[h.Size():]
			off = h.LastOffset() + 1
			for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
				abortedPIDs[queue[0].ProducerID] = true
				queue = queue[1:]
			}
			if h.IsControl() {
				if commit, err := ControlBatchCommit(raw); err != nil {
					t.Fatal(err)
				} else if !commit {
					delete(abortedPIDs, h.ProducerID)
				}
				continue
			}
			if h.IsTransactional() && abortedPIDs[h.ProducerID] {
				continue
			}
			_, recs, err := DecodeRecords(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				cr := committedRecord{offset: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key)}
				if r.Value != nil {
					v := string(r.Value)
					cr.value = &v
				}
				out = append(out, cr)
			}
		}
	}
	return out, lso
}

// readCommittedView prints readCommittedRecords: offset:key=value (~ a
// tombstone) and the LSO.
func readCommittedView(t testing.TB, p *Partition, maxBytes int) string {
	t.Helper()
	recs, lso := readCommittedRecords(t, p, maxBytes)
	var sb strings.Builder
	for _, r := range recs {
		v := "~"
		if r.value != nil {
			v = *r.value
		}
		fmt.Fprintf(&sb, "%d:%s=%s ", r.offset, r.key, v)
	}
	return strings.TrimSpace(sb.String()) + fmt.Sprintf("\nlso=%d", lso)
}
