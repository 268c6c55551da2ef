package pebblestore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"nil", nil, nil},
		{"space guard", fmt.Errorf("append: %w", &SpaceError{Free: 1, Min: 2, Resume: 3}), ErrStorageFull},
		{"ENOSPC", &fs.PathError{Op: "write", Path: "000001.log", Err: syscall.ENOSPC}, ErrStorageFull},
		// Pebble's background errors may reach us formatted with %v.
		{"ENOSPC as text", fmt.Errorf("pebble: background error: %v", syscall.ENOSPC), ErrStorageFull},
		{"corruption", fmt.Errorf("%w: key 0x10", ErrCorruption), ErrCorruption},
		{"I/O", &fs.PathError{Op: "read", Path: "000002.sst", Err: syscall.EIO}, ErrUnavailable},
		{"closed", ErrClosed, ErrUnavailable},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if tc.err != nil && !errors.Is(Classify(tc.err), tc.want) {
			t.Errorf("%s: not errors.Is its class", tc.name)
		}
	}
}
