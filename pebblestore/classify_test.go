package pebblestore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

func TestClassify(t *testing.T) {
	domain := StorageSentinel("topics: storage error")
	space := &SpaceError{Free: 1, Min: 2, Resume: 3}
	for _, tc := range []struct {
		name string
		err  error
		want StorageClass // 0: not a store failure
	}{
		{"nil", nil, 0},
		{"not found is an answer", ErrNotFound, 0},
		{"another error", errors.New("boom"), 0},
		{"ENOSPC outside the store", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, 0},
		{"space guard", fmt.Errorf("append: %w", space), StorageFull},
		{"space guard in a domain's", fmt.Errorf("%w: %w", domain, space), StorageFull},
		{"full sentinel", ErrStorageFull, StorageFull},
		{"ENOSPC from the store", storageFailure(&fs.PathError{Op: "write", Path: "000001.log", Err: syscall.ENOSPC}), StorageFull},
		// A domain that formats the failure with %v keeps only its text.
		{"ENOSPC as text", fmt.Errorf("%w: pebble: background error: %v", domain, syscall.ENOSPC), StorageFull},
		{"corruption", fmt.Errorf("%w: key 0x10", ErrCorruption), StorageCorruption},
		{"corruption in a domain's", fmt.Errorf("%w: %w", domain, fmt.Errorf("%w: key 0x10", ErrCorruption)), StorageCorruption},
		{"I/O", storageFailure(&fs.PathError{Op: "read", Path: "000002.sst", Err: syscall.EIO}), StorageIO},
		{"I/O in a domain's", fmt.Errorf("%w: %v", domain, syscall.EIO), StorageIO},
		{"closed", ErrClosed, StorageClosed},
		{"closed in a domain's", fmt.Errorf("%w: %w", domain, ErrClosed), StorageClosed},
	} {
		se := Classify(tc.err)
		switch {
		case tc.want == 0 && se != nil:
			t.Errorf("%s: Classify(%v) = %v, want nil (no store failure)", tc.name, tc.err, se.Class)
		case tc.want == 0:
		case se == nil:
			t.Errorf("%s: Classify(%v) = nil, want %v", tc.name, tc.err, tc.want)
		case se.Class != tc.want:
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, se.Class, tc.want)
		case !errors.Is(se, ErrStorage) || se.Error() == "":
			t.Errorf("%s: %v is not ErrStorage", tc.name, se)
		}
		if tc.want == StorageFull && errors.As(tc.err, new(*SpaceError)) && se.Space() != space {
			t.Errorf("%s: Space() = %v, want the guard's refusal", tc.name, se.Space())
		}
	}
	// The class's sentinel follows the class.
	se := &StorageError{Class: StorageCorruption, Err: errors.New("bad block")}
	if !errors.Is(se, ErrCorruption) || errors.Is(se, ErrStorageFull) || errors.Is(se, ErrClosed) {
		t.Error("a corruption StorageError must be ErrCorruption only")
	}
}

// TestStoreFailuresAreTyped: the failures a Store method returns are a
// *StorageError of their class or a sentinel of one, so the domains only
// wrap them: calls after Close are StorageClosed, and a missing key stays
// ErrNotFound (an answer, no failure).
func TestStoreFailuresAreTyped(t *testing.T) {
	s, err := Open("/data", Options{Logger: zerolog.Nop(), FS: vfs.NewMem(), CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set([]byte{PrefixBatch, 1}, []byte("v"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get([]byte{PrefixBatch, 0}); !errors.Is(err, ErrNotFound) || Classify(err) != nil {
		t.Fatalf("missing key: %v, want ErrNotFound and no store failure", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, getErr := s.Get([]byte{PrefixBatch, 1})
	_, iterErr := s.NewIter(nil, nil)
	applyErr := s.NewBatch().Apply()
	for _, err := range []error{getErr, iterErr, applyErr, s.Compact([]byte{0}, []byte{0xff})} {
		if se := Classify(err); se == nil || se.Class != StorageClosed {
			t.Errorf("after Close: %v, want class closed", err)
		}
	}
	// A failure Pebble or the filesystem returns gets its class where it
	// happens (storageFailure), and keeps its chain and text.
	eio := &fs.PathError{Op: "read", Path: "000002.sst", Err: syscall.EIO}
	var se *StorageError
	if err := storageFailure(fmt.Errorf("pebblestore: get 10: %w", eio)); !errors.As(err, &se) || se.Class != StorageIO ||
		!errors.Is(err, syscall.EIO) || err.Error() != "pebblestore: get 10: read 000002.sst: input/output error" {
		t.Errorf("storageFailure(EIO) = %v, want a StorageError of class io with the failure's text", err)
	}
	if err := storageFailure(ErrNotFound); err != ErrNotFound {
		t.Errorf("storageFailure(ErrNotFound) = %v", err)
	}
}
