package clustertests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vibemq/broker/clustertests/checker"
	"github.com/vibemq/broker/httpapi"
)

const (
	txnTopic      = "txnkill"
	txnPartitions = 6
	// txnProducers transactional IDs run transactions side by side.
	txnProducers = 2
	// Every txnAbortEvery-th transaction of a producer is aborted on purpose.
	txnAbortEvery = 5
	// txnTimeout bounds one transaction (CLUSTER_TXN_TIMEOUT overrides
	// it); past it the producer gives up and replaces its client, as an
	// application would. It is as long as waitCommits waits, so it is no
	// workaround: a franz-go client (v1.22.3) whose coordinator died
	// between two transactions retries the next AddPartitionsToTxn
	// against the dead broker and finds the new coordinator only once
	// the broker leaves Metadata, which it does once fenced (DESIGN.md,
	// "Cluster", liveness); a broker that kept a fenced broker in
	// Metadata made the producer wait for the restart, and the test fail
	// at the second kill ("committed nothing within 45s"). It was 10 s
	// while that was so.
	txnTimeout = wait
)

// txnIDOf is producer p's transactional ID; producer txnProducers writes
// the final transaction.
func txnIDOf(p int) string { return fmt.Sprintf("%s-%d", txnTopic, p) }

// txnPartitionsOf is where transaction seq's records go: four partitions
// from seq mod 6 on, and a fifth record to the first of them again (two
// records of one transaction in one partition, whose order is checked).
func txnPartitionsOf(seq int64) []int32 {
	base := int32(seq % txnPartitions)
	ps := make([]int32, 0, 5)
	for i := range int32(4) {
		ps = append(ps, (base+i)%txnPartitions)
	}
	return append(ps, base)
}

// killPhase is the point of a transaction at which its coordinator is
// killed.
type killPhase int

const (
	// killOpen: the transaction's records are acknowledged and EndTxn is
	// not sent: the coordinator holds it Ongoing (checked with
	// DescribeTransactions first); the commit goes to the next one.
	killOpen killPhase = iota + 1
	// killAfterCommit: right after EndTxn commit was answered, while the
	// markers may still be on their way (the new coordinator must resume
	// them).
	killAfterCommit
	// killDuringCommit: 0 to 3 ms after EndTxn commit was sent: the
	// outcome may be unknown to the producer.
	killDuringCommit
)

func (k killPhase) String() string {
	return [...]string{"?", "transaction open", "right after the commit's answer", "during the commit"}[k]
}

type killRequest struct {
	phase killPhase
	done  chan killResult
}

// killResult is one kill: whose coordinator, at which transaction, the
// transaction's state there just before (killOpen) or the commit's
// answer (killAfterCommit).
type killResult struct {
	phase       killPhase
	coordinator int
	producer    int
	seq         int64
	state       string
	err         error
}

// txnWorkload is txnProducers franz-go transactional producers, each
// committing small transactions (txnPartitionsOf) in a loop, aborting
// every txnAbortEvery-th on purpose, recording each outcome. A producer
// whose transaction fails is replaced by a new client with the same
// transactional ID (its InitProducerId fences the old epoch and ends
// the old transaction).
type txnWorkload struct {
	t     *testing.T
	c     *Cluster
	dial  dialFunc
	admin *kgo.Client // FindCoordinator, DescribeTransactions
	mu    sync.Mutex
	txns  []checker.Txn
	errs  map[string]int // failed transactions, by error
	// commits counts each producer's committed transactions.
	commits [txnProducers]atomic.Int64
	kills   [txnProducers]chan killRequest
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// timeout bounds one transaction: txnTimeout or CLUSTER_TXN_TIMEOUT.
	timeout time.Duration
	// abandoned: the loops end without a last commit (the test ended).
	abandoned atomic.Bool
}

func startTxnWorkload(t *testing.T, c *Cluster, dial dialFunc) *txnWorkload {
	w := &txnWorkload{t: t, c: c, dial: dial, admin: kafkaClient(t, c, dial), errs: map[string]int{}, timeout: txnTimeout}
	if d, err := time.ParseDuration(os.Getenv("CLUSTER_TXN_TIMEOUT")); err == nil && d > 0 {
		w.timeout = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for p := range txnProducers {
		w.kills[p] = make(chan killRequest, 1)
		w.wg.Add(1)
		go w.run(ctx, p)
	}
	// A test that fails midway does not wait for a last commit.
	t.Cleanup(func() { w.abandoned.Store(true); cancel(); w.wg.Wait() })
	return w
}

// producer is a transactional client for producer p (not closed by a
// cleanup: its owner closes it).
func (w *txnWorkload) producer(p int) (*kgo.Client, error) {
	var seeds []string
	for _, n := range w.c.Nodes {
		seeds = append(seeds, n.KafkaAddr())
	}
	return kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.Dialer(w.dial), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.TransactionalID(txnIDOf(p)), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second), kgo.RetryTimeout(30*time.Second))
}

// run is producer p's loop: transactions until ctx ends and its last
// one committed (so none of its transactions is left open); it gives up
// wait after ctx ended, and at once when the test is abandoned.
func (w *txnWorkload) run(ctx context.Context, p int) {
	defer w.wg.Done()
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	var giveUp time.Time
	committed := true
	for seq := int64(1); ; seq++ {
		if ctx.Err() != nil {
			if committed || w.abandoned.Load() {
				return
			}
			if giveUp.IsZero() {
				giveUp = time.Now().Add(wait)
			} else if time.Now().After(giveUp) {
				w.note(fmt.Errorf("producer %d: no commit within %v after the stop: gave up", p, wait))
				return
			}
		}
		if cl == nil {
			var err error
			if cl, err = w.producer(p); err != nil {
				w.note(err)
				return
			}
		}
		txn := checker.Txn{Producer: p, Seq: seq, Topic: txnTopic, Partitions: txnPartitionsOf(seq)}
		var err error
		txn.Outcome, err = w.transaction(cl, txn)
		w.mu.Lock()
		w.txns = append(w.txns, txn)
		w.mu.Unlock()
		committed = txn.Outcome == checker.Committed
		if committed {
			w.commits[p].Add(1)
		}
		if err != nil {
			w.note(fmt.Errorf("%v transaction: %w", txn.Outcome, err))
			cl.Close()
			cl = nil
		}
	}
}

func (w *txnWorkload) note(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs[err.Error()]++
}

// transaction runs txn on cl and returns its outcome: Aborted when no
// EndTxn commit was sent (whatever else failed), Committed when the
// commit was answered without error, else Unknown. A non-nil error means
// cl must not be used again.
func (w *txnWorkload) transaction(cl *kgo.Client, txn checker.Txn) (checker.Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return checker.Aborted, fmt.Errorf("begin: %w", err)
	}
	recs := make([]*kgo.Record, len(txn.Partitions))
	for i, p := range txn.Partitions {
		recs[i] = &kgo.Record{Topic: txn.Topic, Partition: p, Value: []byte(checker.TxnValue(txn.Producer, txn.Seq, i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return checker.Aborted, fmt.Errorf("produce: %w", err)
	}
	if txn.Seq%txnAbortEvery == 0 {
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return checker.Aborted, fmt.Errorf("abort: %w", err)
		}
		return checker.Aborted, nil
	}
	var err error
	if k, ok := w.takeKill(txn.Producer); ok {
		err = w.commitWithKill(ctx, cl, txn, k)
	} else {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err != nil {
		return checker.Unknown, fmt.Errorf("commit: %w", err)
	}
	return checker.Committed, nil
}

// takeKill is producer p's pending kill request, if any (the final
// transaction's producer gets none).
func (w *txnWorkload) takeKill(p int) (killRequest, bool) {
	if p >= txnProducers {
		return killRequest{}, false
	}
	select {
	case k := <-w.kills[p]:
		return k, true
	default:
		return killRequest{}, false
	}
}

// commitWithKill commits txn on cl and kills its coordinator at k.phase,
// answering k.done once the coordinator is dead.
func (w *txnWorkload) commitWithKill(ctx context.Context, cl *kgo.Client, txn checker.Txn, k killRequest) error {
	res := killResult{phase: k.phase, producer: txn.Producer, seq: txn.Seq}
	id := txnIDOf(txn.Producer)
	res.coordinator, res.err = w.txnCoordinator(ctx, id)
	if res.err != nil {
		k.done <- res
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	switch k.phase {
	case killOpen:
		res.state, res.err = w.txnState(ctx, res.coordinator, id)
		w.c.Kill(res.coordinator)
		k.done <- res
		return cl.EndTransaction(ctx, kgo.TryCommit)
	case killDuringCommit:
		res.state = "EndTxn sent"
		go func() {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			w.c.Kill(res.coordinator)
			k.done <- res
		}()
		return cl.EndTransaction(ctx, kgo.TryCommit)
	default:
		err := cl.EndTransaction(ctx, kgo.TryCommit)
		w.c.Kill(res.coordinator)
		res.state = fmt.Sprintf("commit answered %v", err)
		k.done <- res
		return err
	}
}

// txnCoordinator asks the cluster for id's coordinator (FindCoordinator
// with key type 1, transaction).
func (w *txnWorkload) txnCoordinator(ctx context.Context, id string) (int, error) {
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		resp, err := req.RequestWith(ctx, w.admin)
		if err == nil && len(resp.Coordinators) == 1 {
			if c := resp.Coordinators[0]; c.ErrorCode == 0 && c.NodeID > 0 {
				return int(c.NodeID), nil
			}
			err = kerr.ErrorForCode(resp.Coordinators[0].ErrorCode)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no coordinator for %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// txnState is id's state on its coordinator (DescribeTransactions).
func (w *txnWorkload) txnState(ctx context.Context, coordinator int, id string) (string, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(ctx, w.admin.Broker(coordinator))
	if err != nil {
		return "", err
	}
	if len(resp.TransactionStates) != 1 {
		return "", fmt.Errorf("describe %s: %d states", id, len(resp.TransactionStates))
	}
	s := resp.TransactionStates[0]
	return s.State, kerr.ErrorForCode(s.ErrorCode)
}

// kill has producer p kill its coordinator at phase of its next
// transaction that commits, and returns what it killed.
func (w *txnWorkload) kill(p int, phase killPhase) killResult {
	w.t.Helper()
	k := killRequest{phase: phase, done: make(chan killResult, 1)}
	w.kills[p] <- k
	select {
	case res := <-k.done:
		if res.err != nil {
			w.t.Fatalf("kill of producer %d's coordinator (%v): %v\n%s", p, phase, res.err, w.c.logTails())
		}
		return res
	case <-time.After(wait):
		w.t.Fatalf("producer %d reached no commit to kill its coordinator at (%v) within %v\n%s", p, phase, wait, w.c.logTails())
	}
	panic("unreachable")
}

// waitCommits waits until every producer committed one more transaction.
func (w *txnWorkload) waitCommits(what string) {
	w.t.Helper()
	var before [txnProducers]int64
	for p := range before {
		before[p] = w.commits[p].Load()
	}
	deadline := time.Now().Add(wait)
	for p := range before {
		for w.commits[p].Load() == before[p] {
			if time.Now().After(deadline) {
				w.mu.Lock()
				errs := fmt.Sprint(w.errs)
				w.mu.Unlock()
				w.t.Fatalf("%s: producer %d committed nothing within %v (failed transactions: %s)\n%s", what, p, wait, errs, w.c.logTails())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// stop ends the loops (each after a committed transaction) and returns
// the history; it fails the test if a producer's last transaction did
// not commit (one may be left open, and nothing after it readable).
func (w *txnWorkload) stop() []checker.Txn {
	w.t.Helper()
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[int]checker.Outcome{}
	for _, txn := range w.txns {
		last[txn.Producer] = txn.Outcome
	}
	for p := range txnProducers {
		if out, ok := last[p]; !ok || out != checker.Committed {
			w.t.Fatalf("producer %d stopped after a transaction that did not commit (%v): %v\n%s", p, out, w.errs, w.c.logTails())
		}
	}
	return w.txns
}

// finalTxn commits one record to every partition as producer
// txnProducers, after the loops stopped: read_committed shows it in a
// partition only once every transaction before it there is decided, so
// reading up to it reads everything. It is checked like the others.
func finalTxn(t *testing.T, w *txnWorkload) checker.Txn {
	t.Helper()
	txn := checker.Txn{Producer: txnProducers, Seq: 1, Topic: txnTopic, Outcome: checker.Committed}
	for p := range int32(txnPartitions) {
		txn.Partitions = append(txn.Partitions, p)
	}
	cl, err := w.producer(txnProducers)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if out, err := w.transaction(cl, txn); err != nil || out != checker.Committed {
		t.Fatalf("the final transaction: %v %v\n%s", out, err, w.c.logTails())
	}
	return txn
}

// readCommitted reads every partition with read_committed from its start
// until the final transaction's record in it.
func readCommitted(t *testing.T, c *Cluster, dial dialFunc, final checker.Txn) ([]checker.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	left := map[string]int32{}
	for i, p := range final.Partitions {
		offsets[p] = kgo.NewOffset().AtStart()
		left[checker.TxnValue(final.Producer, final.Seq, i)] = p
	}
	cl := kafkaClient(t, c, dial, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnTopic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	var read []checker.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			adm := kadm.NewClient(kafkaClient(t, c, dial))
			ends, _ := adm.ListEndOffsets(context.Background(), txnTopic)
			stable, _ := adm.ListCommittedOffsets(context.Background(), txnTopic)
			var sb strings.Builder
			ends.Each(func(o kadm.ListedOffset) {
				fmt.Fprintf(&sb, " %d: end %d, last stable %d;", o.Partition, o.Offset, stable[txnTopic][o.Partition].Offset)
			})
			return read, fmt.Errorf("the final transaction's records in %v never became visible to read_committed within %v (a transaction left undecided?);%s", left, wait, sb.String())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read = append(read, checker.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			delete(left, string(r.Value))
		})
	}
	return read, nil
}

// caughtUpAll: a (restarted) node's own status lists the txn topic's
// partitions, and every replicated partition it holds
// (__transaction_state and __consumer_offsets included) has a leader it
// follows and its log applied up to the commit index it knows.
func caughtUpAll(st httpapi.ClusterStatus) bool {
	n := 0
	for _, p := range st.Partitions {
		if p.Leader == 0 || p.Commit == 0 || p.Applied < p.Commit {
			return false
		}
		if p.Topic == txnTopic {
			n++
		}
	}
	return n == txnPartitions
}

// resumedDeliveries counts the brokers' log lines of a coordinator that
// gained a __transaction_state partition and resumed the markers of one
// of the producers' transactions (decided by the previous coordinator,
// its markers not all written: the kill right after the commit's answer
// is meant to leave one).
func resumedDeliveries(c *Cluster) int {
	n := 0
	for _, node := range c.Nodes {
		b, _ := os.ReadFile(filepath.Join(node.DataDir, "broker.log"))
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, "after gaining its coordinator") && strings.Contains(line, txnTopic+"-") {
				n++
			}
		}
	}
	return n
}

// TestNetnsTxnCoordinatorKill: transactions keep their guarantees across
// kill -9 of their coordinator (issue 13). Three brokers with
// offsets-topic-replication-factor and
// transaction-state-log-replication-factor 3, a 6-partition RF 3 topic,
// two franz-go transactional producers committing small transactions
// (five records over four partitions; every fifth aborted on purpose).
// Three times, the broker FindCoordinator names for one producer's
// transactional ID is killed with kill -9: once while the transaction is
// open (DescribeTransactions says Ongoing first; the commit then goes to
// the new coordinator), once right after EndTxn commit was answered (the
// markers may still be on their way: the new coordinator must resume
// them), once during the commit (the outcome may be unknown). Each time
// both producers must commit again without it, then it restarts on its
// data and catches up. After the run, a read_committed consumer reads
// every partition and checker.CheckTxn must find every committed record
// once, nothing of an aborted transaction, each unknown one all or
// nothing, the producers' order kept in each partition.
func TestNetnsTxnCoordinatorKill(t *testing.T) {
	Require(t)
	c := NewWithArgs(t, brokerBin, 3, "--offsets-topic-replication-factor", "3", "--transaction-state-log-replication-factor", "3")
	c.waitConverged("3 nodes elect a leader and register", ids(1, 3))
	dial := c.Dialer()
	adm := kadm.NewClient(kafkaClient(t, c, dial))
	createTxnTopic(t, adm)
	c.WaitFor("every partition of "+txnTopic+" in sync on 3 replicas", wait, nil, func(sts map[int]httpapi.ClusterStatus) bool {
		return inSync(sts, txnTopic, txnPartitions)
	})

	start := time.Now()
	w := startTxnWorkload(t, c, dial)
	w.waitCommits("before the kills")
	var kills []string
	for i, phase := range []killPhase{killOpen, killAfterCommit, killDuringCommit} {
		res := w.kill(i%txnProducers, phase)
		killed := time.Now()
		if phase == killOpen && res.state != "Ongoing" {
			t.Fatalf("killed coordinator %d with producer %d's transaction %d in state %q, want Ongoing", res.coordinator, res.producer, res.seq, res.state)
		}
		w.waitCommits(fmt.Sprintf("kill %d (%v) of coordinator %d", i+1, phase, res.coordinator))
		failover := time.Since(killed)
		c.Start(res.coordinator)
		c.WaitFor(fmt.Sprintf("broker %d restarted and caught up", res.coordinator), wait, []int{res.coordinator},
			func(sts map[int]httpapi.ClusterStatus) bool {
				st, ok := sts[res.coordinator]
				return ok && caughtUpAll(st)
			})
		kills = append(kills, fmt.Sprintf("broker %d (producer %d, transaction %d, %v: %s; both committed again %v later)",
			res.coordinator, res.producer, res.seq, phase, res.state, failover.Round(time.Millisecond)))
	}
	txns := w.stop()
	txns = append(txns, finalTxn(t, w))
	load := time.Since(start)
	read, readErr := readCommitted(t, c, dial, txns[len(txns)-1])
	r := checker.CheckTxn(checker.TxnHistory{Txns: txns, Read: read})
	w.mu.Lock()
	errs := make([]string, 0, len(w.errs))
	for e, n := range w.errs {
		errs = append(errs, fmt.Sprintf("%d x %s", n, e))
	}
	w.mu.Unlock()
	sort.Strings(errs)
	t.Logf("FIGURE txn coordinator kill: %v under load; kills: %s; transactions whose markers a new coordinator resumed (after a kill or a hand-back): %d; failed transactions: %v\n%s",
		load.Round(time.Second), strings.Join(kills, "; "), resumedDeliveries(c), errs, r)
	if readErr != nil {
		t.Fatalf("%v\n%s", readErr, c.logTails())
	}
	if !r.OK() {
		t.Fatalf("the checker found failures:\n%s", r)
	}
	if r.Committed < 2*len(kills) || r.Aborted == 0 {
		t.Fatalf("too few transactions to check anything: %s", r)
	}
}

// createTxnTopic creates the test's topic, 6 partitions, RF 3.
func createTxnTopic(t *testing.T, adm *kadm.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		resp, err := adm.CreateTopic(ctx, txnPartitions, 3, nil, txnTopic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil || !(errors.Is(err, kerr.NotController) || kerr.IsRetriable(err)) {
			t.Fatalf("create %s with RF 3: %v %s", txnTopic, err, resp.ErrMessage)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
