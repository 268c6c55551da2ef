package events

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func wantWrongExpected(t *testing.T, what string, err error, state string) {
	t.Helper()
	var wrong *WrongExpectedRevisionError
	if !errors.As(err, &wrong) || wrong.CurrentState() != state {
		t.Fatalf("%s: %v, want wrong expected revision with state %s", what, err, state)
	}
}

func revisions(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Revision
	}
	return out
}

// TestSoftDeleteStream: a soft delete hides the stream from stream reads;
// no_stream and any start it again with revisions continuing; exists and
// a revision do not match a deleted stream; the store's positions stay
// gap-free and keep the deleted events; an idempotent retry of an append
// made before the delete still gets its original result; the state
// survives a restart.
func TestSoftDeleteStream(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("bank")
	first := mustAppend(t, st, "acct", NoStream, e.now(), evID("open-1", "Opened"), evID("dep-1", "Deposited"), evID("dep-2", "Deposited"))
	mustAppend(t, st, "other", NoStream, e.now(), ev("Opened", "1"))

	if _, err := st.DeleteStream("acct", AtRevision(1), false); err == nil {
		t.Fatal("delete expecting a stale revision succeeded")
	} else {
		wantWrongExpected(t, "delete at a stale revision", err, "exists")
	}
	if _, err := st.DeleteStream("acct", NoStream, false); !errors.Is(err, ErrInvalidExpected) {
		t.Fatalf("delete expecting no_stream: %v", err)
	}
	if _, err := st.DeleteStream("nope", Any, false); !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("delete of an unknown stream: %v", err)
	}
	if _, err := st.DeleteStream("$system", Any, false); !errors.Is(err, ErrInvalidStream) {
		t.Fatalf("delete of an invalid stream name: %v", err)
	}
	if page, err := st.ReadStream("acct", 0, false, 0, 0); err != nil || len(page.Events) != 3 {
		t.Fatalf("refused deletes changed the stream: %v %+v", err, page)
	}

	info, err := st.DeleteStream("acct", AtRevision(2), false)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StreamStateDeleted || info.HeadRevision != 2 || info.FirstRevision != 3 || info.DeletedAtRevision() != 2 {
		t.Fatalf("delete answered %+v", info)
	}
	if _, err := st.ReadStream("acct", 0, false, 0, 0); !errors.Is(err, ErrStreamNotFound) || !errors.Is(err, ErrStreamDeleted) {
		t.Fatalf("read of a deleted stream: %v", err)
	}
	if got, err := st.Stream("acct"); err != nil || got != info {
		t.Fatalf("describe a deleted stream: %+v %v, want %+v", got, err, info)
	}
	if again, err := st.DeleteStream("acct", Any, false); err != nil || again != info {
		t.Fatalf("second soft delete: %+v %v", again, err)
	}
	_, err = st.DeleteStream("acct", Exists, false)
	wantWrongExpected(t, "delete expecting exists of a deleted stream", err, StreamStateDeleted)
	_, err = st.Append("acct", Exists, []ProposedEvent{ev("T", "1")}, time.UnixMilli(e.now()))
	wantWrongExpected(t, "append expecting exists to a deleted stream", err, StreamStateDeleted)
	_, err = st.Append("acct", AtRevision(2), []ProposedEvent{ev("T", "1")}, time.UnixMilli(e.now()))
	wantWrongExpected(t, "append expecting the last revision to a deleted stream", err, StreamStateDeleted)

	retry, err := st.Append("acct", Exists, []ProposedEvent{evID("open-1", "Opened"), evID("dep-1", "Deposited"), evID("dep-2", "Deposited")}, time.UnixMilli(e.now()))
	if err != nil || !retry.Idempotent || retry.FirstPosition != first.FirstPosition || retry.LastRevision != 2 {
		t.Fatalf("idempotent retry after the delete: %+v %v, original %+v", retry, err, first)
	}

	again := mustAppend(t, st, "acct", NoStream, e.now(), ev("Reopened", "1"))
	if again.FirstRevision != 3 {
		t.Fatalf("recreated stream starts at revision %d, want 3", again.FirstRevision)
	}
	mustAppend(t, st, "acct", Any, e.now(), ev("Deposited", "9"))
	mustAppend(t, st, "acct", AtRevision(4), e.now(), ev("Deposited", "1"))
	page, err := st.ReadStream("acct", 0, false, 0, 0)
	if err != nil || len(page.Events) != 3 || page.Events[0].Revision != 3 || page.HeadRevision != 5 || !page.EndOfStream {
		t.Fatalf("forward read of the recreated stream: %v %+v", err, page)
	}
	page, err = st.ReadStream("acct", FromEnd, true, 0, 0)
	if err != nil || len(page.Events) != 3 || page.Events[2].Revision != 3 || !page.EndOfStream {
		t.Fatalf("backward read of the recreated stream: %v revisions %v %+v", err, revisions(page.Events), page)
	}
	if page, err = st.ReadStream("acct", 1, true, 0, 0); err != nil || len(page.Events) != 0 || !page.EndOfStream {
		t.Fatalf("backward read from a deleted revision: %v %+v", err, page)
	}
	if got, err := st.Stream("acct"); err != nil || got.State != StreamStateLive || got.FirstRevision != 3 || got.HeadRevision != 5 || got.HeadPosition < 0 {
		t.Fatalf("describe the recreated stream: %+v %v", got, err)
	}

	all := readAll(t, st)
	checkGapFree(t, all) // the deleted events stay in the log, revisions continue
	if len(all) != 7 {
		t.Fatalf("%d events in the store, want 7", len(all))
	}

	if _, err := st.DeleteStream("other", Exists, false); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	st, err = e.svc.Store("bank")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReadStream("other", 0, false, 0, 0); !errors.Is(err, ErrStreamDeleted) {
		t.Fatalf("deleted stream after restart: %v", err)
	}
	if res := mustAppend(t, st, "other", NoStream, e.now(), ev("Opened", "2")); res.FirstRevision != 1 {
		t.Fatalf("recreate after restart: %+v", res)
	}
	if page, err := st.ReadStream("acct", 0, false, 0, 0); err != nil || len(page.Events) != 3 || page.Events[0].Revision != 3 {
		t.Fatalf("recreated stream after restart: %v %+v", err, page)
	}
	checkGapFree(t, readAll(t, st))
}

// TestHardDeleteStream: a tombstoned stream reads as not found, takes no
// more appends (whatever the expectation) and no more deletes, also after
// a restart; a soft-deleted stream can be tombstoned.
func TestHardDeleteStream(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("bank")
	mustAppend(t, st, "gone", NoStream, e.now(), ev("Opened", "1"), ev("Closed", "2"))
	mustAppend(t, st, "soft", NoStream, e.now(), ev("Opened", "1"))
	if _, err := st.DeleteStream("soft", Any, false); err != nil {
		t.Fatal(err)
	}
	info, err := st.DeleteStream("gone", AtRevision(1), true)
	if err != nil || info.State != StreamStateTombstoned || info.DeletedAtRevision() != 1 {
		t.Fatalf("hard delete: %+v %v", info, err)
	}
	if info, err := st.DeleteStream("soft", Any, true); err != nil || info.State != StreamStateTombstoned || info.DeletedAtRevision() != 0 {
		t.Fatalf("hard delete of a soft-deleted stream: %+v %v", info, err)
	}
	check := func() {
		t.Helper()
		for _, stream := range []string{"gone", "soft"} {
			if _, err := st.ReadStream(stream, 0, false, 0, 0); !errors.Is(err, ErrStreamNotFound) || !errors.Is(err, ErrStreamTombstoned) {
				t.Fatalf("read of tombstoned %s: %v", stream, err)
			}
			for _, exp := range []ExpectedRevision{Any, NoStream, Exists, AtRevision(1)} {
				if _, err := st.Append(stream, exp, []ProposedEvent{ev("T", "1")}, time.UnixMilli(e.now())); !errors.Is(err, ErrStreamTombstoned) || errors.Is(err, ErrStreamNotFound) {
					t.Fatalf("append %s to tombstoned %s: %v", exp, stream, err)
				}
			}
			for _, hard := range []bool{false, true} {
				if _, err := st.DeleteStream(stream, Any, hard); !errors.Is(err, ErrStreamTombstoned) {
					t.Fatalf("delete (hard %v) of tombstoned %s: %v", hard, stream, err)
				}
			}
			if got, err := st.Stream(stream); err != nil || got.State != StreamStateTombstoned {
				t.Fatalf("describe tombstoned %s: %+v %v", stream, got, err)
			}
		}
	}
	check()
	e.reopen()
	if st, err = e.svc.Store("bank"); err != nil {
		t.Fatal(err)
	}
	check()
	all := readAll(t, st)
	checkGapFree(t, all)
	if len(all) != 3 {
		t.Fatalf("%d events in the log, want the 3 appended", len(all))
	}
}

// TestDeleteStreamSurvivesCrash: a delete is durable when DeleteStream
// returns (crash clone with no unsynced data), and so is every append it
// covers.
func TestDeleteStreamSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	e := openEnv(t, "/data", mem)
	st := e.store("s")
	mustAppend(t, st, "a", NoStream, e.now(), ev("T", "1"))
	mustAppend(t, st, "b", NoStream, e.now(), ev("T", "1"))
	if _, err := st.DeleteStream("a", Any, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteStream("b", Any, true); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	e.close()
	e2 := openEnv(t, "/data", crashed)
	st2, err := e2.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st2.Stream("a"); err != nil || got.State != StreamStateDeleted {
		t.Fatalf("soft delete after a crash: %+v %v", got, err)
	}
	if got, err := st2.Stream("b"); err != nil || got.State != StreamStateTombstoned {
		t.Fatalf("hard delete after a crash: %+v %v", got, err)
	}
}

// TestStreamHeadRowVersions: a stream never deleted keeps the v1 head row
// (readable by brokers before stream deletion); deleted and recreated
// streams use v2, which round-trips; malformed v2 rows are corruption.
func TestStreamHeadRowVersions(t *testing.T) {
	key := []byte("k")
	for _, h := range []streamHead{
		{LastRevision: 4, LastPosition: 9, Name: "live"},
		{LastRevision: 4, LastPosition: 9, State: streamDeleted, TruncateBefore: 5, Name: "deleted"},
		{LastRevision: 6, LastPosition: 12, State: streamLive, TruncateBefore: 5, Name: "recreated"},
		{LastRevision: 6, LastPosition: 12, State: streamTombstoned, TruncateBefore: 7, Name: "tombstoned"},
	} {
		raw := h.encode()
		wantVersion := byte(2)
		if h.State == streamLive && h.TruncateBefore == 0 {
			wantVersion = 1
		}
		if raw[0] != wantVersion {
			t.Errorf("%s: row version %d, want %d", h.Name, raw[0], wantVersion)
		}
		got, err := decodeStreamHead(raw, key)
		if err != nil || got != h {
			t.Errorf("%s: round trip %+v %v", h.Name, got, err)
		}
	}
	v2 := streamHead{LastRevision: 1, State: streamDeleted, TruncateBefore: 2, Name: "x"}.encode()
	unknownState := append([]byte{}, v2...)
	unknownState[17] = 9
	tooFar := append([]byte{}, v2...)
	tooFar[25] = 9 // truncateBefore 9 > lastRevision + 1
	bad := [][]byte{
		append([]byte{3}, v2[1:]...), // unknown version
		v2[:20],                      // truncated
		unknownState,
		tooFar,
	}
	for i, raw := range bad {
		if _, err := decodeStreamHead(raw, key); err == nil {
			t.Errorf("malformed row %d decoded", i)
		}
	}
}

// syncGateFS holds every sync of the WAL (*.log) while closed, so a test
// can see what a caller is told before its write is durable.
type syncGateFS struct {
	vfs.FS
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (fs *syncGateFS) close() {
	fs.mu.Lock()
	fs.gate = make(chan struct{})
	fs.mu.Unlock()
}

func (fs *syncGateFS) open() {
	fs.mu.Lock()
	if fs.gate != nil {
		close(fs.gate)
		fs.gate = nil
	}
	fs.mu.Unlock()
}

func (fs *syncGateFS) wait() {
	fs.mu.Lock()
	g := fs.gate
	fs.mu.Unlock()
	if g != nil {
		<-g
	}
}

func (fs *syncGateFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, fs: fs}, nil
}

func (fs *syncGateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *syncGateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type gatedFile struct {
	vfs.File
	fs *syncGateFS
}

func (f *gatedFile) Sync() error     { f.fs.wait(); return f.File.Sync() }
func (f *gatedFile) SyncData() error { f.fs.wait(); return f.File.SyncData() }
func (f *gatedFile) SyncTo(length int64) (bool, error) {
	f.fs.wait()
	return f.File.SyncTo(length)
}

// TestDeleteAgainWaitsForTheFirstDelete pins a bug: a delete that found
// the stream deleted already answered at once, while the first delete was
// applied but not yet synced; a crash then brought the stream back though
// the second caller had been told it was deleted.
func TestDeleteAgainWaitsForTheFirstDelete(t *testing.T) {
	mem := vfs.NewCrashableMem()
	gate := &syncGateFS{FS: mem}
	e := openEnv(t, "/data", gate)
	st := e.store("s")
	mustAppend(t, st, "a", NoStream, e.now(), ev("T", "1"))

	gate.close()
	first := make(chan error, 1)
	go func() { _, err := st.DeleteStream("a", Any, false); first <- err }()
	for {
		if info, err := st.Stream("a"); err == nil && info.State == StreamStateDeleted {
			break // applied, not synced
		}
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() { _, err := st.DeleteStream("a", Any, false); second <- err }()
	var crashed *vfs.MemFS
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
		crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		gate.open()
	case <-time.After(200 * time.Millisecond):
		gate.open()
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	e.close()
	e2 := openEnv(t, "/data", crashed)
	st2, err := e2.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st2.Stream("a"); err != nil || got.State != StreamStateDeleted {
		t.Fatalf("after a crash, a delete that was answered: %+v %v", got, err)
	}
}

// TestStoreDeletionDoesNotBlockLookups: deleting a store syncs several
// writes; lookups of other stores (every append and read starts with one)
// must not wait for those syncs (STYLE: never hold a mutex across a Pebble
// sync). Before, DeleteStore held the service's mutex throughout.
func TestStoreDeletionDoesNotBlockLookups(t *testing.T) {
	gate := &syncGateFS{FS: vfs.NewMem()}
	e := openEnv(t, "/data", gate)
	for _, name := range []string{"a", "b"} {
		mustAppend(t, e.store(name), "s", NoStream, e.now(), ev("T", "1"))
	}
	gate.close()
	deleted := make(chan error, 1)
	go func() { deleted <- e.svc.DeleteStore("a") }()
	looked := make(chan error, 1)
	go func() {
		for {
			if _, err := e.svc.Store("a"); err != nil {
				break // the deletion has started and is waiting on its sync
			}
			time.Sleep(time.Millisecond)
		}
		_, err := e.svc.Store("b")
		looked <- err
	}()
	select {
	case err := <-looked:
		if err != nil {
			t.Fatalf("store b during the deletion of a: %v", err)
		}
	case <-time.After(10 * time.Second):
		gate.open()
		t.Fatal("a lookup waited for another store's deletion to sync")
	}
	select {
	case <-deleted:
		t.Fatal("the deletion finished with its syncs held")
	default:
	}
	gate.open()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Store("a"); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("store a after its deletion: %v", err)
	}
}
