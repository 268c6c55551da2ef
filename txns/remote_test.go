package txns

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// testSender is a MarkerSender over a fixed set of remote partitions and
// groups. It records every Send; the first fail Sends answer every
// partition retriable; while hold is set, Send waits until it is closed
// or its context ends (a leader that cannot be reached).
type testSender struct {
	remote map[TopicPartition]bool
	groups map[string]TopicPartition

	mu   sync.Mutex
	fail int
	// fenced: every Send answers a partition TRANSACTION_COORDINATOR_FENCED.
	fenced bool
	hold   chan struct{}
	sends  []testSend
	// entered is signalled (non-blocking) at each Send.
	entered chan struct{}
}

type testSend struct {
	m     RemoteMarker
	parts []TopicPartition
}

func newTestSender(remote ...TopicPartition) *testSender {
	s := &testSender{remote: map[TopicPartition]bool{}, groups: map[string]TopicPartition{}, entered: make(chan struct{}, 64)}
	for _, tp := range remote {
		s.remote[tp] = true
	}
	return s
}

func (s *testSender) LocalPartition(topic string, p int32) bool {
	return !s.remote[TopicPartition{topic, p}]
}

func (s *testSender) GroupMarker(group string) (TopicPartition, bool) {
	tp, ok := s.groups[group]
	return tp, ok
}

func (s *testSender) Send(ctx context.Context, m RemoteMarker, parts []TopicPartition) ([]TopicPartition, bool) {
	s.mu.Lock()
	s.sends = append(s.sends, testSend{m, slices.Clone(parts)})
	hold, fenced := s.hold, s.fenced
	failing := s.fail > 0
	if failing {
		s.fail--
	}
	s.mu.Unlock()
	select {
	case s.entered <- struct{}{}:
	default:
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return parts, false
		}
	}
	if failing {
		return parts, false
	}
	return nil, fenced
}

func (s *testSender) recorded() []testSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sends)
}

// storedState is the state of id's row in the store.
func (h *harness) storedState(id string) (State, []TopicPartition) {
	h.t.Helper()
	v, err := h.store.Get(pebblestore.TxnKey(id))
	if err != nil {
		h.t.Fatal(err)
	}
	var row txn
	if err := json.Unmarshal(v, &row); err != nil {
		h.t.Fatal(err)
	}
	return row.State, row.Remote
}

// delivered waits for every delivery goroutine to end.
func (h *harness) delivered() { h.c.wg.Wait() }

func TestRemoteCommitInTwoPhases(t *testing.T) {
	remote := TopicPartition{"elsewhere", 3}
	offsets := TopicPartition{"__consumer_offsets", 7}
	sender := newTestSender(remote)
	sender.groups["g"] = offsets
	sender.fail = 2
	sender.hold = make(chan struct{})
	h := newHarness(t, Config{Markers: sender, MarkerBackoff: time.Millisecond})
	pid, epoch := h.begin("a", 10000)
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{remote}, h.now); err != nil {
		t.Fatal(err)
	}
	if err := h.c.AddOffsets("a", pid, epoch, "g", h.now); err != nil {
		t.Fatal(err)
	}
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	// EndTxn answered with the Prepare state durable, the remote
	// partitions recorded, and no local marker written.
	<-sender.entered
	if st, rem := h.storedState("a"); st != StatePrepareCommit || !slices.Equal(rem, []TopicPartition{remote, offsets}) {
		t.Fatalf("stored row %v %v, want PrepareCommit with the remote partitions", st, rem)
	}
	if lso := h.part.LastStableOffset(); lso != 0 {
		t.Fatalf("lso %d before the remote markers are answered, want 0", lso)
	}
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{{"t", 0}}, h.now); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("AddPartitions while completing: %v, want ErrConcurrentTransactions", err)
	}
	close(sender.hold)
	h.delivered()

	sends := sender.recorded()
	if len(sends) != 3 {
		t.Fatalf("%d sends, want 3 (two retriable failures, then answered)", len(sends))
	}
	want := RemoteMarker{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Commit: true}
	for _, s := range sends {
		if s.m != want || !slices.Equal(s.parts, []TopicPartition{remote, offsets}) {
			t.Fatalf("sent %+v %v, want %+v to %v", s.m, s.parts, want, []TopicPartition{remote, offsets})
		}
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 3 || hwm != 3 {
		t.Fatalf("local partition lso %d hwm %d, want 3 3 (its marker written at completion)", lso, hwm)
	}
	if st, rem := h.storedState("a"); st != StateCompleteCommit || rem != nil {
		t.Fatalf("stored row %v %v, want CompleteCommit", st, rem)
	}
	// A retried EndTxn of the completed transaction succeeds.
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteRestartInPrepareResumes(t *testing.T) {
	remote := TopicPartition{"elsewhere", 0}
	stuck := newTestSender(remote)
	stuck.hold = make(chan struct{}) // never answered
	h := newHarness(t, Config{Markers: stuck, MarkerBackoff: time.Millisecond})
	pid, epoch := h.begin("a", 10000)
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{remote}, h.now); err != nil {
		t.Fatal(err)
	}
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, false, h.now); err != nil {
		t.Fatal(err)
	}
	<-stuck.entered
	sender := newTestSender(remote)
	h.cfg.Markers = sender
	h.restart() // Close stops the stuck delivery; Open resumes it
	h.delivered()
	sends := sender.recorded()
	want := RemoteMarker{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Commit: false}
	if len(sends) != 1 || sends[0].m != want || !slices.Equal(sends[0].parts, []TopicPartition{remote}) {
		t.Fatalf("sends after restart %+v, want one %+v to %v", sends, want, remote)
	}
	if d, _ := h.c.Describe("a"); d.State != StateCompleteAbort {
		t.Fatalf("state %v after the resumed delivery, want CompleteAbort", d.State)
	}
	if lso, hwm := h.part.LastStableOffset(), h.part.HighWatermark(); lso != 3 || hwm != 3 {
		t.Fatalf("local partition lso %d hwm %d, want 3 3", lso, hwm)
	}
	if got := h.part.AbortedTransactions(); len(got) != 1 || got[0].ProducerID != pid {
		t.Fatalf("aborted index %+v, want the producer's transaction", got)
	}
}

func TestRemoteTimeoutAbortsInTwoPhases(t *testing.T) {
	remote := TopicPartition{"elsewhere", 1}
	sender := newTestSender(remote)
	h := newHarness(t, Config{Markers: sender, MarkerBackoff: time.Millisecond})
	pid, epoch := h.begin("a", 1000)
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{remote}, h.now); err != nil {
		t.Fatal(err)
	}
	h.c.Tick(h.now.Add(2 * time.Second))
	h.delivered()
	sends := sender.recorded()
	// The abort is sent with the bumped epoch, fencing the producer on
	// the remote partition too.
	want := RemoteMarker{TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch + 1, Commit: false}
	if len(sends) != 1 || sends[0].m != want {
		t.Fatalf("sends %+v, want one %+v", sends, want)
	}
	if d, _ := h.c.Describe("a"); d.State != StateCompleteAbort {
		t.Fatalf("state %v, want CompleteAbort", d.State)
	}
}

// TestLocalTransactionStaysOneBatch: with a sender configured (a
// cluster), a transaction of local partitions only completes before
// EndTxn answers, in one write: nothing is sent, no Prepare row written.
func TestLocalTransactionStaysOneBatch(t *testing.T) {
	sender := newTestSender(TopicPartition{"elsewhere", 0})
	h := newHarness(t, Config{Markers: sender})
	pid, epoch := h.begin("a", 10000)
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.storedState("a"); st != StateCompleteCommit {
		t.Fatalf("stored state %v when EndTxn answered, want CompleteCommit", st)
	}
	if lso := h.part.LastStableOffset(); lso != 3 {
		t.Fatalf("lso %d, want 3", lso)
	}
	if sends := sender.recorded(); len(sends) != 0 {
		t.Fatalf("sent %+v for a local transaction", sends)
	}
}

// TestRemoteFencedDeliveryStops pins a deposed coordinator's delivery
// that went on after a partition answered TRANSACTION_COORDINATOR_FENCED
// (a newer coordinator owns the producer): as Kafka's
// TransactionMarkerRequestCompletionHandler, the delivery stops at once,
// sends nothing again and does not complete the transaction (its row
// stays in the Prepare state; the new coordinator decides).
func TestRemoteFencedDeliveryStops(t *testing.T) {
	remote := TopicPartition{"elsewhere", 2}
	sender := newTestSender(remote)
	sender.fenced = true
	h := newHarness(t, Config{Markers: sender, MarkerBackoff: time.Millisecond})
	pid, epoch := h.begin("a", 10000)
	if err := h.c.AddPartitions("a", pid, epoch, []TopicPartition{remote}, h.now); err != nil {
		t.Fatal(err)
	}
	if _, err := h.produce(pid, epoch, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); err != nil {
		t.Fatal(err)
	}
	h.delivered()
	if sends := sender.recorded(); len(sends) != 1 {
		t.Fatalf("%d sends, want 1 (fenced is final)", len(sends))
	}
	if st, rem := h.storedState("a"); st != StatePrepareCommit || !slices.Equal(rem, []TopicPartition{remote}) {
		t.Fatalf("stored row %v %v, want PrepareCommit (not completed by a fenced coordinator)", st, rem)
	}
	if lso := h.part.LastStableOffset(); lso != 0 {
		t.Fatalf("local partition lso %d, want 0 (no local marker written)", lso)
	}
}
