package queues

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/vibemq/broker/pebblestore"
)

// TestErrStorageClassifies pins the storage errors of the queue API to
// pebblestore.Classify: before, queues and httpapi classified store
// failures each their own way (queues checked a sentinel nothing returned,
// httpapi also matched ENOSPC by its text).
func TestErrStorageClassifies(t *testing.T) {
	space := &pebblestore.SpaceError{Free: 1, Min: 2, Resume: 3}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("append: %w", space), CodeStorageFull},
		{&fs.PathError{Op: "write", Path: "000001.log", Err: syscall.ENOSPC}, CodeStorageFull},
		{fmt.Errorf("pebble: %v", syscall.ENOSPC), CodeStorageFull},
		{&fs.PathError{Op: "read", Path: "000002.sst", Err: syscall.EIO}, CodeStorageUnavailable},
		{fmt.Errorf("%w: row", pebblestore.ErrCorruption), CodeStorageUnavailable},
	} {
		e := errStorage(tc.err)
		if e.Code != tc.code {
			t.Errorf("errStorage(%v).Code = %s, want %s", tc.err, e.Code, tc.code)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("errStorage(%v) does not wrap its cause", tc.err)
		}
	}
	if e := errStorage(space); e.Message != space.Error() || e.Details["free_bytes"] != int64(1) {
		t.Errorf("errStorage(SpaceError) = %+v, want the guard's message and details", e)
	}
}
