package pebblestore

import (
	"errors"
	"strings"
	"syscall"
)

// ErrUnavailable is the class of a failure of the store that is neither a
// full disk nor corruption: an I/O error, a closed store. The outcome of
// the write that met it is unknown; the request may be retried.
var ErrUnavailable = errors.New("pebblestore: storage unavailable")

// Classify sorts a failure of the store into its class, the one place
// where the broker decides what a storage error means; the edges map the
// class to their codes (the native API in httpapi and queues, Kafka in
// kafkaproto) and the domains wrap store errors with %w so that the class
// survives. It returns nil for nil, else one of:
//
//   - ErrStorageFull: the guard refused new data (a *SpaceError, with the
//     free space and limits for errors.As), or the filesystem itself is
//     full (ENOSPC, also when only the error's text says so: an error
//     Pebble formatted loses its chain);
//   - ErrCorruption: stored data failed its own checks;
//   - ErrUnavailable: anything else.
func Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrStorageFull), errors.Is(err, syscall.ENOSPC),
		strings.Contains(err.Error(), "no space left on device"):
		return ErrStorageFull
	case errors.Is(err, ErrCorruption):
		return ErrCorruption
	}
	return ErrUnavailable
}
