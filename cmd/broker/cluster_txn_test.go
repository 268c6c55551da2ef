package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterTransactionsRemote: a transaction over the 6 partitions of
// an RF 1 topic spread over three brokers, whose coordinator leads two of
// them, is ended on the others by WriteTxnMarkers (txnMarkers). A
// franz-go transactional producer commits one transaction and aborts
// another; the LSO and the end offset move past both markers on every
// partition. A third transaction's EndTxn is answered while a broker
// holding two of its partitions is down (its markers cannot be
// delivered: PrepareCommit), the coordinator is restarted in that state,
// and once the broker is back the resumed delivery completes it. A fourth
// holds a group coordinated by the third broker, down too when EndTxn is
// answered: the marker for the group's __consumer_offsets partition keeps
// it in PrepareCommit until that broker is back. A new producer of the
// transactional ID fences an open fifth one (aborted on every partition,
// the old producer refused by a leader elsewhere). A read_committed
// consumer then reads exactly the committed records.
func TestClusterTransactionsRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	const topic, txnID = "txn-remote", "remote-txn"
	began := time.Now()
	// step logs the test's progress (where a slow run spent its time).
	step := func(what string) { t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what) }
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	m := tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, topic); return ok })
	tm, _ := topicOf(m, topic)
	leaderOf := map[int32]int32{}
	for _, p := range tm.Partitions {
		leaderOf[p.Partition] = p.Leader
	}
	coordinator := findTxnCoordinator(ctx, t, cl, txnID)
	local := 0
	for _, l := range leaderOf {
		if l == coordinator {
			local++
		}
	}
	if local == 0 || local == len(leaderOf) {
		t.Fatalf("coordinator %d leads %d of the 6 partitions (%v); the test needs some but not all", coordinator, local, leaderOf)
	}

	// down and third are the two other brokers; a group third
	// coordinates is found now, while every broker is up (placing the
	// group coordinators is a metadata proposal).
	down := coordinator%3 + 1
	third := 6 - coordinator - down
	group := groupOf(ctx, t, cl, third)

	prod := tc.client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(60*time.Second))
	// transact produces n records to each partition that only admits
	// (all when nil) in one transaction.
	transact := func(prefix string, n int, only func(int32) bool, end kgo.TransactionEndTry, beforeEnd func()) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := int32(0); p < 6; p++ {
			for i := 0; i < n && (only == nil || only(p)); i++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", prefix, err)
		}
		if beforeEnd != nil {
			beforeEnd()
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatalf("%s: end: %v", prefix, err)
		}
	}
	// offsets waits until every partition's end offset and LSO are want
	// (any for a negative want).
	offsets := func(want func(p int32) int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			end, err1 := adm.ListEndOffsets(ctx, topic)
			lso, err2 := adm.ListCommittedOffsets(ctx, topic)
			// A shard error (a broker down) fails only its partitions.
			ok := true
			var got []string
			for p := int32(0); p < 6; p++ {
				if want(p) < 0 {
					continue
				}
				e, found1 := end.Lookup(topic, p)
				l, found2 := lso.Lookup(topic, p)
				got = append(got, fmt.Sprintf("%d: end %d %v lso %d %v (want %d)", p, e.Offset, e.Err, l.Offset, l.Err, want(p)))
				ok = ok && found1 && found2 && e.Err == nil && l.Err == nil && e.Offset == want(p) && l.Offset == want(p)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("end offsets and LSOs: %v %v %s", err1, err2, strings.Join(got, ", "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	all := func(n int64) func(int32) int64 { return func(int32) int64 { return n } }

	step("commit over all partitions")
	transact("c", 3, nil, kgo.TryCommit, nil) // offsets 0-2, marker 3
	offsets(all(4))
	step("abort over all partitions")
	transact("a", 2, nil, kgo.TryAbort, nil) // offsets 4-5, marker 6
	offsets(all(7))
	waitTxnState(ctx, t, cl, coordinator, txnID, "CompleteAbort")

	// Markers that cannot be delivered: a broker leading two of the
	// partitions is down when EndTxn is answered; the coordinator is
	// restarted in PrepareCommit.
	step("commit with a broker down")
	transact("r", 1, nil, kgo.TryCommit, func() { tc.stop[down]() }) // offset 7, marker 8
	waitTxnState(ctx, t, cl, coordinator, txnID, "PrepareCommit")
	step("restarting the coordinator in PrepareCommit")
	tc.stop[coordinator]()
	tc.start(coordinator)
	waitTxnState(ctx, t, cl, coordinator, txnID, "PrepareCommit")
	step("starting the broker that was down")
	tc.start(down)
	waitTxnState(ctx, t, cl, coordinator, txnID, "CompleteCommit")
	offsets(all(9))

	// A group coordinated by another broker (AddOffsetsToTxn): its
	// __consumer_offsets partition's leader gets a marker too. The
	// transaction writes no partition of that broker, which is down when
	// EndTxn is answered: the transaction stays in PrepareCommit until it
	// is back and has answered the marker.
	step("commit with a remote group, its coordinator down")
	notThird := func(p int32) bool { return leaderOf[p] != third }
	transact("g", 1, notThird, kgo.TryCommit, func() {
		pid, epoch, err := prod.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
		resp, err := req.RequestWith(ctx, cl.Broker(int(coordinator)))
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
		}
		tc.stop[third]()
	}) // offset 9, marker 10 where third does not lead
	// Once the markers of the partitions down leads are in, only the
	// group's is missing: the transaction stays in PrepareCommit.
	offsets(func(p int32) int64 {
		if leaderOf[p] == down {
			return 11
		}
		return -1
	})
	for range 5 {
		waitTxnState(ctx, t, cl, coordinator, txnID, "PrepareCommit")
		time.Sleep(100 * time.Millisecond)
	}
	step("starting the group coordinator")
	tc.start(third)
	waitTxnState(ctx, t, cl, coordinator, txnID, "CompleteCommit")
	offsets(func(p int32) int64 {
		if notThird(p) {
			return 11
		}
		return 9
	})

	// A new producer of the same transactional ID fences the open
	// transaction of the old one: InitProducerId aborts it with a bumped
	// epoch on every partition (markers to the remote ones), and the old
	// producer's next batch is refused on a partition led elsewhere (C3:
	// that leader knows the epoch from the abort marker).
	step("fencing an open transaction")
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var zs []*kgo.Record
	for p := int32(0); p < 6; p++ {
		zs = append(zs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "z-%d-0", p)})
	}
	if err := prod.ProduceSync(ctx, zs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	next := tc.client(kgo.TransactionalID(txnID), kgo.TransactionTimeout(60*time.Second))
	if _, _, err := next.ProducerID(ctx); err != nil {
		t.Fatalf("InitProducerId of the new producer: %v", err)
	}
	offsets(func(p int32) int64 {
		if notThird(p) {
			return 13
		}
		return 11
	})
	var elsewhere int32
	for p, l := range leaderOf {
		if l != coordinator {
			elsewhere = p
		}
	}
	err := prod.ProduceSync(ctx, &kgo.Record{Partition: elsewhere, Value: []byte("zombie")}).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the fenced producer's batch to partition %d (led by %d): %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", elsewhere, leaderOf[elsewhere], err)
	}

	// read_committed: exactly the records of the committed transactions,
	// in order on each partition.
	step("reading committed")
	cons := tc.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[int32][]string{}
	for n := 0; n < 28; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of 28 committed records: %v", n, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := int32(0); p < 6; p++ {
		want := fmt.Sprintf("[c-%d-0 c-%d-1 c-%d-2 r-%d-0]", p, p, p, p)
		if notThird(p) {
			want = fmt.Sprintf("[c-%d-0 c-%d-1 c-%d-2 r-%d-0 g-%d-0]", p, p, p, p, p)
		}
		if fmt.Sprint(got[p]) != want {
			t.Errorf("partition %d (leader %d) read_committed %v, want %s", p, leaderOf[p], got[p], want)
		}
	}
}

// groupOf is a group that broker id coordinates.
func groupOf(ctx context.Context, t *testing.T, cl *kgo.Client, id int32) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		group := fmt.Sprintf("txn-group-%d", i%30)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		placed := err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0
		if placed && resp.Coordinators[0].NodeID == id {
			return group
		}
		if time.Now().After(deadline) {
			t.Fatalf("no group coordinated by broker %d: %v %+v", id, err, resp)
		}
		if !placed {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// findTxnCoordinator asks FindCoordinator until the transactional ID's
// coordinator is placed.
func findTxnCoordinator(ctx context.Context, t *testing.T, cl *kgo.Client, id string) int32 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator for %s: %v %+v", id, err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTxnState waits until the coordinator describes the transactional
// ID in state.
func waitTxnState(ctx context.Context, t *testing.T, cl *kgo.Client, coordinator int32, id, state string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id}
		resp, err := req.RequestWith(ctx, cl.Broker(int(coordinator)))
		if err == nil && len(resp.TransactionStates) == 1 {
			s := resp.TransactionStates[0]
			last = fmt.Sprintf("%s (%v)", s.State, kerr.ErrorForCode(s.ErrorCode))
			if s.ErrorCode == 0 && s.State == state {
				return
			}
		} else {
			last = fmt.Sprint(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s: %s, want %s", id, last, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTxnMarkersNeedPlaintextListener: the marker sender connects without
// credentials, so it exists only in a cluster whose brokers' first
// listener is PLAINTEXT, and says why it is off otherwise.
func TestTxnMarkersNeedPlaintextListener(t *testing.T) {
	var logged strings.Builder
	log := zerolog.New(&logged)
	cfg := defaultConfig()
	cfg.NodeID, cfg.KafkaAddr = 1, "127.0.0.1:9092"
	if newTxnMarkers(cfg, log) != nil {
		t.Fatal("a single node has a marker sender")
	}
	cfg.ClusterPeers = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
	if newTxnMarkers(cfg, log) == nil {
		t.Fatal("a cluster on a PLAINTEXT listener has no marker sender")
	}
	cfg.Security.Listeners = "SASL_PLAINTEXT://127.0.0.1:9092"
	if newTxnMarkers(cfg, log) != nil {
		t.Fatal("a cluster on a SASL_PLAINTEXT first listener has a marker sender")
	}
	if !strings.Contains(logged.String(), "transactions across brokers are off") || !strings.Contains(logged.String(), "SASL_PLAINTEXT") {
		t.Fatalf("log %q does not say why transactions across brokers are off", logged.String())
	}
}
