package topics

import (
	"errors"

	"github.com/vibemq/broker/pebblestore"
)

// Domain errors. kafkaproto maps each to its Kafka error code (kafkaproto/errors.go);
// they carry no wire knowledge themselves. Wrap them with %w to add detail.
var (
	ErrUnknownTopic         = errors.New("topics: unknown topic or partition")
	ErrTopicExists          = errors.New("topics: topic already exists")
	ErrInvalidTopic         = errors.New("topics: invalid topic name")
	ErrInvalidPartitions    = errors.New("topics: invalid number of partitions")
	ErrInvalidConfig        = errors.New("topics: invalid config")
	ErrOffsetOutOfRange     = errors.New("topics: offset out of range")
	ErrOutOfOrderSequence   = errors.New("topics: out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("topics: invalid producer epoch")
	ErrUnknownProducerID    = errors.New("topics: unknown producer id")
	// ErrTransactionCoordinatorFenced: a transaction marker whose
	// coordinator epoch is lower than that of the last marker written for
	// its producer on the partition (a deposed coordinator's); nothing
	// was written. Kafka TRANSACTION_COORDINATOR_FENCED.
	ErrTransactionCoordinatorFenced = errors.New("topics: transaction coordinator fenced")
	ErrTopicDeleted                 = errors.New("topics: topic is being deleted")
	// ErrStorage: the store failed (a *pebblestore.StorageError or a
	// pebblestore sentinel is wrapped with it, %w, so its class
	// survives: pebblestore.Classify). errors.Is(err,
	// pebblestore.ErrStorage) holds. Kafka KAFKA_STORAGE_ERROR.
	ErrStorage = pebblestore.StorageSentinel("topics: storage error")
	// ErrNotApplied: an append of an AppendAtomic call that was not
	// written because another part of the same atomic write failed.
	ErrNotApplied = errors.New("topics: not applied: another part of the atomic write failed")

	// ErrInvalidTimestamp: a CreateTime record timestamp outside the
	// topic's message.timestamp.before/after.max.ms window. Kafka
	// INVALID_TIMESTAMP.
	ErrInvalidTimestamp = errors.New("topics: invalid timestamp")
	// ErrPolicyViolation: DeleteRecords on a topic whose cleanup.policy
	// lacks delete. Kafka POLICY_VIOLATION.
	ErrPolicyViolation = errors.New("topics: policy violation")
	// ErrTopicOwned: a Kafka client's change to a topic that a broker
	// component manages (owner.go); the error is an *OwnedError that says
	// what to use instead. Kafka has no such code: POLICY_VIOLATION.
	ErrTopicOwned = errors.New("topics: topic is owned by a broker component")
	// ErrInvalidRequest: a request that contradicts itself (a null config
	// value, an unknown config operation). Kafka INVALID_REQUEST.
	ErrInvalidRequest = errors.New("topics: invalid request")
	// ErrInvalidReplicaAssignment: a replica assignment naming another
	// broker. Kafka INVALID_REPLICA_ASSIGNMENT.
	ErrInvalidReplicaAssignment = errors.New("topics: invalid replica assignment")
	// ErrStorageFull: an append of new data refused, before it reached the
	// store, because the data directory's disk is low on free space (the
	// error is a *pebblestore.SpaceError). Kafka KAFKA_STORAGE_ERROR.
	ErrStorageFull = pebblestore.ErrStorageFull
)
