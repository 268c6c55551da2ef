package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterTxnCoordinatorFailover: with
// transaction-state-log-replication-factor 3 (and RF 3 offsets),
// __transaction_state partitions are Raft groups and the transaction
// coordinator fails over with their leadership (issue 13 part 3). A
// franz-go transactional producer commits a transaction on an RF 3
// topic, then leaves a second one open with records on every partition;
// its coordinator is stopped. A new client with the same transactional
// ID initializes on the new coordinator, which loaded the state: the
// open transaction is aborted (fenced by the bumped epoch, markers to
// each partition's leader) and a third transaction commits there. A
// read_committed consumer reads exactly the committed records (the
// aborted ones would otherwise hold the last stable offset before the
// third transaction's), and the first client is fenced.
func TestClusterTxnCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	const topic, txnID, per = "txn-fail", "txn-fail-id", 9
	tc := startTestCluster(t, func(c *Config) {
		c.HTTPAddr = ""
		c.OffsetsTopicReplicationFactor = 3
		c.TransactionStateLogReplicationFactor = 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := tc.client(kgo.MetadataMinAge(100 * time.Millisecond))
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create RF 3: %v %v", err, resp.Err)
	}
	tc.waitReplicated(ctx, cl, topic, 3)
	coordinator := findTxnCoordinator(ctx, t, cl, txnID)

	producer := func() *kgo.Client {
		return tc.client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryTimeout(45*time.Second), kgo.TransactionTimeout(time.Minute))
	}
	first := producer()
	produce := func(cl *kgo.Client, prefix string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range per {
			cl.Produce(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i)), nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
	}
	produce(first, "one")
	if err := first.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produce(first, "open") // left open: its records on every partition
	waitTxnState(ctx, t, cl, coordinator, txnID, "Ongoing")

	stopped := time.Now()
	tc.stop[coordinator]()
	second := producer()
	produce(second, "two") // InitProducerId on the new coordinator aborts "open"
	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	next := findTxnCoordinator(ctx, t, cl, txnID)
	t.Logf("coordinator %d stopped; broker %d committed the next transaction %v later", coordinator, next, time.Since(stopped))
	if next == coordinator {
		t.Fatalf("the stopped broker %d is still named the coordinator", coordinator)
	}
	waitTxnState(ctx, t, cl, next, txnID, "CompleteCommit")

	cons := tc.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.MetadataMinAge(100*time.Millisecond))
	seen := map[string]int{}
	for read := 0; read < 2*per; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records: %v", read, 2*per, seen)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; read++ })
	}
	extra, cancelExtra := context.WithTimeout(ctx, time.Second)
	cons.PollFetches(extra).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	cancelExtra()
	for _, prefix := range []string{"one", "two"} {
		for i := range per {
			if v := fmt.Sprintf("%s-%d", prefix, i); seen[v] != 1 {
				t.Fatalf("committed record %s read %d times: %v", v, seen[v], seen)
			}
		}
	}
	if len(seen) != 2*per {
		t.Fatalf("read_committed read %d distinct records, want %d (nothing of the aborted transaction): %v", len(seen), 2*per, seen)
	}
	// The first client's producer epoch was bumped past: it is fenced.
	endCtx, cancelEnd := context.WithTimeout(ctx, 20*time.Second)
	defer cancelEnd()
	err := first.EndTransaction(endCtx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn of the fenced first producer: %v, want it fenced", err)
	}
}
