package kafkaproto

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// appendNumbered appends batches batches of records records each to every
// partition of topic; a record's value is its partition and its index in
// the partition (8 bytes each), padded to valueBytes. It returns the size
// of one batch.
func appendNumbered(t *testing.T, s *Server, topic *topics.Topic, batches, records, valueBytes int) int {
	t.Helper()
	now := time.Now()
	size := 0
	for b := range batches {
		var appends []*topics.Append
		for pi, p := range topic.Partitions() {
			recs := make([]topics.Record, records)
			for i := range recs {
				v := make([]byte, valueBytes)
				binary.BigEndian.PutUint64(v, uint64(pi))
				binary.BigEndian.PutUint64(v[8:], uint64(b*records+i))
				recs[i] = topics.Record{OffsetDelta: int32(i), Value: v}
			}
			batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now.UnixMilli(), MaxTimestamp: now.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
			if err != nil {
				t.Fatal(err)
			}
			size = len(batch)
			appends = append(appends, &topics.Append{Partition: p, Batch: batch})
		}
		if err := s.topics.Append(appends, now).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	return size
}

// TestFetchMemoryTinyBudget: with a request memory budget far below the
// consumers' fetch max bytes, several franz-go consumers reading at once
// each still read every record, exactly and in order; their fetches are
// shrunk to the free budget, the fetch share of the budget never passes
// the budget by more than one batch per consumer (KIP-74's minimum), and it
// returns to zero once the consumers are gone. Before fetch responses were
// charged, nothing bounded them: the budget covered request bodies only.
func TestFetchMemoryTinyBudget(t *testing.T) {
	const budget = 128 << 10
	const partitions, batches, perBatch, consumers = 4, 48, 16, 4
	s, addr := startTestServerConfig(t, Config{MaxRequestBytes: budget, QueuedMaxRequestBytes: budget})
	topic, err := s.topics.CreateTopic("tiny", partitions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	batchBytes := appendNumbered(t, s, topic, batches, perBatch, 1024)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := s.memory.fetchInUse.Load(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consumeNumbered(addr, c, partitions, batches*perBatch)
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.memory.fetchShrunk.Load(); n == 0 {
		t.Fatalf("no fetch was shrunk to a %d-byte budget while asking for 50 MiB: responses are not charged", budget)
	}
	if limit := int64(budget + consumers*batchBytes); peak.Load() > limit {
		t.Fatalf("fetch responses held %d bytes of a %d-byte budget; want at most the budget plus one %d-byte batch per consumer", peak.Load(), budget, batchBytes)
	}
	waitFor(t, func() bool { return s.memory.fetchInUse.Load() == 0 && s.memory.held() == 0 })
}

// consumeNumbered reads every record appendNumbered wrote, with a fresh
// client asking for 50 MiB per fetch and per partition, and checks each
// partition's records arrive once each, in order.
func consumeNumbered(addr string, id, partitions, perPartition int) error {
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiny": offsets}),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(50<<20), kgo.ClientID(fmt.Sprintf("consumer-%d", id)))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := make([]int, partitions)
	left := partitions * perPartition
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			return fmt.Errorf("consumer %d: %w (%d records left)", id, err, left)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			p, i := int(binary.BigEndian.Uint64(r.Value)), int(binary.BigEndian.Uint64(r.Value[8:]))
			if bad == nil && (p != int(r.Partition) || i != next[p] || r.Offset != int64(i)) {
				bad = fmt.Errorf("consumer %d: partition %d offset %d holds record %d of partition %d, want record %d", id, r.Partition, r.Offset, i, p, next[r.Partition])
			}
			next[r.Partition]++
			left--
		})
		if bad != nil {
			return bad
		}
	}
	if left != 0 {
		return fmt.Errorf("consumer %d: %d records more than written", id, -left)
	}
	return nil
}

// TestFetchMemoryHeldUntilWritten: a fetch response is charged to the
// budget while the writer is blocked on a client that does not read it,
// and given back when that client disconnects in the middle of the
// response. Its byte limit was shrunk to the budget (the client asked for
// 50 MiB). Before, the reservation was 0 throughout: the test fails at the
// first wait.
func TestFetchMemoryHeldUntilWritten(t *testing.T) {
	const budget = 16 << 20
	s, addr := startTestServerConfig(t, Config{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: budget})
	topic, err := s.topics.CreateTopic("slow", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	batchBytes := appendNumbered(t, s, topic, 24, 1000, 1024) // 24 MiB

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	req := fetchReq(0, -1, "slow", 0, 0)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 50<<20, 50<<20
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	// The response is larger than the socket buffers: the writer blocks
	// with the response's records charged. None is read.
	waitFor(t, func() bool { return s.memory.fetchInUse.Load() > 0 })
	time.Sleep(50 * time.Millisecond)
	held := s.memory.fetchInUse.Load()
	if held < budget-int64(batchBytes) || held > budget {
		t.Fatalf("the blocked response holds %d bytes of the budget; want its records, within the %d-byte budget and at least all but one batch of it", held, budget)
	}
	if u := s.memory.held(); u < held {
		t.Fatalf("request memory held %d is below the fetch share %d", u, held)
	}
	if n := s.memory.fetchShrunk.Load(); n != 1 {
		t.Fatalf("fetches shrunk = %d, want 1", n)
	}
	// Disconnect mid-response: the write fails and the charge goes back.
	_ = conn.(*net.TCPConn).SetLinger(0)
	_ = conn.Close()
	waitFor(t, func() bool { return s.memory.fetchInUse.Load() == 0 && s.memory.held() == 0 })
}

// TestFetchMemoryExhaustedReturnsOneBatch: with no budget free, a fetch
// does not wait for memory; it returns the first batch of the first
// partition with data (KIP-74), charged as overdraft past the budget, and
// gives the charge back once released. The overdraft holds up no request:
// with it outstanding, a request of the whole budget is granted once the
// budget is free. (Charged inside the budget, continuous consumers each
// holding a batch would starve a request of max-request-bytes when the
// budget is max-request-bytes.)
func TestFetchMemoryExhaustedReturnsOneBatch(t *testing.T) {
	const budget = 1 << 20
	s, _ := startTestServerConfig(t, Config{MaxRequestBytes: budget, QueuedMaxRequestBytes: budget})
	topic, err := s.topics.CreateTopic("full", 2, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	batchBytes := appendNumbered(t, s, topic, 4, 16, 100)
	if !s.memory.acquire(budget, nil) {
		t.Fatal("acquire failed")
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 12, 50<<20
	var items []*fetchItem
	for _, p := range topic.Partitions() {
		items = append(items, &fetchItem{p: p, offset: 0, maxBytes: 1 << 20})
	}
	c := &fetchCharge{mem: s.memory}
	total, anyErr := s.readFetchCharged(req, items, c)
	if anyErr || total != batchBytes || len(items[0].records) != batchBytes || len(items[1].records) != 0 {
		t.Fatalf("read %d bytes (%d, %d; errors: %v); want the first partition's first batch, %d bytes", total, len(items[0].records), len(items[1].records), anyErr, batchBytes)
	}
	if got := s.memory.fetchInUse.Load(); got != int64(batchBytes) || c.held() != got || c.over != got {
		t.Fatalf("fetch share %d, held %d, overdraft %d; want the batch, %d, all overdraft", got, c.held(), c.over, batchBytes)
	}
	if u, h := s.memory.inUse.Load(), s.memory.held(); u != budget || h != budget+int64(batchBytes) {
		t.Fatalf("request memory used %d, held %d; want the budget, and the budget plus the batch (%d)", u, h, budget+batchBytes)
	}
	s.memory.release(budget)
	if ok := <-acquireWithin(s.memory, budget, 5*time.Second); !ok {
		t.Fatal("a request of the whole budget waited for a fetch's overdraft")
	}
	s.memory.release(budget)
	c.release()
	if u, f := s.memory.held(), s.memory.fetchInUse.Load(); u != 0 || f != 0 {
		t.Fatalf("after release: held %d, fetch share %d; want 0", u, f)
	}
	for _, it := range items {
		putBuffer(it.records)
	}
}
