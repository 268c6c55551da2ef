package groups

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var testShareLimits = shareLimits{lock: 30 * time.Second, deliveryLimit: 3, maxInFlight: 100}

func spans(base, last int64) []BatchSpan { return []BatchSpan{{Base: base, Last: last}} }

func TestSharePartitionAcquireIsExclusive(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 10}
	got, _ := sp.acquire("a", 3, spans(10, 14), testShareLimits, now)
	if want := []AcquiredRange{{10, 12, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a acquired %v, want %v", got, want)
	}
	got, _ = sp.acquire("b", 10, spans(10, 14), testShareLimits, now)
	if want := []AcquiredRange{{13, 14, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b acquired %v, want %v (never a record a holds)", got, want)
	}
	if got, _ := sp.acquire("c", 10, nil, testShareLimits, now); len(got) != 0 {
		t.Fatalf("c acquired %v while everything is held", got)
	}
	if err := sp.acknowledge("b", []AckBatch{{10, 10, []int8{AckAccept}}}, testShareLimits, now); !errors.Is(err, errInvalidRecordState) {
		t.Fatalf("b acknowledging a's record: %v, want invalid record state", err)
	}
}

func TestSharePartitionLockExpiryRedelivers(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 0}
	sp.acquire("a", 10, spans(0, 1), testShareLimits, now)
	if sp.expire(testShareLimits, now.Add(testShareLimits.lock-time.Millisecond)) {
		t.Fatal("a lock expired before its duration")
	}
	if !sp.expire(testShareLimits, now.Add(testShareLimits.lock)) {
		t.Fatal("the lock did not expire at its deadline")
	}
	later := now.Add(testShareLimits.lock)
	got, _ := sp.acquire("b", 10, nil, testShareLimits, later)
	if want := []AcquiredRange{{0, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after expiry b acquired %v, want %v", got, want)
	}
	if err := sp.acknowledge("a", []AckBatch{{0, 0, []int8{AckAccept}}}, testShareLimits, later); !errors.Is(err, errInvalidRecordState) {
		t.Fatalf("a acknowledging after its lock expired: %v, want invalid record state", err)
	}
}

func TestSharePartitionDeliveryLimitArchives(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 0}
	for i := 1; i <= 3; i++ {
		got, _ := sp.acquire("a", 10, spans(0, 0), testShareLimits, now)
		if want := []AcquiredRange{{0, 0, int16(i)}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("delivery %d: %v, want %v", i, got, want)
		}
		if err := sp.acknowledge("a", []AckBatch{{0, 0, []int8{AckRelease}}}, testShareLimits, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := sp.acquire("a", 10, spans(0, 0), testShareLimits, now); len(got) != 0 {
		t.Fatalf("delivered %v after the delivery limit", got)
	}
	if sp.start != 1 || len(sp.window) != 0 {
		t.Fatalf("start %d window %d, want the archived record behind the start offset", sp.start, len(sp.window))
	}
}

func TestSharePartitionAcknowledgeTypes(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 0}
	sp.acquire("a", 10, spans(0, 4), testShareLimits, now)
	err := sp.acknowledge("a", []AckBatch{{0, 1, []int8{AckAccept}}, {2, 4, []int8{AckReject, AckRelease, AckRenew}}}, testShareLimits, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if sp.start != 3 {
		t.Fatalf("start %d, want 3 (accepted and rejected records are final)", sp.start)
	}
	if r := sp.at(4); r.state != shareAcquired || !r.deadline.Equal(now.Add(time.Second+testShareLimits.lock)) {
		t.Fatalf("renewed record %+v, want acquired until one lock after the renewal", r)
	}
	got, _ := sp.acquire("b", 10, nil, testShareLimits, now)
	if want := []AcquiredRange{{3, 3, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b acquired %v, want only the released record %v (a rejected one never again)", got, want)
	}
	// Malformed batches change nothing.
	for _, bad := range [][]AckBatch{
		{{5, 4, []int8{AckAccept}}},
		{{3, 4, []int8{AckAccept, AckAccept, AckAccept}}},
		{{4, 4, []int8{9}}},
		{{4, 4, []int8{AckAccept}}, {4, 4, []int8{AckAccept}}},
		{{4, 4, nil}},
		{{-1 << 63, 1<<63 - 1, nil}},
		{{-1 << 63, 1<<63 - 1, []int8{AckAccept}}},
	} {
		if err := sp.acknowledge("a", bad, testShareLimits, now); !errors.Is(err, errInvalidAck) {
			t.Errorf("%v: %v, want invalid acknowledgement", bad, err)
		}
	}
	if err := sp.acknowledge("a", []AckBatch{{3, 4, []int8{AckAccept}}}, testShareLimits, now); !errors.Is(err, errInvalidRecordState) {
		t.Fatalf("a batch with a record of b: %v, want invalid record state and nothing applied", err)
	}
	if r := sp.at(4); r.state != shareAcquired {
		t.Fatalf("a failed acknowledgement changed record 4: %+v", r)
	}
	// Offsets below the start offset are final: skipped, as Kafka does,
	// however many (the loop starts at the start offset).
	if err := sp.acknowledge("a", []AckBatch{{0, 2, []int8{AckAccept}}, {4, 4, []int8{AckAccept}}}, testShareLimits, now); err != nil {
		t.Fatalf("acknowledging final offsets and a held one: %v", err)
	}
	far := &sharePartition{start: 1 << 60}
	if err := far.acknowledge("a", []AckBatch{{0, 1<<60 - 1, []int8{AckAccept}}}, testShareLimits, now); err != nil {
		t.Fatalf("a batch wholly below the start offset: %v", err)
	}
}

func TestSharePartitionGapsAndControlBatchesAreNotDelivered(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 0}
	got, _ := sp.acquire("a", 10, []BatchSpan{{Base: 2, Last: 3}, {Base: 4, Last: 4, Control: true}, {Base: 5, Last: 5}}, testShareLimits, now)
	if want := []AcquiredRange{{2, 3, 1}, {5, 5, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if sp.start != 2 {
		t.Fatalf("start %d, want 2 (offsets 0-1 compacted away)", sp.start)
	}
}

// TestSharePartitionRowRestores: the row written after each change brings
// back the window as it was: acknowledged, archived, available records
// with their delivery counts, and acquired ones with owner and lock.
func TestSharePartitionRowRestores(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	sp := &sharePartition{start: 7}
	sp.acquire("member-a", 10, spans(7, 12), testShareLimits, now)
	if err := sp.acknowledge("member-a", []AckBatch{{8, 11, []int8{AckAccept, AckRelease, AckReject, AckAccept}}}, testShareLimits, now); err != nil {
		t.Fatal(err)
	}
	back, err := decodeShareRow(sp.encodeRow())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sp) {
		t.Fatalf("restored %+v, want %+v", back, sp)
	}
	// After the restart: member-a still holds 7 and 12 until their lock
	// expires; the released record goes to another member at count 2.
	got, _ := back.acquire("member-b", 10, nil, testShareLimits, now)
	if want := []AcquiredRange{{9, 9, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restore b acquired %v, want %v", got, want)
	}
	if err := back.acknowledge("member-a", []AckBatch{{7, 7, []int8{AckAccept}}}, testShareLimits, now); err != nil {
		t.Fatalf("the owner acknowledging after a restore: %v", err)
	}
	back.expire(testShareLimits, now.Add(testShareLimits.lock))
	got, _ = back.acquire("member-b", 10, nil, testShareLimits, now.Add(testShareLimits.lock))
	if want := []AcquiredRange{{9, 9, 3}, {12, 12, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the locks expired b acquired %v, want %v", got, want)
	}
	for _, bad := range [][]byte{nil, {2}, append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0, 1, 0)} {
		if _, err := decodeShareRow(bad); err == nil {
			t.Errorf("decoding %x: no error", bad)
		}
	}
}

// TestSharePartitionBatchOptimizedAcquiresWholeBatches: in ShareFetch's
// batch_optimized mode (KIP-1206) max_records is a soft limit: a batch
// begun is acquired to its end, and no new batch is begun past the limit;
// in record_limit mode acquisition stops at max_records.
func TestSharePartitionBatchOptimizedAcquiresWholeBatches(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	batches := []BatchSpan{{Base: 0, Last: 3}, {Base: 4, Last: 7}, {Base: 8, Last: 11}}
	sp := &sharePartition{}
	if got, _ := sp.acquire("a", 5, batches, testShareLimits, now); !reflect.DeepEqual(got, []AcquiredRange{{0, 4, 1}}) {
		t.Fatalf("record_limit acquired %v, want 0-4", got)
	}
	whole := testShareLimits
	whole.wholeBatches = true
	sp = &sharePartition{}
	if got, _ := sp.acquire("a", 5, batches, whole, now); !reflect.DeepEqual(got, []AcquiredRange{{0, 7, 1}}) {
		t.Fatalf("batch_optimized acquired %v, want 0-7 (two whole batches)", got)
	}
	// The rest of a batch a record_limit fetch split is begun by this
	// call only if the limit allows; then taken whole.
	sp = &sharePartition{}
	sp.acquire("a", 2, batches, testShareLimits, now)
	if got, _ := sp.acquire("b", 1, batches, whole, now); !reflect.DeepEqual(got, []AcquiredRange{{2, 3, 1}}) {
		t.Fatalf("batch_optimized after a split acquired %v, want 2-3", got)
	}
}

// TestSharePartitionBatchSize: in batch_optimized mode new records are
// listed in ranges of whole stored batches, a range closed before the
// batch that starts batch_size or more offsets after its first (Kafka
// 4.2 SharePartition.createBatches); record_limit mode and batch_size 0
// list one range.
func TestSharePartitionBatchSize(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	var fours []BatchSpan // six stored batches of 4 records: 0-3 ... 20-23
	for b := int64(0); b < 24; b += 4 {
		fours = append(fours, BatchSpan{Base: b, Last: b + 3})
	}
	for _, c := range []struct {
		name      string
		whole     bool
		batchSize int
		want      []AcquiredRange
	}{
		{"batch size 5", true, 5, []AcquiredRange{{0, 7, 1}, {8, 15, 1}, {16, 23, 1}}},
		{"batch size 4", true, 4, []AcquiredRange{{0, 3, 1}, {4, 7, 1}, {8, 11, 1}, {12, 15, 1}, {16, 19, 1}, {20, 23, 1}}},
		{"batch size 1", true, 1, []AcquiredRange{{0, 3, 1}, {4, 7, 1}, {8, 11, 1}, {12, 15, 1}, {16, 19, 1}, {20, 23, 1}}},
		{"batch size 10", true, 10, []AcquiredRange{{0, 11, 1}, {12, 23, 1}}},
		{"batch size 24", true, 24, []AcquiredRange{{0, 23, 1}}},
		{"batch size 0", true, 0, []AcquiredRange{{0, 23, 1}}},
		{"record_limit", false, 5, []AcquiredRange{{0, 23, 1}}},
	} {
		lim := testShareLimits
		lim.wholeBatches, lim.batchSize = c.whole, c.batchSize
		sp := &sharePartition{start: 0}
		if got, _ := sp.acquire("a", 100, fours, lim, now); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: acquired %v, want %v", c.name, got, c.want)
		}
	}
	// Released records come back before new ones, never in a new range.
	lim := testShareLimits
	lim.wholeBatches, lim.batchSize = true, 5
	sp := &sharePartition{start: 0}
	sp.acquire("a", 8, fours, lim, now)
	if err := sp.acknowledge("a", []AckBatch{{0, 7, []int8{AckRelease}}}, lim, now); err != nil {
		t.Fatal(err)
	}
	got, _ := sp.acquire("b", 100, fours, lim, now)
	if want := []AcquiredRange{{0, 7, 2}, {8, 15, 1}, {16, 23, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a release: acquired %v, want %v", got, want)
	}
}
