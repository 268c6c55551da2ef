package cluster

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// logStartLog applies entries to a PartitionLog of group 1 on a real
// store, writing each entry's row first as the Host would have.
type logStartLog struct {
	t     *testing.T
	store *pebblestore.Store
	l     *PartitionLog
	index uint64
}

func newLogStartLog(t *testing.T) *logStartLog {
	store := openTestStore(t)
	return &logStartLog{t: t, store: store, l: NewPartitionLog(store, 1, nil)}
}

// apply applies data as the next entry (term 1) and returns its result.
func (s *logStartLog) apply(data []byte) (int64, error) {
	s.index++
	return applyAt(s.t, s.store, s.l, s.index, data)
}

func applyAt(t *testing.T, store *pebblestore.Store, l *PartitionLog, index uint64, data []byte) (int64, error) {
	t.Helper()
	b := store.NewBatch()
	if err := setProto(b, pebblestore.RaftEntryKey(1, index), &raftpb.Entry{Index: new(index), Term: new(uint64(1)), Data: append(make([]byte, 16), data...)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Apply(Entry{Index: index, Term: 1, Data: data})
	return int64(r), err
}

// openTestStore opens a store in a temp dir, closed when the test ends.
func openTestStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// storedEntry is the data (the batch or command, without the 16-byte
// proposal header) of group 1's Raft entry at index i as store holds it:
// what a replica replaying its log applies.
func storedEntry(t *testing.T, store *pebblestore.Store, i uint64) []byte {
	t.Helper()
	v, err := store.Get(pebblestore.RaftEntryKey(1, i))
	if err != nil {
		t.Fatal(err)
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		t.Fatal(err)
	}
	return e.GetData()[16:]
}

func (s *logStartLog) must(data []byte, want int64) {
	s.t.Helper()
	if got, err := s.apply(data); err != nil || got != want {
		s.t.Fatalf("entry %d: result %d %v, want %d", s.index, got, err, want)
	}
}

// readBase is the base offset of the batch a fetch at offset returns.
func readBase(t *testing.T, l *PartitionLog, offset int64) int64 {
	t.Helper()
	b, err := l.Read(offset)
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	return int64(binary.BigEndian.Uint64(b))
}

// TestPartitionLogStartCommand: a log-start command raises the log start
// (never lowers it), drops the index entries of the batches wholly below
// it and keeps a straddling one, reads below it are out of range,
// timestamp lookups never answer below it; an offset above the log end
// and an unknown version are refused and change nothing.
func TestPartitionLogStartCommand(t *testing.T) {
	s := newLogStartLog(t)
	s.must(idempotentBatch(7, 0, 0, 3, 10), 0) // 0-2
	s.must(idempotentBatch(7, 0, 3, 2, 20), 3) // 3-4
	s.must(idempotentBatch(7, 0, 5, 4, 30), 5) // 5-8
	s.must(LogStartCommand(4, 0), 4)           // inside the batch 3-4
	if got := s.l.LogStart(); got != 4 {
		t.Fatalf("log start %d, want 4", got)
	}
	for _, off := range []int64{0, 2, 3} {
		if _, err := s.l.Read(off); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read %d below the log start: %v, want out of range", off, err)
		}
	}
	if got := readBase(t, s.l, 4); got != 3 {
		t.Fatalf("read 4: the batch at %d, want the straddling batch at 3", got)
	}
	if off, ts := s.l.OffsetForTimestamp(0); off != 4 || ts != 20 {
		t.Fatalf("offset for timestamp 0: %d (ts %d), want 4 (20)", off, ts)
	}
	batches, hw, start := s.l.RetentionView()
	if len(batches) != 2 || batches[0].Base != 3 || hw != 9 || start != 4 {
		t.Fatalf("retention view %+v hw %d start %d, want the batches at 3 and 5, 9, 4", batches, hw, start)
	}
	s.must(LogStartCommand(2, 0), 4) // never lowered
	if _, err := s.apply(LogStartCommand(10, 0)); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a log start above the log end: %v, want out of range", err)
	}
	bad := LogStartCommand(5, 0)
	bad[8] = 2
	if _, err := s.apply(bad); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("version 2: %v, want ErrInvalidCommand", err)
	}
	if got := s.l.LogStart(); got != 4 || s.l.HighWatermark() != 9 {
		t.Fatalf("refused commands moved the log to [%d, %d)", got, s.l.HighWatermark())
	}
	s.must(idempotentBatch(7, 0, 9, 1, 40), 9) // offsets go on
	s.must(LogStartCommand(10, 0), 10)         // everything: the log is empty
	if got, err := s.l.ReadRange(10, 1<<20, true, nil); err != nil || len(got) != 0 {
		t.Fatalf("read at the end of an emptied log: %d bytes, %v", len(got), err)
	}
	if off, _ := s.l.MaxTimestamp(); off != -1 {
		t.Fatalf("max timestamp of an emptied log at %d, want -1", off)
	}
}

// TestPartitionLogCompactionPoint: the log may be compacted only up to a
// command that moved the log start (its state row), below the first
// batch kept and not above what every voter matched; a PartitionLog
// restored from that row and given the entries after it reaches the same
// state as the one that applied everything (same offsets, log start and
// producer decisions: a sequence that follows, a duplicate).
func TestPartitionLogCompactionPoint(t *testing.T) {
	s := newLogStartLog(t)
	s.must(idempotentBatch(7, 0, 0, 3, 10), 0) // 1: 0-2
	s.must(idempotentBatch(7, 0, 3, 2, 20), 3) // 2: 3-4
	s.must(LogStartCommand(3, 100), 3)         // 3: row; the batch at 2 is kept
	if got := s.l.CompactTo(); got != 0 {
		t.Fatalf("compact to %d while the batch at index 2 is kept, want 0", got)
	}
	s.must(idempotentBatch(7, 0, 5, 4, 30), 5) // 4: 5-8
	if s.l.CompactionPending(100) {
		t.Fatal("a compaction pending while the batch at index 2 is kept")
	}
	s.must(LogStartCommand(6, 3), 6) // 5: drops index 2's batch, matched 3
	if got := s.l.CompactTo(); got != 3 {
		t.Fatalf("compact to %d, want 3 (the first row, below the batch kept at 4)", got)
	}
	if s.l.CompactionPending(100) {
		t.Fatal("a compaction pending: the row at 5 is above the batch kept at 4")
	}
	s.must(idempotentBatch(7, 0, 9, 1, 40), 9) // 6: 9
	s.must(LogStartCommand(6, 4), 6)           // 7: nothing moves, no row; matched 4
	if got := s.l.CompactTo(); got != 3 {
		t.Fatalf("compact to %d, want still 3", got)
	}
	s.must(LogStartCommand(9, 5), 9) // 8: row; the kept batch is at 6, matched 5
	if got := s.l.CompactTo(); got != 5 {
		t.Fatalf("compact to %d, want 5", got)
	}

	// A replica whose log was compacted to 5 restores the row and replays
	// 6..8; then both take the same entries.
	r := NewPartitionLog(s.store, 1, nil)
	if err := r.RestoreAt(5); err != nil {
		t.Fatal(err)
	}
	for i := uint64(6); i <= s.index; i++ {
		_, _ = r.Apply(Entry{Index: i, Term: 1, Data: storedEntry(t, s.store, i)})
	}
	for _, l := range []*PartitionLog{s.l, r} {
		if l.LogStart() != 9 || l.HighWatermark() != 10 {
			t.Fatalf("log [%d, %d), want [9, 10)", l.LogStart(), l.HighWatermark())
		}
	}
	next := s.index + 1
	for _, step := range []struct {
		batch []byte
		want  int64
	}{
		{idempotentBatch(7, 0, 10, 2, 50), 10}, // follows the producer's last batch
		{idempotentBatch(7, 0, 9, 1, 40), 9},   // a duplicate: its original offset
		{idempotentBatch(7, 0, 5, 4, 30), 5},   // a duplicate below the log start
	} {
		for _, l := range []*PartitionLog{s.l, r} {
			if got, err := applyAt(t, s.store, l, next, step.batch); err != nil || got != step.want {
				t.Fatalf("entry %d: %d %v, want %d", next, got, err, step.want)
			}
		}
		next++
	}
	if err := NewPartitionLog(s.store, 1, nil).RestoreAt(4); err == nil {
		t.Fatal("restored from index 4, which has no state row")
	}
}
