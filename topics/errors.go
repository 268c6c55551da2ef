package topics

import "errors"

// Domain errors. kafkaproto maps each to its Kafka error code (kafkaproto/errors.go);
// they carry no wire knowledge themselves. Wrap them with %w to add detail.
var (
	ErrUnknownTopic          = errors.New("topics: unknown topic or partition")
	ErrTopicExists           = errors.New("topics: topic already exists")
	ErrInvalidTopic          = errors.New("topics: invalid topic name")
	ErrInvalidPartitions     = errors.New("topics: invalid number of partitions")
	ErrInvalidConfig         = errors.New("topics: invalid config")
	ErrOffsetOutOfRange      = errors.New("topics: offset out of range")
	ErrOutOfOrderSequence    = errors.New("topics: out of order sequence number")
	ErrInvalidProducerEpoch  = errors.New("topics: invalid producer epoch")
	ErrUnknownProducerID     = errors.New("topics: unknown producer id")
	ErrTopicDeleted          = errors.New("topics: topic is being deleted")
	ErrStorage               = errors.New("topics: storage error")
	ErrTransactionalNotReady = errors.New("topics: transactional produce is not supported yet")
)
