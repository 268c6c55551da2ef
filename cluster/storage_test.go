package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func openStore(t *testing.T, fs vfs.FS, dir string) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ents(term uint64, from, to uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &raftpb.Entry{Index: new(i), Term: new(term), Data: fmt.Appendf(nil, "t%d-i%d", term, i)})
	}
	return out
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// logOf reads every entry of the storage's log and checks the bounds.
func logOf(t *testing.T, s *Storage) []string {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last < first {
		return nil
	}
	es, err := s.Entries(first, last+1, 1<<30)
	if err != nil {
		t.Fatalf("entries [%d, %d]: %v", first, last, err)
	}
	var out []string
	for _, e := range es {
		out = append(out, string(e.GetData()))
	}
	return out
}

func TestStorageSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	store := openStore(t, nil, dir)
	s, err := OpenStorage(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hardState(1, 1, 0), ents(1, 1, 5), nil); err != nil {
		t.Fatal(err)
	}
	// A new leader of term 2 overwrites entries 4 and 5 and adds 6.
	if err := s.Save(hardState(2, 2, 3), ents(2, 4, 6), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"t1-i1", "t1-i2", "t1-i3", "t2-i4", "t2-i5", "t2-i6"}
	if got := logOf(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	// A shorter overwrite removes what follows it.
	if err := s.Save(hardState(3, 3, 3), ents(3, 5, 5), nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"t1-i1", "t1-i2", "t1-i3", "t2-i4", "t3-i5"}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store = openStore(t, nil, dir)
	defer store.Close()
	s, err = OpenStorage(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	hs, cs, _ := s.InitialState()
	if !proto.Equal(hs, hardState(3, 3, 3)) || len(cs.GetVoters()) != 0 {
		t.Fatalf("after reopen: hard state %v, conf state %v", hs, cs)
	}
	if got := logOf(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopen: log %v, want %v", got, want)
	}
	if term, err := s.Term(5); term != 3 || err != nil {
		t.Fatalf("term(5) = %d, %v", term, err)
	}
	if _, err := s.Term(6); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("term(6): %v, want ErrUnavailable", err)
	}
	// Other groups are apart.
	other, err := OpenStorage(store, 7)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := other.LastIndex(); last != 0 {
		t.Fatalf("group 7 sees %d entries of group 0", last)
	}
}

func TestStorageSnapshotCompactsAndSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	store := openStore(t, nil, dir)
	s, _ := OpenStorage(store, 0)
	if err := s.Save(hardState(1, 1, 10), ents(1, 1, 10), nil); err != nil {
		t.Fatal(err)
	}
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	if err := s.CreateSnapshot(8, cs, []byte("state@8"), 6); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(8, cs, nil, 0); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("second snapshot at 8: %v", err)
	}
	check := func(s *Storage) {
		t.Helper()
		if first, _ := s.FirstIndex(); first != 7 {
			t.Fatalf("first index %d, want 7", first)
		}
		if _, err := s.Entries(6, 8, 1<<20); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("entries from 6: %v, want ErrCompacted", err)
		}
		if term, err := s.Term(6); term != 1 || err != nil {
			t.Fatalf("term of the truncated entry: %d, %v", term, err)
		}
		if got := logOf(t, s); fmt.Sprint(got) != "[t1-i7 t1-i8 t1-i9 t1-i10]" {
			t.Fatalf("log %v", got)
		}
		snap, _ := s.Snapshot()
		if snap.GetMetadata().GetIndex() != 8 || string(snap.GetData()) != "state@8" || fmt.Sprint(snap.GetMetadata().GetConfState().GetVoters()) != "[1 2 3]" {
			t.Fatalf("snapshot %v", snap)
		}
		_, ics, _ := s.InitialState()
		if fmt.Sprint(ics.GetVoters()) != "[1 2 3]" {
			t.Fatalf("initial conf state %v", ics)
		}
	}
	check(s)
	_ = store.Close()
	store = openStore(t, nil, dir)
	defer store.Close()
	s, err := OpenStorage(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	check(s)

	// A received snapshot replaces the whole log.
	snap := &raftpb.Snapshot{Data: []byte("state@20"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(4)), ConfState: cs}}
	if err := s.Save(hardState(4, 2, 20), ents(4, 21, 22), snap); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 21 {
		t.Fatalf("first index after a received snapshot: %d", first)
	}
	if got := logOf(t, s); fmt.Sprint(got) != "[t4-i21 t4-i22]" {
		t.Fatalf("log after a received snapshot: %v", got)
	}
}

func TestStorageEntriesSizeLimit(t *testing.T) {
	store := openStore(t, nil, filepath.Join(t.TempDir(), "data"))
	defer store.Close()
	s, _ := OpenStorage(store, 0)
	if err := s.Save(hardState(1, 1, 0), ents(1, 1, 10), nil); err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries(1, 11, 1) // below one entry: still one
	if err != nil || len(es) != 1 {
		t.Fatalf("entries with a tiny limit: %d, %v", len(es), err)
	}
	es, err = s.Entries(3, 11, 1<<20)
	if err != nil || len(es) != 8 || es[0].GetIndex() != 3 {
		t.Fatalf("entries from 3: %d, %v", len(es), err)
	}
	if err := s.Save(nil, ents(1, 12, 12), nil); err == nil {
		t.Fatal("saving entry 12 after 10 left a hole and was accepted")
	}
}

// TestStorageCrashKeepsSavedState: every Save that returned is in a crash
// image of the filesystem taken right after it (Pebble's crashable memory
// filesystem keeps a random share of what was not synced): the hard state
// and the entries it saved, never a hole.
func TestStorageCrashKeepsSavedState(t *testing.T) {
	for seed := 1; seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			rng := rand.New(rand.NewPCG(uint64(seed), 13))
			store := openStore(t, mem, "data")
			s, _ := OpenStorage(store, 0)
			type image struct {
				fs   *vfs.MemFS
				hs   *raftpb.HardState
				last uint64
			}
			var images []image
			last := uint64(0)
			for round := uint64(1); round <= 12; round++ {
				from := last + 1
				if round%4 == 0 && last > 2 {
					from = last - 1 // a new term overwrites the tail
				}
				to := from + uint64(seed)
				hs := hardState(round, 1, from-1)
				if err := s.Save(hs, ents(round, from, to), nil); err != nil {
					t.Fatal(err)
				}
				last = to
				images = append(images, image{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng}), hs: hs, last: last})
			}
			_ = store.Close()
			for i, img := range images {
				store := openStore(t, img.fs, "data")
				s, err := OpenStorage(store, 0)
				if err != nil {
					t.Fatalf("image %d: %v", i, err)
				}
				hs, _, _ := s.InitialState()
				if !proto.Equal(hs, img.hs) {
					t.Fatalf("image %d: hard state %v, saved %v", i, hs, img.hs)
				}
				if got, _ := s.LastIndex(); got != img.last {
					t.Fatalf("image %d: last index %d, saved %d", i, got, img.last)
				}
				if got := logOf(t, s); uint64(len(got)) != img.last {
					t.Fatalf("image %d: %d entries, want %d", i, len(got), img.last)
				}
				_ = store.Close()
			}
		})
	}
}
