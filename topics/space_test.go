package topics

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

// TestAppendRefusedWhileDiskLow pins the fix for a broker that crashed
// when its disk filled up (Pebble panics when a WAL write fails): while the
// store's free-space guard is low, appends of new data are refused with
// ErrStorageFull before anything reaches Pebble, so offsets, sizes and the
// log are unchanged; transaction markers and internal-topic appends (small
// writes that end transactions and move offsets) and deletions go on; new
// data is accepted again once the space is back.
func TestAppendRefusedWhileDiskLow(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	probe := func(string) (pebblestore.SpaceReading, error) {
		return pebblestore.SpaceReading{Free: free.Load(), Total: 10 << 30}, nil
	}
	store, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop(),
		MemTableSize: 4 << 20, CacheSize: 8 << 20, FreeSpaceMin: 64 << 20, FreeSpaceProbe: probe})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := m.CreateTopic("t", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	offsets, err := m.CreateTopic("__consumer_offsets", 1, map[string]string{"cleanup.policy": "compact"}, false)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := offsets.Partition(0)
	appendOne(t, m, p, testBatch(t, "before", 3, -1, -1, -1, 1000))
	// A transaction opened while there is room.
	if a := appendOne(t, m, p, txnBatch(t, 2, 7, 0, 0)); a.Err != nil {
		t.Fatal(a.Err)
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("lso %d, want 3", lso)
	}
	setFree := func(n int64) {
		free.Store(n)
		if err := store.Space().Probe(); err != nil {
			t.Fatal(err)
		}
	}

	setFree(10 << 20)
	if !store.Space().Low() {
		t.Fatal("guard not low")
	}
	before := readAll(t, p)
	hwm, bytes := p.HighWatermark(), p.Stats().Bytes
	plain := &Append{Partition: p, Batch: testBatch(t, "refused", 2, -1, -1, -1, 1000)}
	idem := &Append{Partition: p, Batch: testBatch(t, "refused", 1, 9, 0, 0, 1000)}
	if err := m.Append([]*Append{plain, idem}, time.UnixMilli(1000)).Wait(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Append{plain, idem} {
		var se *pebblestore.SpaceError
		if !errors.Is(a.Err, ErrStorageFull) || !errors.As(a.Err, &se) || se.Free != 10<<20 || se.Min != 64<<20 || a.BaseOffset != -1 {
			t.Fatalf("append while low: base %d, err %v; want ErrStorageFull with the free space", a.BaseOffset, a.Err)
		}
	}
	if _, err := m.AppendAtomic([]*Append{{Partition: p, Batch: testBatch(t, "atomic", 1, -1, -1, -1, 1000)}}, nil, time.UnixMilli(1000)); !errors.Is(err, ErrStorageFull) {
		t.Fatalf("atomic append while low: %v", err)
	}
	if p.HighWatermark() != hwm || p.Stats().Bytes != bytes || len(p.Producers()) != 1 {
		t.Fatalf("a refused append changed the partition: hwm %d (was %d), bytes %d (was %d), producers %+v", p.HighWatermark(), hwm, p.Stats().Bytes, bytes, p.Producers())
	}
	if got := readAll(t, p); len(got) != len(before) {
		t.Fatalf("log changed: %v, was %v", got, before)
	}

	// The commit marker of the open transaction is written.
	pa, err := m.AppendAtomic(MarkerAppends([]Marker{{Partition: p, ProducerID: 7, ProducerEpoch: 0, Commit: true}}, time.UnixMilli(1000)), nil, time.UnixMilli(1000))
	if err != nil {
		t.Fatalf("marker while low: %v", err)
	}
	if err := pa.Wait(); err != nil {
		t.Fatal(err)
	}
	if lso, hwm := p.LastStableOffset(), p.HighWatermark(); lso != 6 || hwm != 6 {
		t.Fatalf("after the marker: lso %d hwm %d, want 6 6", lso, hwm)
	}
	// So is an offset commit's record in the internal topic.
	if a := appendOne(t, m, op, testBatch(t, "offset", 1, -1, -1, -1, 1000)); a.Err != nil {
		t.Fatalf("internal topic while low: %v", a.Err)
	}
	// Deletions work: DeleteRecords, retention, DeleteTopic.
	if low, err := p.DeleteRecordsBefore(2); err != nil || low != 2 {
		t.Fatalf("DeleteRecords while low: %d %v", low, err)
	}
	if res := m.EnforceRetention(time.UnixMilli(1000)); res.Err != nil {
		t.Fatalf("retention while low: %v", res.Err)
	}
	other, err := m.CreateTopic("other", 1, nil, false)
	if err != nil {
		t.Fatalf("creating a topic (metadata) while low: %v", err)
	}
	if err := m.DeleteTopic(other.Name); err != nil {
		t.Fatalf("DeleteTopic while low: %v", err)
	}

	// Free space above the limit but below limit + 25%: still refused.
	setFree(70 << 20)
	if a := (&Append{Partition: p, Batch: testBatch(t, "early", 1, -1, -1, -1, 1000)}); m.Append([]*Append{a}, time.UnixMilli(1000)).Wait() != nil || !errors.Is(a.Err, ErrStorageFull) {
		t.Fatalf("append between the limit and the resume level: %v", a.Err)
	}
	setFree(80 << 20)
	a := appendOne(t, m, p, testBatch(t, "after", 2, -1, -1, -1, 1000))
	if a.Err != nil || a.BaseOffset != 6 {
		t.Fatalf("append after space returned: base %d, %v; want 6", a.BaseOffset, a.Err)
	}
	if st := store.Space().Stats(); st.Refused != 4 {
		t.Fatalf("refusals counted %d, want 4", st.Refused)
	}
}
