package kafkaproto

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// TestFetchBuffersFollowData: the read buffers one fetch holds follow the
// bytes its partitions have past the fetch offsets, not maxBytes per
// partition. Before, every partition with data got a 1 MiB buffer (its
// PartitionMaxBytes): a consumer of 10,000 partitions made the broker
// hold gigabytes (bench/scale.sh: 2.7 GB peak RSS at 10,000 partitions).
// Partitions with nothing to read get no buffer.
func TestFetchBuffersFollowData(t *testing.T) {
	const partitions, withData = 300, 200
	s, _ := startTestServer(t)
	topic, err := s.topics.CreateTopic("many", partitions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now.UnixMilli(), MaxTimestamp: now.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]topics.Record{{Value: make([]byte, 100)}})
	if err != nil {
		t.Fatal(err)
	}
	var appends []*topics.Append
	for _, p := range topic.Partitions()[:withData] {
		appends = append(appends, &topics.Append{Partition: p, Batch: append([]byte(nil), batch...)})
	}
	if err := s.topics.Append(appends, now).Wait(); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 12, 50<<20
	var items []*fetchItem
	for _, p := range topic.Partitions() {
		items = append(items, &fetchItem{p: p, offset: 0, maxBytes: 1 << 20})
	}
	total, anyErr := s.readFetchItems(req, items)
	if anyErr || total != withData*len(batch) {
		t.Fatalf("read %d bytes (errors: %v), want %d", total, anyErr, withData*len(batch))
	}
	held := 0
	for i, it := range items {
		if i < withData && len(it.records) != len(batch) {
			t.Fatalf("partition %d: %d bytes read, want its batch (%d)", i, len(it.records), len(batch))
		}
		if i >= withData && it.records != nil {
			t.Fatalf("partition %d has no data but holds a %d-byte buffer", i, cap(it.records))
		}
		held += cap(it.records)
		putBuffer(it.records)
	}
	// The smallest pooled buffer is 4 KiB: at most that per partition with
	// data, where 1 MiB each was 200 MiB.
	if limit := withData << minPooledShift; held > limit {
		t.Fatalf("the fetch holds %d bytes of buffers for %d bytes of records; want at most %d", held, total, limit)
	}
}
