package txns

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	t     *testing.T
	dir   string
	cfg   Config
	now   time.Time
	store *pebblestore.Store
	tm    *topics.Manager
	c     *Coordinator
	part  *topics.Partition
	seq   map[int64]int32
	// freeMin and probe configure the store's free-space guard (off by
	// default).
	freeMin int64
	probe   pebblestore.SpaceProbe
}

func newHarness(t *testing.T, cfg Config, opts ...func(*harness)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), cfg: cfg, now: start, seq: map[int64]int32{}}
	for _, o := range opts {
		o(h)
	}
	h.open()
	if _, err := h.tm.CreateTopic("t", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	h.loadPartition()
	t.Cleanup(func() { h.close() })
	return h
}

func (h *harness) open() {
	h.t.Helper()
	store, err := pebblestore.Open(h.dir, pebblestore.Options{NoSync: true, FreeSpaceMin: h.freeMin, FreeSpaceProbe: h.probe})
	if err != nil {
		h.t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{DefaultPartitions: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := Open(store, tm, h.cfg, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.tm, h.c = store, tm, c
}

func (h *harness) loadPartition() {
	tp, ok := h.tm.Topic("t")
	if !ok {
		h.t.Fatal("topic t missing")
	}
	h.part, _ = tp.Partition(0)
}

func (h *harness) close() {
	if h.c != nil {
		h.c.Close()
	}
	if h.store != nil {
		_ = h.store.Close()
		h.store = nil
	}
}

func (h *harness) restart() {
	h.close()
	h.open()
	h.loadPartition()
}

// produce appends a batch of n records for the producer; transactional
// when txn is set.
func (h *harness) produce(pid int64, epoch int16, n int, txn bool) (int64, error) {
	h.t.Helper()
	hdr := topics.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: h.seq[pid], BaseTimestamp: h.now.UnixMilli(), MaxTimestamp: h.now.UnixMilli()}
	if txn {
		hdr.Attributes = 0x10
	}
	recs := make([]topics.Record, n)
	for i := range recs {
		recs[i] = topics.Record{OffsetDelta: int32(i), Value: []byte("v")}
	}
	batch, err := topics.EncodeBatch(hdr, recs)
	if err != nil {
		h.t.Fatal(err)
	}
	a := &topics.Append{Partition: h.part, Batch: batch}
	pa := h.tm.Append([]*topics.Append{a}, h.now)
	_ = pa.Wait()
	if a.Err == nil {
		h.seq[pid] += int32(n)
	}
	return a.BaseOffset, a.Err
}

func (h *harness) begin(id string, timeout int32) (int64, int16) {
	h.t.Helper()
	pid, epoch, err := h.c.InitProducerID(id, timeout, -1, -1, h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.AddPartitions(id, pid, epoch, []TopicPartition{{"t", 0}}, h.now); err != nil {
		h.t.Fatal(err)
	}
	return pid, epoch
}

func TestInitProducerIDBumpsEpochAndFences(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch, err := h.c.InitProducerID("a", 10000, -1, -1, h.now)
	if err != nil || epoch != 0 {
		t.Fatalf("first init: %d/%d %v", pid, epoch, err)
	}
	pid2, epoch2, err := h.c.InitProducerID("a", 10000, -1, -1, h.now)
	if err != nil || pid2 != pid || epoch2 != 1 {
		t.Fatalf("second init: %d/%d %v, want %d/1", pid2, epoch2, err, pid)
	}
	if err := h.c.AddPartitions("a", pid, 0, []TopicPartition{{"t", 0}}, h.now); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("old epoch: %v, want ErrProducerFenced", err)
	}
	if err := h.c.AddPartitions("a", pid+1, 1, []TopicPartition{{"t", 0}}, h.now); !errors.Is(err, ErrInvalidProducerIDMapping) {
		t.Fatalf("wrong producer id: %v", err)
	}
	// KIP-360: a producer naming an epoch that is not current is fenced.
	if _, _, err := h.c.InitProducerID("a", 10000, pid, 0, h.now); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("KIP-360 init with an old epoch: %v", err)
	}
	if _, e, err := h.c.InitProducerID("a", 10000, pid, 1, h.now); err != nil || e != 2 {
		t.Fatalf("KIP-360 init with the current epoch: %d %v", e, err)
	}
}

func TestInitProducerIDTimeout(t *testing.T) {
	h := newHarness(t, Config{MaxTimeout: time.Minute})
	for _, ms := range []int32{0, -1, 60001} {
		if _, _, err := h.c.InitProducerID("a", ms, -1, -1, h.now); !errors.Is(err, ErrInvalidTransactionTimeout) {
			t.Errorf("timeout %d: %v, want ErrInvalidTransactionTimeout", ms, err)
		}
	}
	if _, _, err := h.c.InitProducerID("a", 60000, -1, -1, h.now); err != nil {
		t.Fatal(err)
	}
}

func TestCommitMovesLastStableOffset(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.produce(1000, 0, 2, false); err != nil { // plain data first
		t.Fatal(err)
	}
	pid, epoch := h.begin("a", 10000)
	first, err := h.produce(pid, epoch, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	if first != 2 {
		t.Fatalf("first transactional offset %d", first)
	}
	if err := h.c.CheckProduce(pid, epoch, "t", 0); err != nil {
		t.Fatal(err)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 2 || hwm != 5 {
		t.Fatalf("open transaction: lso %d hwm %d, want 2 5", lso, hwm)
	}
	_, res, err := h.part.ReadCommitted(0, 1<<20, true, nil)
	if err != nil || res.LastStableOffset != 2 {
		t.Fatalf("read_committed: %+v %v", res, err)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 6 || hwm != 6 {
		t.Fatalf("committed: lso %d hwm %d, want 6 6 (marker at 5)", lso, hwm)
	}
	_, res, _ = h.part.ReadCommitted(0, 1<<20, true, nil)
	if len(res.Aborted) != 0 {
		t.Fatalf("aborted after commit: %+v", res.Aborted)
	}
	// After the commit the partition is no longer in a transaction.
	if err := h.c.CheckProduce(pid, epoch, "t", 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("produce after commit: %v", err)
	}
	// A retried EndTxn succeeds; the opposite outcome does not.
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
}

func TestAbortIsIndexed(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch := h.begin("a", 10000)
	if _, err := h.produce(pid, epoch, 4, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		_, res, err := h.part.ReadCommitted(0, 1<<20, true, nil)
		if err != nil || res.LastStableOffset != 5 {
			t.Fatalf("%s: %+v %v", when, res, err)
		}
		if len(res.Aborted) != 1 || res.Aborted[0] != (topics.AbortedTxn{ProducerID: pid, FirstOffset: 0, LastOffset: 4}) {
			t.Fatalf("%s: aborted %+v", when, res.Aborted)
		}
		// A read starting after the marker lists nothing.
		_, res, _ = h.part.ReadCommitted(5, 1<<20, true, nil)
		if len(res.Aborted) != 0 {
			t.Fatalf("%s: aborted past the marker %+v", when, res.Aborted)
		}
	}
	check("before restart")
	h.restart()
	check("after restart")
}

func TestTimedOutTransactionIsAbortedAndFenced(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch := h.begin("a", 1000)
	if _, err := h.produce(pid, epoch, 1, true); err != nil {
		t.Fatal(err)
	}
	h.c.Tick(h.now.Add(time.Second)) // not yet past the timeout
	if lso := h.part.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d before the timeout", lso)
	}
	h.c.Tick(h.now.Add(1001 * time.Millisecond))
	if lso := h.part.LastStableOffset(); lso != 2 {
		t.Fatalf("lso %d after the timeout, want 2", lso)
	}
	d, _ := h.c.Describe("a")
	if d.State != StateCompleteAbort || d.Epoch != epoch+1 {
		t.Fatalf("after timeout: %+v", d)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit by the timed-out producer: %v", err)
	}
	// The marker's newer epoch fences the old epoch on the partition too.
	if _, err := h.produce(pid, epoch, 1, false); !errors.Is(err, topics.ErrInvalidProducerEpoch) {
		t.Fatalf("produce with the fenced epoch: %v", err)
	}
}

func TestReinitAbortsOngoing(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch := h.begin("a", 10000)
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	pid2, epoch2, err := h.c.InitProducerID("a", 10000, -1, -1, h.now)
	if err != nil || pid2 != pid || epoch2 != epoch+2 {
		t.Fatalf("re-init: %d/%d %v", pid2, epoch2, err)
	}
	_, res, _ := h.part.ReadCommitted(0, 1<<20, true, nil)
	if res.LastStableOffset != 3 || len(res.Aborted) != 1 {
		t.Fatalf("after re-init: %+v", res)
	}
	if err := h.c.CheckProduce(pid, epoch, "t", 0); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie produce: %v", err)
	}
}

func TestStagedOffsetsCommitOnlyOnCommit(t *testing.T) {
	var applied []string
	var h *harness
	h = newHarness(t, Config{CommitOffsets: func(offsets map[string][]Offset, markers []*topics.Append, extra func(*pebblestore.Batch), now time.Time) error {
		for group, os := range offsets {
			for _, o := range os {
				applied = append(applied, group+"/"+o.Topic)
			}
		}
		pa, err := h.tm.AppendAtomic(markers, extra, now)
		if err != nil {
			return err
		}
		return pa.Wait()
	}})
	pid, epoch := h.begin("a", 10000)
	if err := h.c.StageOffsets("a", pid, epoch, "g", []Offset{{Topic: "in", Offset: 3}}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("offsets without AddOffsets: %v", err)
	}
	if err := h.c.AddOffsets("a", pid, epoch, "g", h.now); err != nil {
		t.Fatal(err)
	}
	if err := h.c.StageOffsets("a", pid, epoch, "g", []Offset{{Topic: "in", Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if !h.c.PendingOffset("g", "in", 0) {
		t.Fatal("staged offset not pending")
	}
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 || h.c.PendingOffset("g", "in", 0) {
		t.Fatalf("abort applied %v", applied)
	}
	if err := h.c.AddOffsets("a", pid, epoch, "g", h.now); err != nil {
		t.Fatal(err)
	}
	if err := h.c.StageOffsets("a", pid, epoch, "g", []Offset{{Topic: "in", Offset: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0] != "g/in" {
		t.Fatalf("commit applied %v", applied)
	}
}

// TestRestartCompletesPreparedTransaction pins that a transaction found in
// PrepareCommit at Open (the broker stopped between recording the decision
// and the one write that completes it) is completed: markers written, LSO
// released.
func TestRestartCompletesPreparedTransaction(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch := h.begin("a", 10000)
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	// An ongoing transaction survives a restart with its LSO.
	h.restart()
	if lso := h.part.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d after restart with an open transaction", lso)
	}
	h.c.mu.Lock()
	tx := h.c.mu.txns["a"]
	tx.State = StatePrepareCommit
	w := h.c.writeLocked(tx)
	h.c.mu.Unlock()
	if err := h.c.wait(w); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 3 || hwm != 3 {
		t.Fatalf("after recovery: lso %d hwm %d, want 3 3", lso, hwm)
	}
	if d, _ := h.c.Describe("a"); d.State != StateCompleteCommit {
		t.Fatalf("state %v", d.State)
	}
}

// TestRetentionPrunesAbortedIndex pins that retention, deleting the
// segments that hold an aborted transaction and its marker, also drops the
// transaction from the aborted index, in memory and in the store.
func TestRetentionPrunesAbortedIndex(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.tm.CreateTopic("r", 1, map[string]string{"segment.ms": "1", "retention.ms": "1000"}, false); err != nil {
		t.Fatal(err)
	}
	tp, _ := h.tm.Topic("r")
	h.part, _ = tp.Partition(0)
	pid, epoch, err := h.c.InitProducerID("a", 10000, -1, -1, h.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{{"r", 0}}, h.now); err != nil {
		t.Fatal(err)
	}
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); err != nil {
		t.Fatal(err)
	}
	if got := h.part.AbortedTransactions(); len(got) != 1 {
		t.Fatalf("aborted index before retention: %+v", got)
	}
	h.now = h.now.Add(time.Hour)
	if _, err := h.produce(2000, 0, 1, false); err != nil { // rolls a new segment
		t.Fatal(err)
	}
	h.tm.EnforceRetention(h.now)
	if ls := h.part.LogStartOffset(); ls != 3 {
		t.Fatalf("log start %d after retention, want 3", ls)
	}
	check := func(when string) {
		t.Helper()
		if got := h.part.AbortedTransactions(); len(got) != 0 {
			t.Fatalf("%s: aborted index %+v", when, got)
		}
	}
	check("after retention")
	h.close()
	h.open()
	tp, _ = h.tm.Topic("r")
	h.part, _ = tp.Partition(0)
	check("after restart")
}

// TestDeleteRecordsPastOpenTransaction pins a bug: DeleteRecords past the
// first records of an open transaction left the last stable offset at
// those deleted records, below the log start, so a read_committed reader
// starting at the LSO (ListOffsets latest) got OFFSET_OUT_OF_RANGE, reset
// to the LSO, and looped until the transaction ended. The LSO is now never
// below the log start; the transaction still holds back what follows it.
func TestDeleteRecordsPastOpenTransaction(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.produce(2000, 0, 1, false); err != nil { // 0
		t.Fatal(err)
	}
	pid, epoch := h.begin("a", 10000)
	if _, err := h.produce(pid, epoch, 2, true); err != nil { // 1-2
		t.Fatal(err)
	}
	if _, err := h.produce(2000, 0, 1, false); err != nil { // 3
		t.Fatal(err)
	}
	if lso := h.part.LastStableOffset(); lso != 1 {
		t.Fatalf("last stable offset %d with the transaction open, want 1", lso)
	}
	if start, err := h.part.DeleteRecordsBefore(2); err != nil || start != 2 {
		t.Fatalf("DeleteRecordsBefore(2): %d %v", start, err)
	}
	if lso := h.part.LastStableOffset(); lso != 2 {
		t.Fatalf("last stable offset %d after DeleteRecords to 2, want the log start 2", lso)
	}
	_, res, err := h.part.ReadCommitted(2, 1<<20, true, nil)
	if err != nil || res.LastStableOffset != 2 || res.Bytes != 0 {
		t.Fatalf("read_committed at the log start: %v, %+v; want no error, nothing past the open transaction", err, res)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 5 || hwm != 5 {
		t.Fatalf("after the commit: last stable offset %d, high watermark %d; want 5 and 5", lso, hwm)
	}
}

// TestLateBatchAfterTimeoutAbortIsFenced pins the hanging-transaction race:
// the broker aborts a timed-out transaction on a partition the producer has
// not written yet; a batch of the old epoch arriving afterwards (it passed
// the coordinator's check before the abort) must be refused by the
// partition, or it would open a transaction nothing ends and hold the LSO.
func TestLateBatchAfterTimeoutAbortIsFenced(t *testing.T) {
	h := newHarness(t, Config{})
	pid, epoch := h.begin("a", 1000)
	h.c.Tick(h.now.Add(2 * time.Second))
	if _, err := h.produce(pid, epoch, 1, true); !errors.Is(err, topics.ErrInvalidProducerEpoch) {
		t.Fatalf("late batch of the aborted epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != hwm {
		t.Fatalf("lso %d hwm %d: a transaction hangs", lso, hwm)
	}
}

// TestReinitAfterTimeoutWithLastEpoch: after the broker aborted a timed-out
// transaction (bumping the epoch), its producer may re-initialize with the
// epoch it knows (KIP-360) instead of being fenced; an older one is fenced.
func TestReinitAfterTimeoutWithLastEpoch(t *testing.T) {
	h := newHarness(t, Config{})
	pid, _, err := h.c.InitProducerID("a", 1000, -1, -1, h.now)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := h.c.InitProducerID("a", 1000, pid, 0, h.now) // epoch 1
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{{"t", 0}}, h.now); err != nil {
		t.Fatal(err)
	}
	h.c.Tick(h.now.Add(2 * time.Second))
	if _, _, err := h.c.InitProducerID("a", 1000, pid, epoch-1, h.now); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("re-init with an older epoch: %v", err)
	}
	_, e, err := h.c.InitProducerID("a", 1000, pid, epoch, h.now)
	if err != nil || e != epoch+2 {
		t.Fatalf("re-init with the epoch before the timeout: %d %v, want %d", e, err, epoch+2)
	}
	// Only once: the next re-init must name the new epoch.
	if _, _, err := h.c.InitProducerID("a", 1000, pid, epoch, h.now); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("second re-init with the old epoch: %v", err)
	}
}

// TestIdleTransactionalIDsExpire: an ID without an open transaction is
// forgotten after IDExpiration, also across a restart; an open one is not.
func TestIdleTransactionalIDsExpire(t *testing.T) {
	h := newHarness(t, Config{IDExpiration: time.Hour, MaxTimeout: 2 * time.Hour})
	if _, _, err := h.c.InitProducerID("idle", 1000, -1, -1, h.now); err != nil {
		t.Fatal(err)
	}
	h.begin("open", int32((90 * time.Minute).Milliseconds()))
	h.c.Tick(h.now.Add(time.Hour))
	if _, ok := h.c.Describe("idle"); !ok {
		t.Fatal("forgotten before the expiration")
	}
	h.now = h.now.Add(time.Hour + time.Second)
	h.c.Tick(h.now)
	if _, ok := h.c.Describe("idle"); ok {
		t.Fatal("idle id not forgotten")
	}
	if _, ok := h.c.Describe("open"); !ok {
		t.Fatal("id with an open transaction forgotten")
	}
	h.restart()
	if _, ok := h.c.Describe("idle"); ok {
		t.Fatal("idle id back after restart")
	}
}

// TestCompactionDropsAbortedData pins that compaction neither lets an
// aborted record shadow the committed value of its key (it would remove the
// committed one, leaving read_committed readers nothing) nor keeps the
// aborted batch.
func TestCompactionDropsAbortedData(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.tm.CreateTopic("c", 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01"}, false); err != nil {
		t.Fatal(err)
	}
	tp, _ := h.tm.Topic("c")
	h.part, _ = tp.Partition(0)
	produce := func(pid int64, epoch int16, key, value string, txn bool) {
		t.Helper()
		hdr := topics.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: h.seq[pid], BaseTimestamp: h.now.UnixMilli(), MaxTimestamp: h.now.UnixMilli()}
		if txn {
			hdr.Attributes = 0x10
		}
		batch, err := topics.EncodeBatch(hdr, []topics.Record{{Key: []byte(key), Value: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		a := &topics.Append{Partition: h.part, Batch: batch}
		_ = h.tm.Append([]*topics.Append{a}, h.now).Wait()
		if a.Err != nil {
			t.Fatal(a.Err)
		}
		h.seq[pid]++
		h.now = h.now.Add(time.Second) // every batch rolls a segment
	}
	produce(3000, 0, "k", "committed", false)
	pid, epoch, err := h.c.InitProducerID("a", 10000, -1, -1, h.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{{"c", 0}}, h.now); err != nil {
		t.Fatal(err)
	}
	produce(pid, epoch, "k", "aborted", true)
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Second)
	produce(3000, 0, "other", "x", false)
	produce(3000, 0, "other", "y", false)
	for i := 0; i < 100; i++ {
		res := h.tm.Compact(h.now)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if !res.More && !res.Worked {
			break
		}
	}
	raw, _, err := h.part.Read(0, 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for len(raw) > 0 {
		bh, err := topics.ParseBatchHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, recs, err := topics.DecodeRecords(raw[:bh.Size()])
		if err != nil {
			t.Fatal(err)
		}
		if !bh.IsControl() {
			for _, r := range recs {
				values = append(values, string(r.Key)+"="+string(r.Value))
			}
		}
		raw = raw[bh.Size():]
	}
	if got := strings.Join(values, ","); got != "k=committed,other=x,other=y" {
		t.Fatalf("after compaction: %s, want k=committed,other=x,other=y (the active segment is never cleaned)", got)
	}
}

// TestFencingAbortAtExhaustedEpochEndsTheTransaction pins a transaction
// that was never ended on its partitions: when the epoch of a producer with
// an open transaction was one below its limit (32766), the fencing bump of
// a timeout abort or of InitProducerId moved the transactional ID to a new
// producer ID, and the ABORT markers were written for that new ID. The
// partitions' open transaction (of the old ID) stayed open forever: the
// last stable offset stuck, every read_committed consumer stalled and
// compaction stopped. As in Kafka (prepareFenceProducerEpoch), a fencing
// bump may use the last epoch, 32767, of the same producer ID; the next
// InitProducerId moves to a new ID.
func TestFencingAbortAtExhaustedEpochEndsTheTransaction(t *testing.T) {
	for _, by := range []string{"timeout", "init"} {
		t.Run(by, func(t *testing.T) {
			h := newHarness(t, Config{})
			pid, _, err := h.c.InitProducerID("x", 1000, -1, -1, h.now)
			if err != nil {
				t.Fatal(err)
			}
			h.c.mu.Lock()
			h.c.mu.txns["x"].Epoch = math.MaxInt16 - 1
			h.c.mu.Unlock()
			epoch := int16(math.MaxInt16 - 1)
			if err := h.c.AddPartitions("x", pid, epoch, []TopicPartition{{"t", 0}}, h.now); err != nil {
				t.Fatal(err)
			}
			if _, err := h.produce(pid, epoch, 2, true); err != nil {
				t.Fatal(err)
			}
			if lso := h.part.LastStableOffset(); lso != 0 {
				t.Fatalf("LSO with the transaction open: %d", lso)
			}
			if by == "timeout" {
				h.c.Tick(h.now.Add(2 * time.Second))
			}
			// InitProducerId (aborting the open transaction for "init")
			// moves to a fresh producer ID at epoch 0.
			npid, nepoch, err := h.c.InitProducerID("x", 1000, -1, -1, h.now)
			if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != hwm || hwm != 3 {
				t.Fatalf("after the fencing abort: LSO %d, HWM %d; want both 3 (the transaction ended)", lso, hwm)
			}
			if err != nil || npid == pid || nepoch != 0 {
				t.Fatalf("InitProducerId after the exhausted epoch: %d/%d %v, want a new producer ID at epoch 0", npid, nepoch, err)
			}
		})
	}
}
