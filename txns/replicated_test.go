package txns

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// memStateLog is a StateLog kept in memory: a log of batches with
// contiguous offsets, as a replicated partition's applied log; failing
// refuses every append as a lost leadership does.
type memStateLog struct {
	mu      sync.Mutex
	batches [][]byte
	next    int64
	failing bool
}

func (l *memStateLog) Append(batch []byte) func() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return func() (int64, error) { return -1, fmt.Errorf("%w: leadership lost", ErrNotCoordinator) }
	}
	h, err := topics.ParseBatchHeader(batch)
	if err != nil {
		return func() (int64, error) { return -1, err }
	}
	b := append([]byte(nil), batch...)
	topics.SetBaseOffset(b, l.next)
	base := l.next
	l.next += int64(h.LastOffsetDelta) + 1
	l.batches = append(l.batches, b)
	return func() (int64, error) { return base, nil }
}

func (l *memStateLog) ReadRange(offset int64, _ int, dst []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.batches {
		h, _ := topics.ParseBatchHeader(b)
		if h.BaseOffset+int64(h.LastOffsetDelta) >= offset {
			dst = append(dst, b...)
		}
	}
	return dst, nil
}

func (l *memStateLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func (l *memStateLog) LogStart() int64 { return 0 }

// rows is the latest row of each transactional ID in l.
func (l *memStateLog) rows(t *testing.T) map[string][]byte {
	t.Helper()
	latest, _, err := readStateLog(l)
	if err != nil {
		t.Fatal(err)
	}
	return latest
}

// replicatedCoordinator is a harness whose coordinator serves partition 0
// of a replicated __transaction_state (every ID there) from log, loaded
// at epoch.
func replicatedCoordinator(t *testing.T, sender *testSender, log *memStateLog, epoch uint64) *harness {
	t.Helper()
	h := newHarness(t, Config{Markers: sender, MarkerBackoff: time.Millisecond})
	if err := h.c.UseReplicatedLog(func(string) int32 { return 0 }); err != nil {
		t.Fatal(err)
	}
	h.c.StartLoad(0, epoch, log)
	if err := h.c.Serves("a"); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("Serves while loading: %v, want ErrCoordinatorLoadInProgress", err)
	}
	if _, _, err := h.c.InitProducerID("a", 1000, -1, -1, h.now); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("InitProducerID while loading: %v, want ErrCoordinatorLoadInProgress", err)
	}
	if res, err := h.c.Load(0, epoch); err != nil || !res.Loaded {
		t.Fatalf("load: %+v %v", res, err)
	}
	return h
}

// TestReplicatedStateLoad: what one coordinator writes to a replicated
// __transaction_state partition (no local row), another loads: a
// committed transaction, an open one (aborted by the new coordinator's
// timeout, with a bumped epoch) and one in PrepareAbort whose delivery
// the first never finished (resumed after the load, with the new leader
// epoch as coordinator epoch). Every partition is remote.
func TestReplicatedStateLoad(t *testing.T) {
	log := &memStateLog{}
	stuck := newTestSender()
	a := replicatedCoordinator(t, stuck, log, 1)
	// "a" commits: its local-looking partition t/0 is remote too.
	pid, epoch := a.begin("a", 60000)
	if err := a.c.EndTxn("a", pid, epoch, true, a.now); err != nil {
		t.Fatal(err)
	}
	a.delivered()
	if sends := stuck.recorded(); len(sends) != 1 || !slices.Equal(sends[0].parts, []TopicPartition{{"t", 0}}) || sends[0].m.CoordinatorEpoch != 1 {
		t.Fatalf("sends %+v, want one to t/0 with coordinator epoch 1", sends)
	}
	if _, err := a.store.Get(pebblestore.TxnKey("a")); err == nil {
		t.Fatal("a replicated coordinator wrote a local row")
	}
	// "b" stays open; "c" is left in PrepareAbort, its marker not answered.
	pidB, epochB := a.begin("b", 1000)
	stuck.hold = make(chan struct{})
	pidC, epochC := a.begin("c", 60000)
	if err := a.c.EndTxn("c", pidC, epochC, false, a.now); err != nil {
		t.Fatal(err)
	}
	<-stuck.entered
	a.c.UnloadPartition(0) // leadership lost: the delivery stops
	a.delivered()
	if err := a.c.Serves("a"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("Serves after unload: %v, want ErrNotCoordinator", err)
	}
	if d, ok := a.c.Describe("a"); ok {
		t.Fatalf("unloaded coordinator still has %+v", d)
	}

	sender := newTestSender()
	b := replicatedCoordinator(t, sender, log, 2)
	b.delivered()
	if d, _ := b.c.Describe("a"); d.State != StateCompleteCommit || d.ProducerID != pid || d.Epoch != epoch {
		t.Fatalf("loaded a %+v, want CompleteCommit %d/%d", d, pid, epoch)
	}
	if d, _ := b.c.Describe("c"); d.State != StateCompleteAbort {
		t.Fatalf("loaded c %+v, want CompleteAbort after the resumed delivery", d)
	}
	want := RemoteMarker{TransactionalID: "c", ProducerID: pidC, ProducerEpoch: epochC, Commit: false, CoordinatorEpoch: 2}
	if sends := sender.recorded(); len(sends) != 1 || sends[0].m != want || !slices.Equal(sends[0].parts, []TopicPartition{{"t", 0}}) {
		t.Fatalf("sends after the load %+v, want one %+v to t/0", sends, want)
	}
	d, _ := b.c.Describe("b")
	if d.State != StateOngoing || !slices.Equal(d.Partitions, []TopicPartition{{"t", 0}}) {
		t.Fatalf("loaded b %+v, want Ongoing with t/0", d)
	}
	if err := b.c.CheckProduce(pidB, epochB, "t", 0); err != nil {
		t.Fatalf("CheckProduce of the loaded open transaction: %v", err)
	}
	b.c.Tick(b.now.Add(2 * time.Second))
	b.delivered()
	if d, _ := b.c.Describe("b"); d.State != StateCompleteAbort || d.Epoch != epochB+1 {
		t.Fatalf("b after its timeout %+v, want CompleteAbort at epoch %d", d, epochB+1)
	}
	// The log holds what b wrote: a third coordinator sees b aborted.
	rows := log.rows(t)
	for _, id := range []string{"a", "b", "c"} {
		if rows[id] == nil {
			t.Fatalf("no row of %s in the log", id)
		}
	}
	c := replicatedCoordinator(t, newTestSender(), log, 3)
	if d, _ := c.c.Describe("b"); d.State != StateCompleteAbort {
		t.Fatalf("third load of b %+v, want CompleteAbort", d)
	}
}

// TestReplicatedStateFailedAppend: a write whose proposal fails is
// answered ErrNotCoordinator, never reported done.
func TestReplicatedStateFailedAppend(t *testing.T) {
	log := &memStateLog{}
	h := replicatedCoordinator(t, newTestSender(), log, 1)
	pid, epoch := h.begin("a", 60000)
	log.mu.Lock()
	log.failing = true
	log.mu.Unlock()
	if err := h.c.EndTxn("a", pid, epoch, true, h.now); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("EndTxn with a failing log: %v, want ErrNotCoordinator", err)
	}
	if _, _, err := h.c.InitProducerID("new", 1000, -1, -1, h.now); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("InitProducerID with a failing log: %v, want ErrNotCoordinator", err)
	}
	h.delivered()
	if rows := log.rows(t); len(rows) != 1 {
		t.Fatalf("log rows %v, want only a's", rows)
	}
	var row txn
	if err := jsonUnmarshal(log.rows(t)["a"], &row); err != nil || row.State != StateOngoing {
		t.Fatalf("a's last committed row %+v %v, want Ongoing", row, err)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestReplicatedStateExpiry: an expired transactional ID is a tombstone
// in the log, so the next coordinator does not load it.
func TestReplicatedStateExpiry(t *testing.T) {
	log := &memStateLog{}
	sender := newTestSender()
	h := newHarness(t, Config{Markers: sender, IDExpiration: time.Hour})
	if err := h.c.UseReplicatedLog(func(string) int32 { return 0 }); err != nil {
		t.Fatal(err)
	}
	h.c.StartLoad(0, 1, log)
	if _, err := h.c.Load(0, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.c.InitProducerID("a", 1000, -1, -1, h.now); err != nil {
		t.Fatal(err)
	}
	h.c.Tick(h.now.Add(2 * time.Hour))
	if v, ok := log.rows(t)["a"]; !ok || v != nil {
		t.Fatalf("a's latest record %q (present %v), want a tombstone", v, ok)
	}
	next := replicatedCoordinator(t, newTestSender(), log, 2)
	if d, ok := next.c.Describe("a"); ok {
		t.Fatalf("an expired id was loaded: %+v", d)
	}
}

// TestReplicatedStateNeedsMarkers: without a marker sender a replicated
// __transaction_state is switched to but never served (a transaction
// could not complete), and the error says so.
func TestReplicatedStateNeedsMarkers(t *testing.T) {
	h := newHarness(t, Config{})
	if _, _, err := h.c.InitProducerID("a", 1000, -1, -1, h.now); err != nil {
		t.Fatal(err)
	}
	if err := h.c.UseReplicatedLog(func(string) int32 { return 0 }); err == nil {
		t.Fatal("UseReplicatedLog without a marker sender: no error")
	}
	h.c.StartLoad(0, 1, &memStateLog{})
	if _, _, err := h.c.InitProducerID("a", 1000, -1, -1, h.now); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("InitProducerID: %v, want ErrNotCoordinator", err)
	}
}
