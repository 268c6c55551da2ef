package events

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// TestConsumerLifeCycle: create (at a start, again with the same start,
// refused with another), describe, list, commit forward, a regression
// refused then forced, the same position again, bounds, delete.
func TestConsumerLifeCycle(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	mustAppend(t, st, "a", Any, e.now(), ev("T", "1"), ev("T", "2"), ev("T", "3"))

	now := e.now()
	c, created, err := st.CreateConsumer("proj", "first", 0, time.UnixMilli(now))
	if err != nil || !created || c.Position != 0 || c.Start != "first" || c.CreatedMs != now || c.UpdatedMs != now {
		t.Fatalf("create: %+v %v %v", c, created, err)
	}
	again, created, err := st.CreateConsumer("proj", "first", 2, time.UnixMilli(e.now()))
	if err != nil || created || again != c {
		t.Fatalf("create again with the same start: %+v %v %v, want %+v unchanged", again, created, err, c)
	}
	if _, _, err := st.CreateConsumer("proj", "new", 3, time.UnixMilli(e.now())); !errors.Is(err, ErrConsumerExists) {
		t.Fatalf("create with another start: %v", err)
	}
	if _, _, err := st.CreateConsumer("late", "pos:4", 4, time.UnixMilli(e.now())); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("create past the next position: %v", err)
	}
	if _, _, err := st.CreateConsumer("tail", "new", 3, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a\nb", "a\x7fb", string([]byte{0xff})} {
		if _, _, err := st.CreateConsumer(bad, "first", 0, time.UnixMilli(e.now())); !errors.Is(err, ErrInvalidConsumerName) {
			t.Fatalf("create %q: %v", bad, err)
		}
	}
	if _, _, err := st.CreateConsumer(strings.Repeat("é", 128), "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatalf("a 128-character name: %v", err)
	}

	list, err := st.Consumers()
	if err != nil || len(list) != 3 || list[0].Name != "proj" || list[1].Name != "tail" || list[2].Position != 0 {
		t.Fatalf("list: %+v %v", list, err)
	}

	c, err = st.CommitConsumer("proj", 2, false, time.UnixMilli(e.now()))
	if err != nil || c.Position != 2 || c.UpdatedMs <= c.CreatedMs {
		t.Fatalf("commit 2: %+v %v", c, err)
	}
	if same, err := st.CommitConsumer("proj", 2, false, time.UnixMilli(e.now())); err != nil || same != c {
		t.Fatalf("commit 2 again: %+v %v, want %+v", same, err, c)
	}
	_, err = st.CommitConsumer("proj", 1, false, time.UnixMilli(e.now()))
	var reg *CheckpointRegressionError
	if !errors.As(err, &reg) || !errors.Is(err, ErrCheckpointRegression) || reg.Current != 2 || reg.Position != 1 {
		t.Fatalf("commit below the checkpoint: %v", err)
	}
	if got, _ := st.Consumer("proj"); got.Position != 2 {
		t.Fatalf("a refused regression moved the checkpoint to %d", got.Position)
	}
	if c, err = st.CommitConsumer("proj", 1, true, time.UnixMilli(e.now())); err != nil || c.Position != 1 {
		t.Fatalf("forced rewind: %+v %v", c, err)
	}
	for _, pos := range []int64{-1, 4} {
		if _, err := st.CommitConsumer("proj", pos, false, time.UnixMilli(e.now())); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("commit %d: %v", pos, err)
		}
	}
	if c, err = st.CommitConsumer("proj", 3, false, time.UnixMilli(e.now())); err != nil || c.Position != 3 {
		t.Fatalf("commit the next position: %+v %v", c, err)
	}
	if _, err := st.CommitConsumer("nope", 1, false, time.UnixMilli(e.now())); !errors.Is(err, ErrConsumerNotFound) {
		t.Fatalf("commit of an unknown consumer: %v", err)
	}
	if err := st.DeleteConsumer("proj"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteConsumer("proj"); !errors.Is(err, ErrConsumerNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := st.Consumer("proj"); !errors.Is(err, ErrConsumerNotFound) {
		t.Fatalf("describe a deleted consumer: %v", err)
	}
	if c, created, err := st.CreateConsumer("proj", "new", 3, time.UnixMilli(e.now())); err != nil || !created || c.Position != 3 {
		t.Fatalf("re-create with another start after the delete: %+v %v %v", c, created, err)
	}
}

// TestConsumerCheckpointsSurviveRestart: checkpoints, starts and times are
// the same after a reopen, and the consumer count limit is recovered.
func TestConsumerCheckpointsSurviveRestart(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	mustAppend(t, st, "a", Any, e.now(), ev("T", "1"), ev("T", "2"))
	if _, _, err := st.CreateConsumer("c1", "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateConsumer("c2", "time:2020-01-01T00:00:00Z", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitConsumer("c1", 2, false, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	before, err := st.Consumers()
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	st, err = e.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	after, err := st.Consumers()
	if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("consumers after the restart %+v %v, want %+v", after, err, before)
	}
	if st.consumers != 2 {
		t.Fatalf("recovered consumer count %d, want 2", st.consumers)
	}
	if _, err := st.CommitConsumer("c1", 1, false, time.UnixMilli(e.now())); !errors.Is(err, ErrCheckpointRegression) {
		t.Fatalf("regression after the restart: %v", err)
	}
}

// TestConsumerCommitSurvivesCrash: an acknowledged commit is on disk at
// the moment it returns (a crash clone keeps no unsynced data).
func TestConsumerCommitSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	e := openEnv(t, "/data", mem)
	st := e.store("s")
	mustAppend(t, st, "a", Any, e.now(), ev("T", "1"), ev("T", "2"))
	if _, _, err := st.CreateConsumer("c", "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitConsumer("c", 2, false, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	e.close()
	e2 := openEnv(t, "/data", crashed)
	st2, err := e2.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st2.Consumer("c"); err != nil || c.Position != 2 {
		t.Fatalf("after the crash: %+v %v", c, err)
	}
}

// TestConsumersDeletedWithStore: deleting a store drops its checkpoint
// rows; a store re-created under the name has no consumers; a handle to the
// deleted store refuses consumer writes.
func TestConsumersDeletedWithStore(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	if _, _, err := st.CreateConsumer("c", "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteStore("s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateConsumer("d", "first", 0, time.UnixMilli(e.now())); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("create on a deleted store: %v", err)
	}
	if _, err := st.CommitConsumer("c", 0, false, time.UnixMilli(e.now())); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("commit on a deleted store: %v", err)
	}
	p := []byte{pebblestore.PrefixEventConsumer}
	it, err := e.db.NewIter(p, pebblestore.PrefixEnd(p))
	if err != nil {
		t.Fatal(err)
	}
	if it.First() {
		t.Fatalf("a consumer row outlived its store: %x", it.Key())
	}
	_ = it.Close()
	st2 := e.store("s")
	if list, err := st2.Consumers(); err != nil || len(list) != 0 {
		t.Fatalf("consumers of the re-created store: %+v %v", list, err)
	}
	e.reopen()
	st2, err = e.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := st2.Consumers(); err != nil || len(list) != 0 {
		t.Fatalf("consumers of the re-created store after a restart: %+v %v", list, err)
	}
}

// TestConcurrentCommitsKeepHighest: commits racing from many goroutines,
// none forced: each accepted commit was at or above every one accepted
// before it, and the checkpoint ends at the highest position committed,
// in memory and after a reopen.
func TestConcurrentCommitsKeepHighest(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	evs := make([]ProposedEvent, 200)
	for i := range evs {
		evs[i] = ev("T", "1")
	}
	mustAppend(t, st, "a", Any, e.now(), evs...)
	if _, _, err := st.CreateConsumer("c", "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				pos := int64((i*8 + w*37) % 201)
				_, err := st.CommitConsumer("c", pos, false, time.UnixMilli(1_700_000_000_000))
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.Is(err, ErrCheckpointRegression):
					refused++
				default:
					t.Errorf("commit %d: %v", pos, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	highest := int64(0)
	for w := range 8 {
		for i := range 25 {
			highest = max(highest, int64((i*8+w*37)%201))
		}
	}
	c, err := st.Consumer("c")
	if err != nil || c.Position != highest {
		t.Fatalf("checkpoint %+v %v, want %d (%d accepted, %d refused)", c, err, highest, accepted, refused)
	}
	e.reopen()
	st, _ = e.svc.Store("s")
	if c, err := st.Consumer("c"); err != nil || c.Position != highest {
		t.Fatalf("checkpoint after reopen %+v %v, want %d", c, err, highest)
	}
}

// TestConsumerBelowFirstPosition: a checkpoint that records deletion
// passed still describes the old position; a read from it starts at the
// first position, truncated.
func TestConsumerBelowFirstPosition(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	for range 5 {
		mustAppend(t, st, "a", Any, e.now(), ev("T", "1"))
	}
	if _, _, err := st.CreateConsumer("c", "first", 0, time.UnixMilli(e.now())); err != nil {
		t.Fatal(err)
	}
	// Store retention does not exist yet; a DeleteRecords from before the
	// topic was owned moves the first position the same way.
	if err := e.tm.SetOwner("s", topics.OwnerNone); err != nil {
		t.Fatal(err)
	}
	if _, err := st.partition.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if err := e.tm.SetOwner("s", topics.OwnerEventStore); err != nil {
		t.Fatal(err)
	}
	c, err := st.Consumer("c")
	if err != nil || c.Position != 0 {
		t.Fatalf("describe: %+v %v", c, err)
	}
	page, err := st.ReadAll(c.Position, 10, 0, nil)
	if err != nil || !page.Truncated || len(page.Events) != 2 || page.Events[0].Position != 3 {
		t.Fatalf("read from the checkpoint: %+v %v", page, err)
	}
}
