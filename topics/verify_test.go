package topics

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

func produceN(t *testing.T, m *Manager, p *Partition, n int) {
	t.Helper()
	for i := range n {
		batch, err := EncodeBatch(BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1000, MaxTimestamp: 1000},
			[]Record{{Key: []byte("k"), Value: []byte{byte(i), 1, 2, 3}}, {OffsetDelta: 1, Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		a := &Append{Partition: p, Batch: batch}
		if err := m.Append([]*Append{a}, time.UnixMilli(1000)).Wait(); err != nil || a.Err != nil {
			t.Fatalf("append: %v %v", err, a.Err)
		}
	}
}

// TestVerifyLog: a clean log verifies clean; a batch rewritten with a
// flipped byte, a batch without its index row and an index row without its
// batch are each reported with topic, partition and offset.
func TestVerifyLog(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := m.CreateTopic("t", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := topic.Partition(0)
	p1, _ := topic.Partition(1)
	produceN(t, m, p0, 5)
	produceN(t, m, p1, 3)

	var calls int
	res, err := VerifyLog(store, VerifyOptions{Progress: func(done, total int64) {
		calls++
		if total != 8 || done > total {
			t.Errorf("progress %d/%d", done, total)
		}
	}})
	if err != nil || res.DamagedTotal != 0 || res.Batches != 8 || res.Topics != 1 || res.Partitions != 2 {
		t.Fatalf("clean verify: %+v %v", res, err)
	}
	if calls < 2 {
		t.Fatalf("progress called %d times", calls)
	}

	// Damage: flip a record byte of p0@2, drop the index row of p1@1 and
	// the batch of p1@2.
	key := pebblestore.BatchKey(topic.ID, 0, 4)
	v, err := store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	v[len(v)-2] ^= 0x40
	b := store.NewBatch()
	b.Set(key, v)
	b.Delete(pebblestore.BatchIndexKey(topic.ID, 1, 2))
	b.Delete(pebblestore.BatchKey(topic.ID, 1, 4))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyStoredBatch(key, v); err == nil {
		t.Fatalf("VerifyStoredBatch accepted a flipped byte")
	}
	res, err = VerifyLog(store, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.DamagedTotal != 3 {
		t.Fatalf("damage: %+v", res.Damaged)
	}
	want := []struct {
		part   int32
		offset int64
		reason string
	}{{0, 4, "CRC"}, {1, 2, "no index row"}, {1, 4, "no batch"}}
	for i, w := range want {
		d := res.Damaged[i]
		if d.Topic != "t" || d.Partition != w.part || d.Offset != w.offset || !strings.Contains(d.Reason, w.reason) {
			t.Fatalf("damage %d: %+v, want %+v", i, d, w)
		}
	}
}
