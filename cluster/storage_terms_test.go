package cluster

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestStorageTermsMatchTheLog: Term answers from the in-memory term runs
// what the stored entries say, through appends, overwrites of a
// conflicting tail (at, below and inside the runs), a reopen (older
// entries are read from the store again), a compaction and a received
// snapshot; and it answers an indexed entry without reading the store
// (no allocation, where reading and decoding an entry allocates).
func TestStorageTermsMatchTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	store := openStore(t, nil, dir)
	s, err := OpenStorage(store, 7)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		fresh, err := OpenStorage(store, 7) // no runs: every Term reads the entry
		if err != nil {
			t.Fatal(err)
		}
		last, _ := s.LastIndex()
		for i := s.truncatedIndex; i <= last; i++ {
			got, err1 := s.Term(i)
			want, err2 := fresh.Term(i)
			if got != want || err1 != nil || err2 != nil {
				t.Fatalf("%s: term of %d: %d (%v), stored %d (%v)", what, i, got, err1, want, err2)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	term := uint64(1)
	save := func(first, n uint64) {
		t.Helper()
		var es []*raftpb.Entry
		for i := first; i < first+n; i++ {
			if rng.IntN(4) == 0 {
				term++
			}
			es = append(es, ents(term, i, i)...)
		}
		if err := s.Save(hardState(term, 1, 0), es, nil); err != nil {
			t.Fatal(err)
		}
	}
	save(1, 20)
	check("appends")
	for range 50 { // appends and overwrites of a tail, anywhere in the log
		last, _ := s.LastIndex()
		first := last + 1
		if rng.IntN(2) == 0 {
			first = s.truncatedIndex + 1 + rng.Uint64N(last-s.truncatedIndex)
		}
		term++
		save(first, 1+rng.Uint64N(8))
		check("overwrites")
	}
	last, _ := s.LastIndex()
	if n := testing.AllocsPerRun(100, func() { _, _ = s.Term(last - 1) }); n != 0 {
		t.Errorf("Term of an entry appended since open allocated %.0f times: it read the store", n)
	}

	s, err = OpenStorage(store, 7) // reopened: no runs; new appends start them
	if err != nil {
		t.Fatal(err)
	}
	save(last+1, 5)
	save(last-2, 4) // overwrites below the runs' start
	check("after a reopen")
	if err := s.CreateSnapshot(last-5, &raftpb.ConfState{Voters: []uint64{1}}, nil, last-8); err != nil {
		t.Fatal(err)
	}
	check("after a compaction")
	term += 2
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(last + 100), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}}
	if err := s.Save(hardState(term, 1, last+100), ents(term, last+101, last+103), snap); err != nil {
		t.Fatal(err)
	}
	check("after a received snapshot")
}
