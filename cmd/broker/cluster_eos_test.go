package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterExactlyOnceLeaderFailover: franz-go's GroupTransactSession
// (consume, transform, produce and commit the input offsets in one
// transaction, KIP-98/KIP-447) copies an RF 3 topic into another across
// three brokers, aborting every fourth transaction on purpose. The
// transactional ID and the group are coordinated by two different brokers
// that stay up (so markers go to the other brokers and the group's offsets
// wait on its coordinator for theirs); the third broker, which leads a
// partition of each topic, is stopped halfway. Every input record must
// come out exactly once under read_committed: nothing lost with the
// stopped leader, nothing from an aborted transaction, nothing twice from
// the re-consumed input of one.
func TestClusterExactlyOnceLeaderFailover(t *testing.T) {
	testExactlyOnceFailover(t, 1, 1, stopLeader)
}

// TestClusterExactlyOnceGroupCoordinatorFailover: the same with
// offsets-topic-replication-factor 3, stopping the group's coordinator
// (a leader of partitions of both topics too): the new coordinator loads
// the group's committed and pending transactional offsets from the
// replicated log, and the marker sender finds it.
func TestClusterExactlyOnceGroupCoordinatorFailover(t *testing.T) {
	testExactlyOnceFailover(t, 3, 1, stopGroupCoordinator)
}

// TestClusterExactlyOnceTxnCoordinatorFailover: the same with both
// replication factors 3, stopping the transaction coordinator halfway
// (a leader of partitions of both topics too): the new coordinator
// loads the transactional ID from the replicated __transaction_state and
// the session carries on.
func TestClusterExactlyOnceTxnCoordinatorFailover(t *testing.T) {
	testExactlyOnceFailover(t, 3, 3, stopTxnCoordinator)
}

// Which broker testExactlyOnceFailover stops: one that coordinates
// neither the group nor the transactional ID, the group's coordinator,
// or the transactional ID's.
const (
	stopLeader = iota
	stopGroupCoordinator
	stopTxnCoordinator
)

func testExactlyOnceFailover(t *testing.T, offsetsRF, txnRF, stop int) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	const in, out, txnID, n = "eos-in", "eos-out", "eos-txn", 600
	tc := startTestCluster(t, func(c *Config) {
		c.OffsetsTopicReplicationFactor = offsetsRF
		c.TransactionStateLogReplicationFactor = txnRF
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	for _, topic := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	inLeaders := tc.waitReplicated(ctx, cl, in, 3)
	outLeaders := tc.waitReplicated(ctx, cl, out, 3)

	txnCoord := findTxnCoordinator(ctx, t, cl, txnID)
	group, groupCoord := groupCoordinatedElsewhere(ctx, t, cl, txnCoord)
	victim := int32(-1)
	for id := int32(1); id <= 3; id++ {
		wanted := id != txnCoord && id != groupCoord
		switch stop {
		case stopGroupCoordinator:
			wanted = id == groupCoord
		case stopTxnCoordinator:
			wanted = id == txnCoord
		}
		if wanted && leads(inLeaders, id) && leads(outLeaders, id) {
			victim = id
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no broker to stop (txn coordinator %d, group coordinator %d, stopping %d) leads a partition of both topics: %v %v",
			txnCoord, groupCoord, stop, inLeaders, outLeaders)
	}

	prod := tc.client(kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := 0; i < n; i++ {
		prod.Produce(ctx, kgo.StringRecord(fmt.Sprintf("%04d", i)), nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var copied atomic.Int64 // records of committed transactions
	done := make(chan error, 1)
	go func() { done <- tc.copyExactlyOnce(ctx, in, out, group, txnID, n, &copied) }()
	for copied.Load() < n/2 {
		select {
		case err := <-done:
			t.Fatalf("the session stopped before half the input was copied: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	tc.stop[victim]()
	t.Logf("broker %d stopped after %d records (txn coordinator %d, group coordinator %d)", victim, copied.Load(), txnCoord, groupCoord)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	cons := tc.client(kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	for read := 0; read < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", read, n, out)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; read++ })
	}
	// Anything beyond n would show up in a short second poll.
	extra, cancelExtra := context.WithTimeout(ctx, time.Second)
	cons.PollFetches(extra).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	cancelExtra()
	var missing, dup []string
	for i := 0; i < n; i++ {
		switch v := fmt.Sprintf("out-%04d", i); seen[v] {
		case 1:
		case 0:
			missing = append(missing, v)
		default:
			dup = append(dup, v)
		}
	}
	if len(missing) > 0 || len(dup) > 0 || len(seen) != n {
		t.Fatalf("read_committed %s: %d distinct values, missing %v, duplicated %v", out, len(seen), head(missing), head(dup))
	}
}

// groupCoordinatedElsewhere finds a group whose coordinator is not
// txnCoord (its TxnOffsetCommit is then not local: the offsets wait on the
// group coordinator for their marker), and that coordinator.
func groupCoordinatedElsewhere(ctx context.Context, t *testing.T, cl *kgo.Client, txnCoord int32) (string, int32) {
	t.Helper()
	for i := 0; i < 50; i++ {
		g := fmt.Sprintf("eos-group-%d", i)
		for {
			c, code, err := findCoordinatorAt(ctx, cl, txnCoord, g)
			if err != nil {
				t.Fatal(err)
			}
			if code == 0 && c != txnCoord {
				return g, c
			}
			if code == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("FindCoordinator %s: %s", g, kerr.ErrorForCode(code))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Fatalf("no group of 50 is coordinated by another broker than %d", txnCoord)
	return "", -1
}

func leads(leaders map[int32]int32, id int32) bool {
	for _, l := range leaders {
		if l == id {
			return true
		}
	}
	return false
}

// copyExactlyOnce copies in to out ("out-" before each value) with a
// GroupTransactSession until want records were committed, aborting every
// fourth transaction that has records.
func (tc *testCluster) copyExactlyOnce(ctx context.Context, in, out, group, txnID string, want int64, copied *atomic.Int64) error {
	var seeds []string
	for id := int32(1); id <= 3; id++ {
		seeds = append(seeds, tc.cfgs[id].KafkaAddr)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out), kgo.TransactionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer sess.Close()
	for round := 0; copied.Load() < want; round++ {
		fs := sess.PollRecords(ctx, 50)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d records: %w", copied.Load(), err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, kgo.StringRecord("out-"+string(r.Value))) })
		produceErr := sess.ProduceSync(ctx, recs...).FirstErr()
		end := kgo.TryCommit
		if round%4 == 3 || produceErr != nil {
			end = kgo.TryAbort
		}
		committed, err := sess.End(ctx, end)
		if err != nil {
			return fmt.Errorf("end after %d records: %w", copied.Load(), err)
		}
		if committed {
			copied.Add(int64(len(recs)))
		}
	}
	return nil
}
