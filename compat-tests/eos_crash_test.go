package compattests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnOutcome is what a producer knows of one of its transactions.
type txnOutcome int8

const (
	txnCommitted txnOutcome = iota // EndTxn commit answered without error
	txnAborted                     // never asked to commit: it must not be visible
	txnUnknown                     // commit asked, the answer lost: all or nothing
)

// endTxnInFlight counts EndTxn requests written and not yet answered, and
// signals the first EndTxn written after arm.
type endTxnInFlight struct {
	inFlight atomic.Int64
	lost     atomic.Int64 // EndTxn answers that never came (connection died)
	armed    atomic.Bool
	fire     chan struct{}
}

func (h *endTxnInFlight) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != int16(kmsg.EndTxn) || err != nil {
		return
	}
	h.inFlight.Add(1)
	if h.armed.CompareAndSwap(true, false) {
		h.fire <- struct{}{}
	}
}

func (h *endTxnInFlight) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) {
		h.inFlight.Add(-1)
		if err != nil {
			h.lost.Add(1)
		}
	}
}

// crashTxnProducer runs transactions spanning every partition of the
// test's topics plus staged offsets, until stop is closed.
type crashTxnProducer struct {
	t       *testing.T
	addr    string
	id      int
	txnID   string
	group   string
	targets []crashTarget
	hook    *endTxnInFlight

	mu       sync.Mutex
	outcomes []txnOutcome // by transaction sequence number
	done     atomic.Int64 // transactions ended, either way
}

type crashTarget struct {
	topic     string
	partition int32
}

// crashTxnTag names transaction seq of producer id in its records.
func crashTxnTag(id, seq int) string { return fmt.Sprintf("p%d-t%05d", id, seq) }

func (p *crashTxnProducer) client() *kgo.Client {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(p.addr),
		kgo.ClientID(fmt.Sprintf("compat-tests-crash-txn-%d", p.id)),
		kgo.TransactionalID(p.txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(45*time.Second),
		kgo.WithHooks(p.hook),
	)
	if err != nil {
		panic(err) // options are static
	}
	return cl
}

func (p *crashTxnProducer) record(o txnOutcome) {
	p.mu.Lock()
	p.outcomes = append(p.outcomes, o)
	p.mu.Unlock()
	p.done.Add(1)
}

// run loops until stop is closed. Every third transaction aborts. A
// transaction whose body or end fails gets a fresh client: its
// InitProducerId aborts whatever the old one left open.
func (p *crashTxnProducer) run(stop <-chan struct{}) error {
	cl := p.client()
	defer func() { cl.Close() }()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		commit := seq%3 != 2
		outcome, err := p.txn(cl, seq, commit)
		p.record(outcome)
		if err != nil {
			p.t.Logf("producer %d transaction %d (commit %v): %v; outcome %d; new client", p.id, seq, commit, err, outcome)
			cl.Close()
			cl = p.client()
		}
	}
}

// txn runs transaction seq and reports its outcome as the client knows it.
func (p *crashTxnProducer) txn(cl *kgo.Client, seq int, commit bool) (txnOutcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return txnAborted, fmt.Errorf("begin: %w", err)
	}
	tag := crashTxnTag(p.id, seq)
	rs := make([]*kgo.Record, len(p.targets))
	for i, tg := range p.targets {
		rs[i] = &kgo.Record{Topic: tg.topic, Partition: tg.partition, Key: []byte(tag), Value: []byte(tag)}
	}
	body := cl.ProduceSync(ctx, rs...).FirstErr()
	if body == nil {
		body = p.stageOffsets(ctx, cl, int64(seq))
	}
	if body != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return txnAborted, body
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		if commit {
			return txnUnknown, fmt.Errorf("end: %w", err)
		}
		return txnAborted, fmt.Errorf("end: %w", err)
	}
	if commit {
		return txnCommitted, nil
	}
	return txnAborted, nil
}

// stageOffsets adds the producer's group to the transaction and stages
// offset seq for the first partition of each topic.
func (p *crashTxnProducer) stageOffsets(ctx context.Context, cl *kgo.Client, seq int64) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = p.txnID, pid, epoch, p.group
	addResp, err := add.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	if err := kerr.ErrorForCode(addResp.ErrorCode); err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = p.txnID, p.group, pid, epoch, -1
	for _, tg := range p.offsetTargets() {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = tg.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = tg.partition, seq
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("TxnOffsetCommit %s/%d: %w", rt.Topic, rp.Partition, err)
			}
		}
	}
	return nil
}

// offsetTargets are the partitions whose offsets each transaction stages.
func (p *crashTxnProducer) offsetTargets() []crashTarget {
	var out []crashTarget
	seen := map[string]bool{}
	for _, tg := range p.targets {
		if !seen[tg.topic] {
			seen[tg.topic] = true
			out = append(out, tg)
		}
	}
	return out
}

// TestTxnBrokerKilledDuringEndTxn: three franz-go transactional producers
// loop over transactions that each write one record to five partitions of
// two topics and stage consumer offsets (AddOffsetsToTxn +
// TxnOffsetCommit), committing two of three and aborting the third. The
// broker is killed with SIGKILL shortly after an EndTxn request is written,
// six times, and restarted on the same data. The clients retry or start
// over. Afterwards no transaction is open (LSO = HWM everywhere), and
// read_committed shows each transaction on all five partitions or on none:
// every transaction whose commit was answered is there, every one never
// asked to commit is not, and one whose commit answer was lost is all or
// nothing. Each producer group's committed offsets are those staged by its
// last visible transaction.
func TestTxnBrokerKilledDuringEndTxn(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topicA, topicB := topicName(t, "a"), topicName(t, "b")
	createTopic(t, adm, topicA, 3, nil)
	createTopic(t, adm, topicB, 2, nil)
	var targets []crashTarget
	for p := range int32(3) {
		targets = append(targets, crashTarget{topicA, p})
	}
	for p := range int32(2) {
		targets = append(targets, crashTarget{topicB, p})
	}
	hook := &endTxnInFlight{fire: make(chan struct{}, 1)}
	const producers = 3
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	ps := make([]*crashTxnProducer, producers)
	for i := range ps {
		ps[i] = &crashTxnProducer{t: t, addr: b.Addr(), id: i, txnID: topicName(t, fmt.Sprintf("txn-%d", i)),
			group: topicName(t, fmt.Sprintf("group-%d", i)), targets: targets, hook: hook}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ps[i].run(stop); err != nil {
				errs <- err
			}
		}()
	}
	var stopOnce sync.Once
	stopProducers := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(stopProducers)

	// progress waits until every producer ended n more transactions.
	progress := func(n int64, what string) {
		t.Helper()
		base := make([]int64, producers)
		for i, p := range ps {
			base[i] = p.done.Load()
		}
		retWaitFor(t, 90*time.Second, what, func() (bool, string) {
			ok, state := true, ""
			for i, p := range ps {
				d := p.done.Load() - base[i]
				ok = ok && d >= n
				state += fmt.Sprintf("producer %d: %d ", i, d)
			}
			return ok, state
		})
	}
	// The kill follows the EndTxn write after a delay that differs per
	// cycle, so that the kills land at different steps of ending a
	// transaction (PrepareCommit durable, some markers written, offsets
	// applied, outcome recorded).
	killDelays := []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond}
	cycles := len(killDelays)
	inFlightAtKill := 0
	for cycle, delay := range killDelays {
		progress(4, fmt.Sprintf("transactions before kill %d", cycle+1))
		hook.armed.Store(true)
		select {
		case <-hook.fire:
		case <-time.After(opTimeout):
			t.Fatalf("cycle %d: no EndTxn written within %v", cycle+1, opTimeout)
		}
		time.Sleep(delay)
		if hook.inFlight.Load() > 0 { // read before the kill fails it
			inFlightAtKill++
		}
		b.Kill()
		b.Start()
	}
	progress(4, "transactions after the last restart")
	stopProducers()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("EndTxn requests were in flight at %d of %d kills; %d EndTxn answers were lost", inFlightAtKill, cycles, hook.lost.Load())
	if inFlightAtKill == 0 || hook.lost.Load() == 0 {
		t.Fatalf("no kill hit an EndTxn in flight: the test did not exercise what it claims")
	}

	// No transaction is left open, and every partition reads to its end.
	c := dialRaw(t, b.Addr())
	visible := map[string]map[crashTarget]int{} // tag -> partition -> copies
	for _, tg := range targets {
		hwm, lso := eosListOffset(t, c, tg.topic, tg.partition, -1, 0), eosListOffset(t, c, tg.topic, tg.partition, -1, 1)
		if lso != hwm {
			t.Fatalf("%s/%d: last stable offset %d, high watermark %d with every producer stopped", tg.topic, tg.partition, lso, hwm)
		}
		r := newEOSReader(t, b.Addr(), tg.topic, tg.partition, 0)
		r.toEnd(hwm, 30*time.Second)
		for _, rec := range r.records {
			tag := string(rec.Value)
			if visible[tag] == nil {
				visible[tag] = map[crashTarget]int{}
			}
			visible[tag][tg]++
		}
	}
	counts := map[txnOutcome]int{}
	for _, p := range ps {
		last := int64(-1) // the last visible transaction's offsets are the committed ones
		p.mu.Lock()
		outcomes := append([]txnOutcome(nil), p.outcomes...)
		p.mu.Unlock()
		for seq, o := range outcomes {
			counts[o]++
			tag := crashTxnTag(p.id, seq)
			parts := visible[tag]
			delete(visible, tag)
			for tg, n := range parts {
				if n != 1 {
					t.Errorf("%s: %d copies on %s/%d", tag, n, tg.topic, tg.partition)
				}
			}
			switch {
			case len(parts) != 0 && len(parts) != len(targets):
				t.Errorf("%s (outcome %d): visible on %d of %d partitions: %v", tag, o, len(parts), len(targets), parts)
			case o == txnCommitted && len(parts) == 0:
				t.Errorf("%s: committed, not visible under read_committed", tag)
			case o == txnAborted && len(parts) != 0:
				t.Errorf("%s: never asked to commit, visible under read_committed", tag)
			}
			if len(parts) > 0 {
				last = int64(seq)
			}
		}
		ctx := testCtx(t, opTimeout)
		offs, err := adm.FetchOffsets(ctx, p.group)
		if err != nil {
			t.Fatalf("FetchOffsets %s: %v", p.group, err)
		}
		for _, tg := range p.offsetTargets() {
			o, ok := offs.Lookup(tg.topic, tg.partition)
			got := int64(-1)
			if ok {
				got = o.At
			}
			if got != last {
				t.Errorf("producer %d: committed offset of %s/%d is %d, want %d (staged by its last visible transaction)", p.id, tg.topic, tg.partition, got, last)
			}
		}
	}
	if len(visible) > 0 {
		var extra []string
		for tag := range visible {
			extra = append(extra, tag)
		}
		sort.Strings(extra)
		t.Errorf("records of transactions no producer ran: %s", strings.Join(extra, " "))
	}
	t.Logf("transactions: %d committed, %d aborted, %d with the commit answer lost", counts[txnCommitted], counts[txnAborted], counts[txnUnknown])
	if counts[txnCommitted] == 0 || counts[txnAborted] == 0 {
		t.Fatalf("outcomes %v: want both committed and aborted transactions", counts)
	}
}
