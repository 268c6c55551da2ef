package compattests

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
