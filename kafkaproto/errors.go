package kafkaproto

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// errorTable maps domain errors to Kafka error codes. The first match in
// order wins, so more specific errors come first.
var errorTable = []struct {
	err  error
	code *kerr.Error
}{
	// Consumer groups first: their errors may carry a storage error's text.
	{groups.ErrInvalidGroupID, kerr.InvalidGroupID},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{groups.ErrUnknownMemberID, kerr.UnknownMemberID},
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{groups.ErrFencedInstanceID, kerr.FencedInstanceID},
	{groups.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{groups.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached},
	{groups.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{groups.ErrNotCoordinator, kerr.NotCoordinator},
	{groups.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{groups.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{groups.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{groups.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{groups.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{groups.ErrInvalidCommitOffsetSize, kerr.InvalidCommitOffsetSize},
	{groups.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	{groups.ErrInvalidRequest, kerr.InvalidRequest},
	{groups.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{groups.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{groups.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{groups.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{groups.ErrInvalidRegularExpression, kerr.InvalidRegularExpression},
	{groups.ErrUnknownServer, kerr.UnknownServerError},
	{groups.ErrShareSessionNotFound, kerr.ShareSessionNotFound},
	{groups.ErrInvalidShareSessionEpoch, kerr.InvalidShareSessionEpoch},
	{groups.ErrInvalidRecordState, kerr.InvalidRecordState},
	{groups.ErrUnknownTopicID, kerr.UnknownTopicID},
	{groups.ErrInvalidGroupConfig, kerr.InvalidConfig},
	{groups.ErrProducerFenced, kerr.ProducerFenced},
	{groups.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{groups.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{groups.ErrTxnOffsetsReplicated, kerr.InvalidTxnState},
	{errTopicAuthorization, kerr.TopicAuthorizationFailed},
	{txns.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txns.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txns.ErrProducerFenced, kerr.ProducerFenced},
	{txns.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{txns.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txns.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txns.ErrInvalidRequest, kerr.InvalidRequest},
	{txns.ErrNotCoordinator, kerr.NotCoordinator},
	{txns.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{topics.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{topics.ErrTopicExists, kerr.TopicAlreadyExists},
	{topics.ErrInvalidTopic, kerr.InvalidTopicException},
	{topics.ErrInvalidPartitions, kerr.InvalidPartitions},
	{topics.ErrInvalidConfig, kerr.InvalidConfig},
	{topics.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{topics.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{topics.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{topics.ErrUnknownProducerID, kerr.UnknownProducerID},
	{topics.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{topics.ErrTopicDeleted, kerr.UnknownTopicOrPartition},
	{topics.ErrCorruptMessage, kerr.CorruptMessage},
	{topics.ErrInvalidRecord, kerr.InvalidRecord},
	{topics.ErrMessageTooLarge, kerr.MessageTooLarge},
	{topics.ErrUnsupportedCompression, kerr.UnsupportedCompressionType},
	// Produce v3+ with magic 0/1 batches: INVALID_RECORD, as Kafka answers.
	{topics.ErrUnsupportedMessageFormat, kerr.InvalidRecord},
	{topics.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{topics.ErrPolicyViolation, kerr.PolicyViolation},
	// A change to a topic a queue or event store owns: Kafka has no
	// "owned" code; POLICY_VIOLATION is the closest, and the message says
	// what to use instead.
	{topics.ErrTopicOwned, kerr.PolicyViolation},
	{topics.ErrInvalidRequest, kerr.InvalidRequest},
	{topics.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	// A cluster's proposals (cluster.go): Kafka's broker answers
	// NOT_CONTROLLER while no controller is known and REQUEST_TIMED_OUT
	// when the controller does not answer in time (KIP-590 forwarding).
	{ErrNoController, kerr.NotController},
	{errNotShareLeader, kerr.NotLeaderForPartition},
	{errShareReplicated, kerr.InvalidReplicationFactor},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{ErrReplicationNotBuilt, kerr.InvalidReplicationFactor},
	{ErrNotLeader, kerr.NotLeaderForPartition},
	{ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{ErrBrokersUnavailable, kerr.InvalidReplicationFactor},
	// Every failure of the store, whatever its class (pebblestore.Classify:
	// a full or almost full disk, I/O, corruption, a closed store) and
	// whichever domain wrapped it (topics.ErrStorage, txns.ErrStorage):
	// Kafka's code for an offline log directory (KIP-112), retriable in
	// every client. Last: a domain error that carries a store failure
	// keeps its own code.
	{pebblestore.ErrStorage, kerr.KafkaStorageError},
	{auth.ErrStorage, kerr.KafkaStorageError},
	// Client quota requests Kafka refuses (ClientQuotaControlManager,
	// ClientQuotasImage).
	{auth.ErrInvalidQuota, kerr.InvalidRequest},
	{auth.ErrUnsupportedQuotaEntity, kerr.UnsupportedVersion},
	// Authorization failures a handler puts among domain results.
	{kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed},
}

// errorCode returns the Kafka error code for err (0 for nil). Errors the
// table does not know are UNKNOWN_SERVER_ERROR.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.code.Code
		}
	}
	return kerr.UnknownServerError.Code
}

// errorMessage returns a pointer to err's text for responses that carry one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
