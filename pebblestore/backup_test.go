package pebblestore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// TestBackupRestore: a backup of a live store restores into a new directory
// that opens with the same data; restore refuses a non-empty target, a
// directory without a marker, and one held by a running store.
func TestBackupRestore(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	s, err := Open(data, Options{Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("\x10key"), []byte("value"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(root, "backup")
	info, err := s.Backup(backup)
	if err != nil {
		t.Fatal(err)
	}
	if info.Files == 0 || info.Bytes == 0 {
		t.Fatalf("backup info %+v", info)
	}
	// Written after the backup: not in it.
	b = s.NewBatch()
	b.Set([]byte("\x10later"), []byte("x"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(backup); !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("backup over a backup: %v", err)
	}
	if err := CheckDataDir(backup); err != nil {
		t.Fatalf("backup is not a data dir: %v", err)
	}

	if _, err := Restore(backup, data, nil); !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("restore over live data: %v", err)
	}
	if _, err := Restore(root, filepath.Join(root, "x"), nil); !errors.Is(err, ErrNotBrokerData) {
		t.Fatalf("restore from a non-data dir: %v", err)
	}
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	var last, total int64
	restored, err := Restore(backup, empty, func(done, all int64) { last, total = done, all })
	if err != nil {
		t.Fatal(err)
	}
	if last != total || total == 0 || restored.Files == 0 {
		t.Fatalf("progress %d/%d, info %+v", last, total, restored)
	}
	r, err := Open(empty, Options{Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatalf("open the restored dir: %v", err)
	}
	defer r.Close()
	if v, err := r.Get([]byte("\x10key")); err != nil || string(v) != "value" {
		t.Fatalf("restored key: %q %v", v, err)
	}
	if _, err := r.Get([]byte("\x10later")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a write after the backup is in it: %v", err)
	}
	// A half-written backup (no marker) is refused.
	if err := os.Remove(filepath.Join(backup, markerFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(backup, filepath.Join(root, "y"), nil); !errors.Is(err, ErrNotBrokerData) {
		t.Fatalf("restore from a backup without marker: %v", err)
	}
}

// TestCompactAll: the ranges cover the keyspace without holes, one per
// table and one per topic of the batch table, and compaction runs.
func TestCompactAll(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set(BatchKey(TopicID{1}, 0, 0), []byte("a"))
	b.Set(BatchKey(TopicID{1}, 1, 0), []byte("b"))
	b.Set(BatchKey(TopicID{2}, 0, 5), []byte("c"))
	b.Set(BatchIndexKey(TopicID{2}, 0, 5), []byte("d"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	ranges, err := s.CompactRanges()
	if err != nil {
		t.Fatal(err)
	}
	// format row (0x01), topic 1 and topic 2 of 0x10, 0x11.
	if len(ranges) != 4 {
		t.Fatalf("ranges %x", ranges)
	}
	for i := 1; i < len(ranges); i++ {
		if string(ranges[i-1][1]) != string(ranges[i][0]) {
			t.Fatalf("hole between ranges %d and %d: %x", i-1, i, ranges)
		}
	}
	var done, total int
	if err := s.CompactAll(func(d, t int) { done, total = d, t }); err != nil {
		t.Fatal(err)
	}
	if done != 4 || total != 4 {
		t.Fatalf("progress %d/%d", done, total)
	}
}
