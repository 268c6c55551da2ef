package queues

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/vibemq/broker/pebblestore"
)

// TestErrStorageDoesNotClassify pins the one classification of store
// failures: queues used to decide storage_full or storage_unavailable
// itself (pebblestore.Classify behind its own codes), beside httpapi's
// storageError with another fallback. Now a queue's store failure has no
// code, keeps the failure's text and wraps it, so pebblestore.Classify
// finds the class the store gave it, and the transport answers by it.
func TestErrStorageDoesNotClassify(t *testing.T) {
	space := &pebblestore.SpaceError{Free: 1, Min: 2, Resume: 3}
	for _, tc := range []struct {
		err   error
		class pebblestore.StorageClass
	}{
		{fmt.Errorf("append: %w", space), pebblestore.StorageFull},
		{&pebblestore.StorageError{Class: pebblestore.StorageFull, Err: &fs.PathError{Op: "write", Path: "000001.log", Err: syscall.ENOSPC}}, pebblestore.StorageFull},
		{&pebblestore.StorageError{Class: pebblestore.StorageIO, Err: &fs.PathError{Op: "read", Path: "000002.sst", Err: syscall.EIO}}, pebblestore.StorageIO},
		{fmt.Errorf("%w: row", pebblestore.ErrCorruption), pebblestore.StorageCorruption},
		{pebblestore.ErrClosed, pebblestore.StorageClosed},
		// A failure from outside the store that a queue call met while
		// writing: a store failure of unknown outcome all the same.
		{errors.New("boom"), pebblestore.StorageIO},
	} {
		e := errStorage(tc.err)
		if e.Code != "" || e.Message != tc.err.Error() || e.Error() != tc.err.Error() {
			t.Errorf("errStorage(%v) = %q %q, want no code and the failure's text", tc.err, e.Code, e.Message)
		}
		if !errors.Is(e, tc.err) || !errors.Is(e, ErrStorage) {
			t.Errorf("errStorage(%v) does not wrap its cause", tc.err)
		}
		if se := pebblestore.Classify(e); se == nil || se.Class != tc.class {
			t.Errorf("Classify(errStorage(%v)) = %v, want class %v", tc.err, se, tc.class)
		}
	}
}
