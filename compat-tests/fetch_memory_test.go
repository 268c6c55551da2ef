package compattests

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchMemoryBudget: with a 256 KiB request memory budget, three
// franz-go consumers asking for 50 MiB per fetch at once each read every
// record exactly (issue 14: fetch responses charged to the budget, shrunk
// to what is free, never below one batch, KIP-74). /metrics shows the
// shrunk fetches, and the fetch share of the budget back at 0 once the
// consumers are gone.
func TestFetchMemoryBudget(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--max-request-bytes", "256KiB", "--queued-max-request-bytes", "256KiB", "--message-max-bytes", "64KiB"))
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 4, nil)
	const records = 2000
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(32<<10))
	rs := make([]*kgo.Record, records)
	for i := range rs {
		v := make([]byte, 1024)
		copy(v, fmt.Sprintf("%06d", i))
		rs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("%06d", i)), Value: v}
	}
	if err := prod.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	prod.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consumeEveryRecord(t, b.Addr(), topic, records, c)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := metricValue(t, b, "broker_kafka_fetch_memory_shrunk_total"); n <= 0 {
		t.Fatalf("broker_kafka_fetch_memory_shrunk_total = %v after 50 MiB fetches against a 256 KiB budget; want > 0", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, b, "broker_kafka_fetch_memory_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("broker_kafka_fetch_memory_bytes = %v with no consumer left; want 0", metricValue(t, b, "broker_kafka_fetch_memory_bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// consumeEveryRecord reads the topic from the start with a fresh client until it
// has every record, and checks each arrives once, with its key's value.
func consumeEveryRecord(t *testing.T, addr, topic string, records, id int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(50<<20), kgo.ClientID(fmt.Sprintf("consumer-%d", id)))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := testCtx(t, opTimeout)
	seen := map[string]bool{}
	for len(seen) < records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			return fmt.Errorf("consumer %d: %w after %d records", id, err, len(seen))
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			switch {
			case seen[k]:
				bad = fmt.Errorf("consumer %d: record %s read twice", id, k)
			case len(r.Value) != 1024 || string(r.Value[:6]) != k:
				bad = fmt.Errorf("consumer %d: record %s holds %q", id, k, r.Value[:min(6, len(r.Value))])
			}
			seen[k] = true
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// TestShareFetchMemoryCharged: a ShareFetch response is charged to the
// request memory budget while the broker writes it to a member that does
// not read it, and given back when that member disconnects mid-response
// (issue 14). Before, /metrics showed 0 throughout.
func TestShareFetchMemoryCharged(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--max-request-bytes", "16MiB", "--queued-max-request-bytes", "64MiB"))
	topic := topicName(t, "")
	group := "share." + topic
	const partitions = 16
	createTopic(t, newAdmin(t, b.Addr()), topic, partitions, nil)
	// The member opens its session on the empty topic, so the group
	// starts at offset 0 (share.auto.offset.reset=latest).
	m := newRawShareMember(t, b.Addr(), group, topic, "slow-member-00000001")
	all := make([]int32, partitions)
	for p := range all {
		all[p] = int32(p)
	}
	if resp, _ := m.fetch(all, nil, 1); resp.ErrorCode != 0 {
		t.Fatalf("opening the share session: %s", errName(resp.ErrorCode))
	}
	// A ShareFetch acquires about 1 MiB per partition: 16 partitions of
	// 2 MiB each, uncompressed, answer with about 16 MiB.
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rs := make([]*kgo.Record, 2048)
	for i := range rs {
		rs[i] = &kgo.Record{Value: make([]byte, 16<<10), Partition: int32(i % partitions)}
	}
	if err := prod.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Ask for everything and read nothing: the answer is larger than the
	// socket buffers, so the broker's writer blocks holding it.
	_ = m.c.conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords, req.BatchSize = 1000, 50<<20, 1<<20, 1<<20
	m.c.send(req)
	held := 0.0
	for deadline := time.Now().Add(20 * time.Second); held <= 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("broker_kafka_fetch_memory_bytes stayed 0 while a 16 MiB ShareFetch answer waited for its reader")
		}
		held = metricValue(t, b, "broker_kafka_fetch_memory_bytes")
	}
	if held < 4<<20 {
		t.Fatalf("broker_kafka_fetch_memory_bytes = %v while a 16 MiB ShareFetch answer waits; want the records' bytes", held)
	}
	_ = m.c.conn.(*net.TCPConn).SetLinger(0)
	_ = m.c.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, b, "broker_kafka_fetch_memory_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("broker_kafka_fetch_memory_bytes = %v after the member disconnected; want 0", metricValue(t, b, "broker_kafka_fetch_memory_bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
