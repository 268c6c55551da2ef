package pebblestore

import (
	"errors"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// ErrStorage is what every failure of the store is: errors.Is(err,
// ErrStorage) holds for a *StorageError, a *SpaceError, ErrStorageFull,
// ErrCorruption, ErrClosed and the domains' storage sentinels
// (StorageSentinel). It is not ErrNotFound: a missing key is an answer.
var ErrStorage = errors.New("pebblestore: storage error")

// StorageClass is the kind of a failure of the store; the edges answer by
// it alone (httpapi's storageError, kafkaproto's error table).
type StorageClass uint8

const (
	// StorageIO: the filesystem or Pebble failed (an I/O error, a failed
	// sync, anything unrecognised). The outcome of the write that met it
	// is unknown; the request may be retried.
	StorageIO StorageClass = iota + 1
	// StorageFull: new data refused because the disk is full (ENOSPC) or
	// almost full (the guard's *SpaceError: nothing was written).
	StorageFull
	// StorageCorruption: stored data failed its own checks (ours or
	// Pebble's checksums); retrying does not help, verify the store.
	StorageCorruption
	// StorageClosed: the store is closed, the broker is stopping.
	StorageClosed
)

func (c StorageClass) String() string {
	switch c {
	case StorageIO:
		return "io"
	case StorageFull:
		return "full"
	case StorageCorruption:
		return "corruption"
	case StorageClosed:
		return "closed"
	}
	return "unknown"
}

// StorageError is a failure of the store with its class. The Store's
// methods return their failures as one (never ErrNotFound), so the class
// is decided here, where the failure happens; domains wrap it with %w and
// never look inside. Its text is the failure's.
type StorageError struct {
	Class StorageClass
	Err   error
}

func (e *StorageError) Error() string { return e.Err.Error() }

// Unwrap returns the failure (a *SpaceError, a Pebble or filesystem error).
func (e *StorageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStorage) true, and the class's sentinel
// (ErrStorageFull, ErrCorruption, ErrClosed) too.
func (e *StorageError) Is(target error) bool {
	switch target {
	case ErrStorage:
		return true
	case ErrStorageFull:
		return e.Class == StorageFull
	case ErrCorruption:
		return e.Class == StorageCorruption
	case ErrClosed:
		return e.Class == StorageClosed
	}
	return false
}

// Space returns the guard's refusal behind a StorageFull error (free
// space and limits, for the answer's details), else nil.
func (e *StorageError) Space() *SpaceError {
	var space *SpaceError
	if errors.As(e.Err, &space) {
		return space
	}
	return nil
}

// storageSentinel is a sentinel of a store failure: its own text, and
// errors.Is(s, ErrStorage).
type storageSentinel struct{ text string }

func (s *storageSentinel) Error() string { return s.text }

func (s *storageSentinel) Is(target error) bool { return target == ErrStorage }

// StorageSentinel returns a domain's sentinel for the failures of the
// store it meets (topics.ErrStorage, "topics: storage error"): errors.Is(it,
// ErrStorage) holds, so Classify knows an error that wraps it as a store
// failure even when the failure itself was formatted with %v.
func StorageSentinel(text string) error { return &storageSentinel{text: text} }

// Classify is the one place where the broker decides what a failure of the
// store means. It returns nil when err is nil or no store failure
// (errors.Is(err, ErrStorage) is false), else the *StorageError in err's
// chain (the class the Store gave it), else a new one whose Err is err and
// whose class is:
//
//   - StorageFull: the guard refused new data (a *SpaceError, with the
//     free space and limits: StorageError.Space), or the filesystem itself
//     is full (ENOSPC, also when only the error's text says so: an error
//     formatted with %v loses its chain);
//   - StorageCorruption: ErrCorruption or Pebble's corruption;
//   - StorageClosed: ErrClosed or Pebble's;
//   - StorageIO: anything else.
//
// The edges map the class to their codes (httpapi to storage_full,
// storage_corrupt, shutting_down, storage_unavailable; kafkaproto to
// KAFKA_STORAGE_ERROR).
func Classify(err error) *StorageError {
	if err == nil || !errors.Is(err, ErrStorage) {
		return nil
	}
	class := classOf(err)
	// The typed error in the chain, unless a full disk: then err itself,
	// whose chain holds the guard's *SpaceError if there is one.
	var se *StorageError
	if errors.As(err, &se) && se.Class == class && class != StorageFull {
		return se
	}
	return &StorageError{Class: class, Err: err}
}

// storageFailure returns err as a *StorageError of its class, for the
// Store's methods; nil for nil, ErrNotFound as it is.
func storageFailure(err error) error {
	if err == nil { // first: the hot paths (Iter.Value, Close) allocate nothing
		return nil
	}
	return classified(err)
}

func classified(err error) error {
	var se *StorageError
	if errors.Is(err, ErrNotFound) || errors.As(err, &se) {
		return err
	}
	return &StorageError{Class: classOf(err), Err: err}
}

func classOf(err error) StorageClass {
	var space *SpaceError
	switch {
	case errors.As(err, &space), errors.Is(err, ErrStorageFull), errors.Is(err, syscall.ENOSPC),
		strings.Contains(err.Error(), "no space left on device"):
		return StorageFull
	case errors.Is(err, ErrCorruption), pebble.IsCorruptionError(err):
		return StorageCorruption
	case errors.Is(err, ErrClosed), errors.Is(err, pebble.ErrClosed):
		return StorageClosed
	}
	var se *StorageError
	if errors.As(err, &se) {
		return se.Class
	}
	return StorageIO
}
