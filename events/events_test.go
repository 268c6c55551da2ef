package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// env is one open broker store with the topics and events layers on it.
type env struct {
	t     testing.TB
	dir   string
	fs    vfs.FS
	db    *pebblestore.Store
	tm    *topics.Manager
	svc   *Service
	clock int64
}

func openEnv(t testing.TB, dir string, fs vfs.FS) *env {
	t.Helper()
	e := &env{t: t, dir: dir, fs: fs, clock: 1_700_000_000_000}
	e.open()
	t.Cleanup(func() { e.close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := pebblestore.Open(e.dir, pebblestore.Options{Logger: zerolog.Nop(), FS: e.fs, MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		e.t.Fatalf("open store: %v", err)
	}
	tm, err := topics.Open(db, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		e.t.Fatalf("open topics: %v", err)
	}
	svc, err := Open(db, tm, Config{Logger: zerolog.Nop()})
	if err != nil {
		e.t.Fatalf("open events: %v", err)
	}
	e.db, e.tm, e.svc = db, tm, svc
}

func (e *env) close() {
	if e.db != nil {
		_ = e.db.Close()
		e.db = nil
	}
}

func (e *env) reopen() {
	e.t.Helper()
	e.close()
	e.open()
}

func (e *env) now() int64 {
	e.clock += 10
	return e.clock
}

func (e *env) store(name string) *Store {
	e.t.Helper()
	st, _, err := e.svc.CreateStore(name, time.UnixMilli(e.now()))
	if err != nil {
		e.t.Fatalf("create store %s: %v", name, err)
	}
	return st
}

func ev(typ, data string) ProposedEvent { return ProposedEvent{Type: typ, Data: []byte(data)} }

func evID(id, typ string) ProposedEvent {
	return ProposedEvent{ID: id, Type: typ, Data: []byte(`{"id":"` + id + `"}`)}
}

func mustAppend(t testing.TB, st *Store, stream string, exp ExpectedRevision, now int64, evs ...ProposedEvent) AppendResult {
	t.Helper()
	res, err := st.Append(stream, exp, evs, time.UnixMilli(now))
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

func readAll(t testing.TB, st *Store) []Event {
	t.Helper()
	var out []Event
	pos := int64(0)
	for {
		page, err := st.ReadAll(pos, MaxReadLimit, 0, nil)
		if err != nil {
			t.Fatalf("read all from %d: %v", pos, err)
		}
		out = append(out, page.Events...)
		if page.NextPosition == pos || page.NextPosition >= page.HeadPosition {
			return out
		}
		pos = page.NextPosition
	}
}

// checkGapFree asserts positions 0..n-1 in order and contiguous revisions
// per stream from 0.
func checkGapFree(t testing.TB, all []Event) {
	t.Helper()
	next := map[string]int64{}
	for i, e := range all {
		if e.Position != int64(i) {
			t.Fatalf("event %d has position %d: positions are not gap-free", i, e.Position)
		}
		if e.Revision != next[e.Stream] {
			t.Fatalf("event at %d of stream %s has revision %d, want %d", e.Position, e.Stream, e.Revision, next[e.Stream])
		}
		next[e.Stream]++
	}
}

func TestAppendAndRead(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("orders")
	r1 := mustAppend(t, st, "order-1", NoStream, e.now(), ev("Placed", `{"n":1}`), ev("Paid", `{"n":2}`))
	if r1.FirstPosition != 0 || r1.LastPosition != 1 || r1.FirstRevision != 0 || r1.LastRevision != 1 {
		t.Fatalf("first append: %+v", r1)
	}
	r2 := mustAppend(t, st, "order-2", Any, e.now(), ProposedEvent{Type: "Bin", Data: []byte{0, 1, 2}, ContentType: ContentTypeBinary, Metadata: []byte(`{"user":"a"}`)})
	if r2.FirstPosition != 2 || r2.FirstRevision != 0 {
		t.Fatalf("second append: %+v", r2)
	}
	r3 := mustAppend(t, st, "order-1", AtRevision(1), e.now(), ev("Shipped", `{"n":3}`))
	if r3.FirstPosition != 3 || r3.FirstRevision != 2 {
		t.Fatalf("third append: %+v", r3)
	}

	page, err := st.ReadStream("order-1", 0, false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 3 || page.HeadRevision != 2 || page.NextRevision != 3 || !page.EndOfStream {
		t.Fatalf("forward page: %+v", page)
	}
	for i, want := range []string{"Placed", "Paid", "Shipped"} {
		got := page.Events[i]
		if got.Type != want || got.Revision != int64(i) || got.Stream != "order-1" || got.ContentType != ContentTypeJSON {
			t.Fatalf("event %d: %+v", i, got)
		}
	}
	back, err := st.ReadStream("order-1", FromEnd, true, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Events) != 2 || back.Events[0].Revision != 2 || back.Events[1].Revision != 1 || back.NextRevision != 0 || back.EndOfStream {
		t.Fatalf("backward page: %+v", back)
	}
	back, err = st.ReadStream("order-1", 0, true, 10, 0)
	if err != nil || len(back.Events) != 1 || !back.EndOfStream || back.NextRevision != -1 {
		t.Fatalf("backward from 0: %+v %v", back, err)
	}
	if _, err := st.ReadStream("nope", 0, false, 0, 0); !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}

	all := readAll(t, st)
	checkGapFree(t, all)
	if len(all) != 4 {
		t.Fatalf("read all: %d events", len(all))
	}
	bin := all[2]
	if bin.ContentType != ContentTypeBinary || string(bin.Data) != "\x00\x01\x02" || string(bin.Metadata) != `{"user":"a"}` {
		t.Fatalf("binary event: %+v", bin)
	}
	if bin.ID == "" || len(bin.ID) != 36 {
		t.Fatalf("generated id %q", bin.ID)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Timestamp < all[i-1].Timestamp {
			t.Fatalf("timestamps decrease at %d", i)
		}
	}

	filtered, err := st.ReadAll(0, 10, 0, func(s string) bool { return s == "order-2" })
	if err != nil || len(filtered.Events) != 1 || filtered.NextPosition != 4 {
		t.Fatalf("filtered read: %+v %v", filtered, err)
	}
	if _, err := st.ReadAll(5, 10, 0, nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	page2, err := st.ReadAll(4, 10, 0, nil)
	if err != nil || len(page2.Events) != 0 || page2.NextPosition != 4 {
		t.Fatalf("read at the end: %+v %v", page2, err)
	}
}

func TestExpectedRevision(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	check := func(exp ExpectedRevision, wantErr bool) {
		t.Helper()
		before := st.NextPosition()
		_, err := st.Append("a", exp, []ProposedEvent{ev("T", `1`)}, time.UnixMilli(e.now()))
		if wantErr {
			var wrong *WrongExpectedRevisionError
			if !errors.As(err, &wrong) || !errors.Is(err, ErrWrongExpectedRevision) {
				t.Fatalf("expected %s: got %v, want a wrong expected revision", exp, err)
			}
			if st.NextPosition() != before {
				t.Fatalf("a refused append wrote something")
			}
		} else if err != nil {
			t.Fatalf("expected %s: %v", exp, err)
		}
	}
	check(Exists, true)
	check(AtRevision(0), true)
	check(NoStream, false) // rev 0
	check(NoStream, true)
	check(AtRevision(1), true)
	check(AtRevision(0), false) // rev 1
	check(Exists, false)        // rev 2
	check(Any, false)           // rev 3
	_, err := st.Append("a", AtRevision(7), []ProposedEvent{ev("T", `1`)}, time.UnixMilli(e.now()))
	var wrong *WrongExpectedRevisionError
	if !errors.As(err, &wrong) || wrong.CurrentRevision != 3 || wrong.CurrentState() != "exists" {
		t.Fatalf("conflict details: %+v", err)
	}
	for _, s := range []string{"any", "no_stream", "exists", "0", "42"} {
		got, err := ParseExpectedRevision(s)
		if err != nil || got.String() != s {
			t.Fatalf("parse %q: %v %v", s, got, err)
		}
	}
	for _, s := range []string{"-1", "x", "1.5", "-2"} {
		if _, err := ParseExpectedRevision(s); !errors.Is(err, ErrInvalidExpected) {
			t.Fatalf("parse %q: %v", s, err)
		}
	}
}

func TestIdempotentAppend(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	orig := mustAppend(t, st, "a", NoStream, e.now(), evID("id-1", "T"), evID("id-2", "T"))
	mustAppend(t, st, "b", Any, e.now(), evID("id-3", "T"))

	// A retry with the same ids returns the original result, even with a
	// stale expected revision, and writes nothing.
	retry, err := st.Append("a", NoStream, []ProposedEvent{evID("id-1", "T"), evID("id-2", "T")}, time.UnixMilli(e.now()))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !retry.Idempotent || retry.FirstPosition != orig.FirstPosition || retry.LastPosition != orig.LastPosition || retry.LastRevision != 1 {
		t.Fatalf("retry result %+v, original %+v", retry, orig)
	}
	if st.NextPosition() != 3 {
		t.Fatalf("a retry wrote: next position %d", st.NextPosition())
	}
	for _, c := range []struct {
		name   string
		stream string
		evs    []ProposedEvent
		want   error
	}{
		{"partial overlap", "a", []ProposedEvent{evID("id-1", "T"), evID("id-9", "T")}, ErrIdempotencyConflict},
		{"subset", "a", []ProposedEvent{evID("id-1", "T")}, ErrIdempotencyConflict},
		{"other order", "a", []ProposedEvent{evID("id-2", "T"), evID("id-1", "T")}, ErrIdempotencyConflict},
		{"other stream", "b", []ProposedEvent{evID("id-1", "T"), evID("id-2", "T")}, ErrIdempotencyConflict},
		{"duplicate in request", "a", []ProposedEvent{evID("id-5", "T"), evID("id-5", "T")}, ErrDuplicateEventID},
	} {
		if _, err := st.Append(c.stream, Any, c.evs, time.UnixMilli(e.now())); !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if st.NextPosition() != 3 {
		t.Fatalf("refused appends wrote: next position %d", st.NextPosition())
	}
	// Ids survive a restart.
	e.reopen()
	st, _ = e.svc.Store("s")
	retry, err = st.Append("a", Any, []ProposedEvent{evID("id-1", "T"), evID("id-2", "T")}, time.UnixMilli(e.now()))
	if err != nil || !retry.Idempotent || retry.FirstPosition != 0 {
		t.Fatalf("retry after restart: %+v %v", retry, err)
	}
}

func TestValidation(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	big := make([]byte, DefaultMaxEventBytes+1)
	for i := range big {
		big[i] = 'a'
	}
	bigJSON := append(append([]byte{'"'}, big[:len(big)-2]...), '"')
	_ = bigJSON
	for _, c := range []struct {
		name   string
		stream string
		evs    []ProposedEvent
		want   error
	}{
		{"empty stream", "", []ProposedEvent{ev("T", "1")}, ErrInvalidStream},
		{"dollar stream", "$all", []ProposedEvent{ev("T", "1")}, ErrInvalidStream},
		{"control char", "a\nb", []ProposedEvent{ev("T", "1")}, ErrInvalidStream},
		{"no events", "a", nil, ErrOutOfRange},
		{"no type", "a", []ProposedEvent{ev("", "1")}, ErrInvalidType},
		{"bad json", "a", []ProposedEvent{ev("T", "{")}, ErrOutOfRange},
		{"bad id", "a", []ProposedEvent{{ID: "a b", Type: "T", Data: []byte("1")}}, ErrInvalidEventID},
		{"bad metadata", "a", []ProposedEvent{{Type: "T", Data: []byte("1"), Metadata: []byte("{")}}, ErrInvalidMetadata},
		{"too large", "a", []ProposedEvent{{Type: "T", Data: big, ContentType: ContentTypeBinary}}, ErrEventTooLarge},
	} {
		if _, err := st.Append(c.stream, Any, c.evs, time.UnixMilli(e.now())); !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	many := make([]ProposedEvent, DefaultMaxAppendEvents+1)
	for i := range many {
		many[i] = ev("T", "1")
	}
	if _, err := st.Append("a", Any, many, time.UnixMilli(e.now())); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("too many events: %v", err)
	}
	nine := make([]ProposedEvent, 9)
	for i := range nine {
		nine[i] = ProposedEvent{Type: "T", Data: big[:DefaultMaxEventBytes], ContentType: ContentTypeBinary}
	}
	if _, err := st.Append("a", Any, nine, time.UnixMilli(e.now())); !errors.Is(err, ErrAppendTooLarge) {
		t.Fatalf("append too large: %v", err)
	}
	if st.NextPosition() != 0 {
		t.Fatalf("refused appends wrote")
	}
	// The largest allowed append fits the topic's max.message.bytes.
	eight := nine[:8]
	eight[0].Data = big[:DefaultMaxEventBytes-MaxMetadataBytes]
	eight[0].Metadata = []byte(`"` + string(big[:MaxMetadataBytes-2]) + `"`)
	if _, err := st.Append("a", Any, eight, time.UnixMilli(e.now())); err != nil {
		t.Fatalf("largest append: %v", err)
	}
}

func TestStoreCatalog(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	if _, err := e.tm.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.CreateStore("plain", time.UnixMilli(e.now())); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("store over a topic: %v", err)
	}
	for _, bad := range []string{"", "a/b", "..", "__x"} {
		if _, _, err := e.svc.CreateStore(bad, time.UnixMilli(e.now())); err == nil {
			t.Fatalf("store %q was accepted", bad)
		}
	}
	a := e.store("a")
	if again, created, err := e.svc.CreateStore("a", time.UnixMilli(e.now())); err != nil || created || again != a {
		t.Fatalf("second create: %v %v", created, err)
	}
	b := e.store("b")
	mustAppend(t, a, "x", Any, e.now(), ev("T", "1"))
	mustAppend(t, b, "x", Any, e.now(), ev("T", "2"), ev("T", "3"))
	if got := e.svc.Stats(); got.Stores != 2 || got.Events != 3 || got.Streams != 2 {
		t.Fatalf("stats %+v", got)
	}
	if err := e.svc.DeleteStore("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Store("a"); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("deleted store: %v", err)
	}
	if _, ok := e.tm.Topic("a"); ok {
		t.Fatalf("the deleted store's topic is still there")
	}
	if _, err := a.Append("x", Any, []ProposedEvent{ev("T", "1")}, time.UnixMilli(e.now())); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("append to a deleted store: %v", err)
	}
	// A new store of the same name starts empty, with a new id.
	a2 := e.store("a")
	if a2.id == a.id || a2.NextPosition() != 0 {
		t.Fatalf("recreated store: id %d (old %d), next %d", a2.id, a.id, a2.NextPosition())
	}
	if _, err := a2.ReadStream("x", 0, false, 0, 0); !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("recreated store kept the old index: %v", err)
	}
	e.reopen()
	if got := len(e.svc.Stores()); got != 2 {
		t.Fatalf("%d stores after restart", got)
	}
	// A Kafka client cannot delete a store's topic (the store owns it)...
	if tp, ok := e.tm.Topic("b"); !ok || tp.Owner() != topics.OwnerEventStore {
		t.Fatalf("store topic owner: %v", tp.Owner())
	}
	if err := e.tm.DeleteTopic("b"); !errors.Is(err, topics.ErrTopicOwned) {
		t.Fatalf("client delete of a store's topic: %v", err)
	}
	// ...but a broker before owners let it: such a store is dropped at boot.
	if err := e.tm.DeleteOwnedTopic("b", topics.OwnerEventStore); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Store("b"); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("store without topic: %v", err)
	}
	e.reopen()
	if _, err := e.svc.Store("b"); !errors.Is(err, ErrStoreNotFound) {
		t.Fatalf("store without topic after restart: %v", err)
	}
	if _, err := e.svc.Store("a"); err != nil {
		t.Fatal(err)
	}
}

func TestRestartKeepsEvents(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	for i := range 20 {
		mustAppend(t, st, "stream-"+strconv.Itoa(i%3), Any, e.now(), ev("T", strconv.Itoa(i)))
	}
	before := readAll(t, st)
	e.reopen()
	st, err := e.svc.Store("s")
	if err != nil {
		t.Fatal(err)
	}
	after := readAll(t, st)
	if len(after) != len(before) {
		t.Fatalf("%d events before restart, %d after", len(before), len(after))
	}
	// Appends continue positions and revisions, and timestamps never go
	// back even when the clock does.
	res := mustAppend(t, st, "stream-0", AtRevision(6), e.clock-100000, ev("T", `"x"`))
	if res.FirstPosition != 20 || res.FirstRevision != 7 {
		t.Fatalf("append after restart: %+v", res)
	}
	all := readAll(t, st)
	checkGapFree(t, all)
	if all[20].Timestamp < all[19].Timestamp {
		t.Fatalf("timestamp went back after restart")
	}
	// New streams get new IDs after a restart.
	mustAppend(t, st, "fresh", NoStream, e.now(), ev("T", "1"))
	if p, err := st.ReadStream("fresh", 0, false, 0, 0); err != nil || len(p.Events) != 1 {
		t.Fatalf("fresh stream: %+v %v", p, err)
	}
	if p, err := st.ReadStream("stream-1", 0, false, 0, 0); err != nil || len(p.Events) != 7 {
		t.Fatalf("old stream: %d events %v", len(p.Events), err)
	}
}

// TestConcurrentExpectedRevision: K writers race for each revision of one
// stream; exactly one wins each round, the rest get a wrong expected
// revision, and positions stay gap-free.
func TestConcurrentExpectedRevision(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	const writers, rounds = 8, 40
	var mu sync.Mutex
	winners := make(map[int64]int)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range int64(rounds) {
				exp := AtRevision(r - 1)
				if r == 0 {
					exp = NoStream
				}
				res, err := st.Append("race", exp, []ProposedEvent{ev("T", fmt.Sprintf(`{"w":%d,"r":%d}`, w, r))}, time.UnixMilli(1_700_000_000_000+r))
				if err == nil {
					if res.FirstRevision != r {
						t.Errorf("writer %d won round %d with revision %d", w, r, res.FirstRevision)
					}
					mu.Lock()
					winners[r]++
					mu.Unlock()
					continue
				}
				if !errors.Is(err, ErrWrongExpectedRevision) {
					t.Errorf("writer %d round %d: %v", w, r, err)
					return
				}
				// Wait until someone won this round before the next.
				for {
					p, err := st.ReadStream("race", FromEnd, true, 1, 0)
					if err == nil && p.HeadRevision >= r {
						break
					}
				}
			}
		}()
	}
	// Unrelated appenders share the log.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rounds {
			if _, err := st.Append("other", Any, []ProposedEvent{ev("T", strconv.Itoa(i))}, time.UnixMilli(1_700_000_000_000)); err != nil {
				t.Errorf("other: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	for r := range int64(rounds) {
		if winners[r] != 1 {
			t.Fatalf("round %d had %d winners", r, winners[r])
		}
	}
	all := readAll(t, st)
	if len(all) != 2*rounds {
		t.Fatalf("%d events, want %d", len(all), 2*rounds)
	}
	checkGapFree(t, all)
}

// TestConcurrentIdempotentRetries: the same append retried concurrently is
// written once; every caller gets the same positions.
func TestConcurrentIdempotentRetries(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	const callers = 8
	results := make([]AppendResult, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := st.Append("a", NoStream, []ProposedEvent{evID("x-1", "T"), evID("x-2", "T")}, time.UnixMilli(e.clock))
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	fresh := 0
	for _, r := range results {
		if r.FirstPosition != 0 || r.LastPosition != 1 {
			t.Fatalf("result %+v", r)
		}
		if !r.Idempotent {
			fresh++
		}
	}
	if fresh != 1 || st.NextPosition() != 2 {
		t.Fatalf("%d fresh appends, next position %d", fresh, st.NextPosition())
	}
}

// TestCrashKeepsAcknowledgedAppends: appenders run while the filesystem is
// crash-cloned (only synced data survives). Every append acknowledged
// before the clone is in the clone with its positions, positions are
// gap-free, and appends continue after the crash.
func TestCrashKeepsAcknowledgedAppends(t *testing.T) {
	for cycle := range 3 {
		t.Run(strconv.Itoa(cycle), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			e := openEnv(t, "/data", mem)
			st := e.store("s")
			type ack struct {
				stream string
				res    AppendResult
			}
			var mu sync.Mutex
			var acked []ack
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					stream := "w" + strconv.Itoa(w)
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						res, err := st.Append(stream, Any, []ProposedEvent{evID(fmt.Sprintf("%s-%d", stream, i), "T"), ev("T", "2")}, time.UnixMilli(1_700_000_000_000))
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						mu.Lock()
						acked = append(acked, ack{stream, res})
						mu.Unlock()
					}
				}()
			}
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 30*(cycle+1) {
					break
				}
			}
			mu.Lock()
			durable := append([]ack(nil), acked...)
			mu.Unlock()
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			close(stop)
			wg.Wait()
			e.close()

			e2 := openEnv(t, "/data", crashed)
			st2, err := e2.svc.Store("s")
			if err != nil {
				t.Fatal(err)
			}
			all := readAll(t, st2)
			checkGapFree(t, all)
			for _, a := range durable {
				for pos := a.res.FirstPosition; pos <= a.res.LastPosition; pos++ {
					if pos >= int64(len(all)) {
						t.Fatalf("acknowledged position %d lost (%d events after the crash)", pos, len(all))
					}
					got := all[pos]
					if got.Stream != a.stream || got.Revision != a.res.FirstRevision+(pos-a.res.FirstPosition) {
						t.Fatalf("position %d: %+v, acknowledged as %s rev %d", pos, got, a.stream, a.res.FirstRevision)
					}
				}
				if p, err := st2.ReadStream(a.stream, a.res.FirstRevision, false, 2, 0); err != nil || len(p.Events) != 2 || p.Events[0].Position != a.res.FirstPosition {
					t.Fatalf("stream index lost %s rev %d: %+v %v", a.stream, a.res.FirstRevision, p, err)
				}
			}
			next := st2.NextPosition()
			res := mustAppend(t, st2, "w0", Any, 1_700_000_000_000, ev("T", `"after"`))
			if res.FirstPosition != next {
				t.Fatalf("append after crash at %d, want %d", res.FirstPosition, next)
			}
			checkGapFree(t, readAll(t, st2))
		})
	}
}

func TestPositionAt(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("s")
	base := int64(1_700_000_000_000)
	times := []int64{base, base + 1, base + 500, base + 1500, base + 1600, base + 5000}
	for i, ts := range times {
		mustAppend(t, st, "a", Any, ts, ev("T", strconv.Itoa(i)))
	}
	for _, c := range []struct{ ts, want int64 }{
		{0, 0}, {base, 0}, {base + 1, 1}, {base + 2, 2}, {base + 999, 3}, {base + 1500, 3},
		{base + 1501, 4}, {base + 3000, 5}, {base + 5000, 5}, {base + 5001, 6}, {base + 999999, 6},
	} {
		got, err := st.PositionAt(c.ts)
		if err != nil || got != c.want {
			t.Fatalf("PositionAt(base+%d) = %d, %v; want %d", c.ts-base, got, err, c.want)
		}
	}
}

// TestReadAllPageCutByMaxBytes pins a hang: a ReadAll page cut by maxBytes
// with events left below the head re-read the same batch forever (the
// loop only stopped at the limit or the head), so an SSE tail that fell
// behind, or a read with a small max_bytes, spun at full CPU, ignored
// shutdown and held the store open. The read must return the page.
func TestReadAllPageCutByMaxBytes(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("feed")
	data := `"` + strings.Repeat("x", 600) + `"`
	mustAppend(t, st, "s", ExpectedRevision{}, e.now(), ev("a", data), ev("a", data), ev("a", data))
	mustAppend(t, st, "s", ExpectedRevision{}, e.now(), ev("a", data), ev("a", data))
	type result struct {
		page AllPage
		err  error
	}
	got := make(chan result, 1)
	go func() {
		page, err := st.ReadAll(0, MaxReadLimit, 1024, nil)
		got <- result{page, err}
	}()
	var res result
	select {
	case res = <-got:
	case <-time.After(time.Minute): // a hang detector, not a timing goal
		t.Fatal("ReadAll(0, limit, maxBytes 1024) did not return: it loops on a page cut by maxBytes")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	// The second event passes 1024 bytes: the page ends after it.
	if len(res.page.Events) != 2 || res.page.NextPosition != 2 {
		t.Fatalf("page: %d events, next position %d; want 2 and 2", len(res.page.Events), res.page.NextPosition)
	}
	// Reading on from there reaches every event, across the batches.
	var all []Event
	for pos := int64(0); pos < st.NextPosition(); {
		page, err := st.ReadAll(pos, MaxReadLimit, 1024, nil)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Events...)
		pos = page.NextPosition
	}
	checkGapFree(t, all)
	if len(all) != 5 {
		t.Fatalf("read %d events, want 5", len(all))
	}
}
