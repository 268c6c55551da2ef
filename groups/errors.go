package groups

import (
	"errors"

	"github.com/vibemq/broker/pebblestore"
)

// Domain errors, each named after the Kafka error code kafkaproto maps it
// to (kafkaproto/errors.go). Unknown topics and partitions are reported
// with topics.ErrUnknownTopic.
var (
	ErrInvalidGroupID            = errors.New("groups: invalid group id")
	ErrInvalidSessionTimeout     = errors.New("groups: session timeout outside the broker's range")
	ErrUnknownMemberID           = errors.New("groups: unknown member id")
	ErrMemberIDRequired          = errors.New("groups: member id required; rejoin with the member id given")
	ErrIllegalGeneration         = errors.New("groups: illegal generation")
	ErrRebalanceInProgress       = errors.New("groups: rebalance in progress")
	ErrFencedInstanceID          = errors.New("groups: fenced instance id")
	ErrInconsistentGroupProtocol = errors.New("groups: inconsistent group protocol")
	ErrGroupMaxSizeReached       = errors.New("groups: group max size reached")
	ErrCoordinatorNotAvailable   = errors.New("groups: coordinator not available")
	ErrNotCoordinator            = errors.New("groups: not coordinator")
	// ErrCoordinatorLoadInProgress: the group's replicated partition of
	// __consumer_offsets is being loaded here (replicated.go); retry.
	ErrCoordinatorLoadInProgress = errors.New("groups: coordinator load in progress")
	ErrGroupIDNotFound           = errors.New("groups: group id not found")
	ErrNonEmptyGroup             = errors.New("groups: the group is not empty")
	ErrGroupSubscribedToTopic    = errors.New("groups: the group is subscribed to the topic")
	ErrOffsetMetadataTooLarge    = errors.New("groups: offset metadata too large")
	ErrInvalidCommitOffsetSize   = errors.New("groups: offset commit too large to store")
	ErrUnstableOffsetCommit      = errors.New("groups: an offset commit is not yet durable")
	ErrInvalidRequest            = errors.New("groups: invalid request")
	// Consumer group protocol (KIP-848).
	ErrFencedMemberEpoch        = errors.New("groups: fenced member epoch; rejoin with member epoch 0")
	ErrStaleMemberEpoch         = errors.New("groups: stale member epoch")
	ErrUnreleasedInstanceID     = errors.New("groups: unreleased instance id")
	ErrUnsupportedAssignor      = errors.New("groups: unsupported assignor")
	ErrInvalidRegularExpression = errors.New("groups: invalid regular expression")
	// Share groups (KIP-932).
	ErrShareSessionNotFound     = errors.New("groups: share session not found; open a new one with epoch 0")
	ErrInvalidShareSessionEpoch = errors.New("groups: invalid share session epoch")
	ErrInvalidRecordState       = errors.New("groups: invalid record state")
	ErrUnknownTopicID           = errors.New("groups: unknown topic id")
	// ErrShareStorage wraps a store failure of a share-partition write.
	ErrShareStorage = pebblestore.StorageSentinel("groups: storing share-group state failed")
	// ErrUnknownServer is an error Kafka answers as UNKNOWN_SERVER_ERROR:
	// the group's metadata record was too large to store.
	ErrUnknownServer = errors.New("groups: group metadata too large to store")
)
