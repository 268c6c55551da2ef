package kafkaproto

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// TestStorageFailuresAreOneCode pins the one entry of the error table for
// failures of the store: the table had three (txns.ErrStorage,
// topics.ErrStorageFull, topics.ErrStorage), and corruption that a domain
// returned without its storage sentinel answered UNKNOWN_SERVER_ERROR.
// Every class (pebblestore.Classify), however a domain wrapped it, is
// KAFKA_STORAGE_ERROR (KIP-112); a domain error that carries a store
// failure keeps its own code.
func TestStorageFailuresAreOneCode(t *testing.T) {
	space := &pebblestore.SpaceError{Free: 1, Min: 2, Resume: 3}
	for _, tc := range []struct {
		name string
		err  error
		want *kerr.Error
	}{
		{"full, as the guard returns it", space, kerr.KafkaStorageError},
		{"full in topics", fmt.Errorf("%w: %w", topics.ErrStorage, space), kerr.KafkaStorageError},
		{"ENOSPC as text in topics", fmt.Errorf("%w: %v", topics.ErrStorage, syscall.ENOSPC), kerr.KafkaStorageError},
		{"I/O in txns", fmt.Errorf("%w: %v", txns.ErrStorage, syscall.EIO), kerr.KafkaStorageError},
		{"typed I/O", &pebblestore.StorageError{Class: pebblestore.StorageIO, Err: syscall.EIO}, kerr.KafkaStorageError},
		{"corruption without a domain sentinel", fmt.Errorf("%w: stored batch t/0@5", pebblestore.ErrCorruption), kerr.KafkaStorageError},
		{"closed", pebblestore.ErrClosed, kerr.KafkaStorageError},
		{"a group error carrying a store failure", fmt.Errorf("%w: %w", groups.ErrCoordinatorNotAvailable, pebblestore.ErrClosed), kerr.CoordinatorNotAvailable},
		{"not a store failure", fmt.Errorf("boom"), kerr.UnknownServerError},
	} {
		if got := errorCode(tc.err); got != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), tc.want)
		}
	}
}
