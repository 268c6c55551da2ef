package groups

import (
	"time"
)

// The request and result types of the Coordinator. kafkaproto translates
// Kafka requests into these and results back; they mirror the Kafka fields
// but carry no encoding. Byte slices (protocol metadata, assignments) are
// passed through untouched and must not be modified by the caller after the
// call.

// Protocol is one assignment protocol a member supports, with its opaque
// metadata (for protocol type "consumer", a ConsumerMemberMetadata).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	Group      string
	MemberID   string // "" for a new member
	InstanceID *string
	ClientID   string
	ClientHost string
	// ProtocolType is e.g. "consumer" or "connect"; every member of a group
	// must use the same one.
	ProtocolType string
	Protocols    []Protocol
	// SessionTimeout must be within the configured range.
	SessionTimeout time.Duration
	// RebalanceTimeout bounds the join phase (JoinGroup v0: the session
	// timeout).
	RebalanceTimeout time.Duration
	// Version is the JoinGroup API version: a new dynamic member gets
	// MEMBER_ID_REQUIRED from v4, skip_assignment exists from v9.
	Version int16
}

// JoinMember is one member as the leader sees it in the JoinGroup response.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is the JoinGroup response. On error only Err and MemberID
// are meaningful (Generation is -1).
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   *string
	ProtocolName   *string
	Leader         string
	SkipAssignment bool
	// Members is filled for the leader only.
	Members []JoinMember
}

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+, checked when set
	ProtocolName *string // v5+, checked when set
	// Assignments is what the leader assigns; ignored from followers.
	Assignments []MemberAssignment
}

// MemberAssignment is the leader's opaque assignment for one member.
type MemberAssignment struct {
	MemberID   string
	Assignment []byte
}

// SyncResult is the SyncGroup response.
type SyncResult struct {
	Err          error
	ProtocolType *string
	ProtocolName *string
	Assignment   []byte

	durable *persist // the stored assignment the result must not overtake
}

// HeartbeatRequest is a Heartbeat request.
type HeartbeatRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// LeaveMember is one member of a LeaveGroup request: by member ID, or
// (administrative removal) by instance ID with an empty member ID.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Reason     string
}

// LeaveResult is the LeaveGroup response: a group-level error, else one
// error per member in request order.
type LeaveResult struct {
	Err     error
	Members []error
}

// CommitRequest is an OffsetCommit request.
type CommitRequest struct {
	Group      string
	Generation int32 // -1: a commit outside group management (admin tools)
	MemberID   string
	InstanceID *string
	// Retention, when set, expires these offsets that long after the
	// commit (OffsetCommit v2-v4 retention_time_ms other than -1).
	Retention *time.Duration
	Topics    []CommitTopic
	// Version is the OffsetCommit API version (GROUP_ID_NOT_FOUND from v9).
	Version int16
}

// TxnCommit is the offsets a committing transaction staged for one group
// (TxnOffsetCommit), for CommitTransaction.
type TxnCommit struct {
	Group  string
	Topics []CommitTopic
}

// CommitTopic is one topic of an OffsetCommit request.
type CommitTopic struct {
	Topic      string
	Partitions []CommitPartition
}

// CommitPartition is one partition's offset to commit.
type CommitPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    *string
}

// CommitResult holds one error per partition, in request order
// (Topics[i][j] is the error of request topic i, partition j).
type CommitResult struct {
	Topics [][]error
}

// FetchOffsetsRequest asks for one group's committed offsets; nil Topics
// means every committed offset of the group.
type FetchOffsetsRequest struct {
	Group         string
	Topics        []FetchOffsetsTopic
	RequireStable bool
	// MemberID and MemberEpoch (OffsetFetch v9+) are checked against a
	// consumer group (KIP-848) when MemberID is set.
	MemberID    *string
	MemberEpoch int32
}

// FetchOffsetsTopic is one topic of an OffsetFetch request.
type FetchOffsetsTopic struct {
	Topic      string
	Partitions []int32
}

// FetchedOffset is one partition's committed offset: Offset -1 and
// LeaderEpoch -1 when there is none.
type FetchedOffset struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	Err         error
}

// FetchedTopic is one topic of an OffsetFetch result.
type FetchedTopic struct {
	Topic      string
	Partitions []FetchedOffset
}

// FetchOffsetsResult is one group's OffsetFetch result.
type FetchOffsetsResult struct {
	Err    error
	Topics []FetchedTopic
}

// GroupListing is one group of a ListGroups result.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // "classic" or "consumer"
}

// GroupDescription is one group of a DescribeGroups result.
type GroupDescription struct {
	Group string
	Err   error
	// NotClassic: no classic group has this name (missing, a consumer
	// group of KIP-848 or a share group); described as Dead.
	// DescribeGroups v6 answers it GROUP_ID_NOT_FOUND (KIP-1043).
	NotClassic   bool
	State        string
	ProtocolType string
	Protocol     string // the protocol name, set only when Stable
	Members      []MemberDescription
}

// MemberDescription is one member of a DescribeGroups result. Metadata and
// Assignment are set only when the group is Stable.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// OffsetDeleteTopic is one topic of an OffsetDelete request.
type OffsetDeleteTopic struct {
	Topic      string
	Partitions []int32
}

// OffsetDeleteResult is the OffsetDelete response: a group-level error,
// else one error per partition in request order.
type OffsetDeleteResult struct {
	Err    error
	Topics [][]error
}
