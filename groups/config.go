package groups

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Config configures a Coordinator. Zero values take the documented
// defaults, except InitialRebalanceDelay, where zero means no delay.
type Config struct {
	Logger zerolog.Logger
	// PendingTxnOffset reports whether an open transaction staged an offset
	// for the group's partition (TxnOffsetCommit); OffsetFetch with
	// require_stable then answers UNSTABLE_OFFSET_COMMIT. nil means never.
	PendingTxnOffset func(group, topic string, partition int32) bool
	// Registerer receives the coordinator's metrics; nil means unregistered.
	Registerer prometheus.Registerer

	// InitialRebalanceDelay is how long a group that was Empty waits for
	// more members before its first rebalance completes, extended by each
	// new member up to the rebalance timeout (Kafka
	// group.initial.rebalance.delay.ms; the broker's default is 3s). Zero
	// means no delay.
	InitialRebalanceDelay time.Duration
	// OffsetsRetention is how long the committed offsets of an Empty group
	// are kept after it became Empty, and those of a group without a
	// protocol (manual assignment) after their commit (Kafka
	// offsets.retention.minutes); default 7 days.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is how often expired offsets are
	// removed (Kafka offsets.retention.check.interval.ms); default 10m.
	OffsetsRetentionCheckInterval time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (Kafka group.min.session.timeout.ms and
	// group.max.session.timeout.ms); defaults 6s and 30m.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// NewMemberJoinTimeout bounds how long a new member may wait in its
	// first JoinGroup (Kafka's fixed 5 minutes); default 5m.
	NewMemberJoinTimeout time.Duration
	// MaxGroupSize bounds the members of one group (Kafka group.max.size);
	// default 10000.
	MaxGroupSize int
	// MaxOffsetMetadataBytes bounds the metadata string of one committed
	// offset (Kafka offset.metadata.max.bytes); default 4096.
	MaxOffsetMetadataBytes int
	// MaxMemberMetadataBytes bounds the protocol metadata one member sends
	// in JoinGroup (all protocols together) and the assignment the leader
	// gives one member in SyncGroup; default 1 MiB. Kafka has no such
	// limit; past it the group's metadata record could never be stored.
	MaxMemberMetadataBytes int
	// OffsetsTopicPartitions is the partition count of __consumer_offsets
	// when the coordinator creates it (Kafka offsets.topic.num.partitions);
	// default 50. An existing topic keeps its count.
	OffsetsTopicPartitions int32
	// ConsumerSessionTimeout is how long a member of a consumer group
	// (KIP-848) stays without heartbeating (Kafka
	// group.consumer.session.timeout.ms); default 45s.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is the heartbeat interval given to members
	// of consumer groups (Kafka group.consumer.heartbeat.interval.ms);
	// default 5s.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerMigrationPolicy is Kafka's group.consumer.migration.policy
	// for groups with members (consumer_classic.go): "bidirectional" (the
	// default) upgrades a classic group when a member of the new protocol
	// joins and downgrades it when the last one leaves, "upgrade" and
	// "downgrade" do only that, "disabled" neither. Empty groups convert
	// either way under every policy.
	ConsumerMigrationPolicy string
	// ShareRecordLockDuration is how long a share group member holds a
	// record it acquired before it is delivered again (Kafka
	// group.share.record.lock.duration.ms); default 30s.
	ShareRecordLockDuration time.Duration
	// ShareDeliveryCountLimit is how many times a record is delivered to
	// a share group before it is archived (Kafka
	// group.share.delivery.count.limit); default 5.
	ShareDeliveryCountLimit int
	// ShareMaxRecordLocks bounds a share-partition's in-flight window
	// (Kafka group.share.partition.max.record.locks); default 2000.
	ShareMaxRecordLocks int
	// ShareAutoOffsetReset is where a share group starts reading a
	// partition it has not read before: "latest" (default) or "earliest"
	// (Kafka's group config share.auto.offset.reset).
	ShareAutoOffsetReset string
	// ShareQueues is the native queue engine as share groups use it on a
	// queue's topic (share_queue.go); nil: share groups refuse queue
	// topics (INVALID_REQUEST per partition).
	ShareQueues ShareQueues
}

func (c *Config) setDefaults() {
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.NewMemberJoinTimeout == 0 {
		c.NewMemberJoinTimeout = 5 * time.Minute
	}
	if c.MaxGroupSize == 0 {
		c.MaxGroupSize = 10000
	}
	if c.MaxOffsetMetadataBytes == 0 {
		c.MaxOffsetMetadataBytes = 4096
	}
	if c.MaxMemberMetadataBytes == 0 {
		c.MaxMemberMetadataBytes = 1 << 20
	}
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.ShareRecordLockDuration == 0 {
		c.ShareRecordLockDuration = 30 * time.Second
	}
	if c.ShareDeliveryCountLimit == 0 {
		c.ShareDeliveryCountLimit = 5
	}
	if c.ShareMaxRecordLocks == 0 {
		c.ShareMaxRecordLocks = 2000
	}
	if c.ShareAutoOffsetReset == "" {
		c.ShareAutoOffsetReset = "latest"
	}
	if c.ConsumerMigrationPolicy == "" {
		c.ConsumerMigrationPolicy = MigrationBidirectional
	}
}

// The values of Config.ConsumerMigrationPolicy (Kafka's
// ConsumerGroupMigrationPolicy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

func (c *Config) upgradeEnabled() bool {
	return c.ConsumerMigrationPolicy == MigrationBidirectional || c.ConsumerMigrationPolicy == MigrationUpgrade
}

func (c *Config) downgradeEnabled() bool {
	return c.ConsumerMigrationPolicy == MigrationBidirectional || c.ConsumerMigrationPolicy == MigrationDowngrade
}

// Validate checks the config after defaults are applied.
func (c *Config) Validate() error {
	var errs []error
	if c.InitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("groups: the initial rebalance delay is %v; it must not be negative", c.InitialRebalanceDelay))
	}
	if c.OffsetsRetention < 0 || c.OffsetsRetentionCheckInterval < 0 || c.NewMemberJoinTimeout < 0 {
		errs = append(errs, errors.New("groups: offsets retention, its check interval and the new member join timeout must not be negative"))
	}
	if c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("groups: the session timeout range %v-%v is empty or negative; the minimum must not exceed the maximum", c.MinSessionTimeout, c.MaxSessionTimeout))
	}
	if c.MaxGroupSize < 0 || c.MaxOffsetMetadataBytes < 0 || c.MaxMemberMetadataBytes < 0 {
		errs = append(errs, errors.New("groups: the group size and metadata limits must not be negative"))
	}
	if c.OffsetsTopicPartitions < 0 || c.OffsetsTopicPartitions > 1000 {
		errs = append(errs, fmt.Errorf("groups: %d partitions for __consumer_offsets; use 1 to 1000", c.OffsetsTopicPartitions))
	}
	if c.ConsumerSessionTimeout < 0 || c.ConsumerHeartbeatInterval < 0 || c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		errs = append(errs, fmt.Errorf("groups: the consumer heartbeat interval %v must be positive and below the consumer session timeout %v", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout))
	}
	if c.ShareRecordLockDuration < 0 || c.ShareDeliveryCountLimit < 1 || c.ShareDeliveryCountLimit > 32767 || c.ShareMaxRecordLocks < 1 {
		errs = append(errs, fmt.Errorf("groups: share record lock duration %v, delivery count limit %d and max record locks %d must be positive (the limit at most 32767)", c.ShareRecordLockDuration, c.ShareDeliveryCountLimit, c.ShareMaxRecordLocks))
	}
	switch c.ConsumerMigrationPolicy {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
	default:
		errs = append(errs, fmt.Errorf("groups: consumer migration policy %q; use bidirectional, upgrade, downgrade or disabled", c.ConsumerMigrationPolicy))
	}
	if c.ShareAutoOffsetReset != "latest" && c.ShareAutoOffsetReset != "earliest" {
		errs = append(errs, fmt.Errorf("groups: share auto offset reset %q; use latest or earliest", c.ShareAutoOffsetReset))
	}
	return errors.Join(errs...)
}
