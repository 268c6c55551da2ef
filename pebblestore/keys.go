package pebblestore

import (
	"encoding/binary"
)

// The whole Pebble keyspace of the broker is defined in this file. Every key
// starts with a one-byte prefix that names its table; the prefixes and the
// layouts below are part of the file format: changing one requires a new
// FormatVersion and a migration.
//
// Integers are fixed-width big-endian so that byte order equals numeric order.
// Variable-length names never sit in the middle of a key: topics are keyed by
// their 16-byte topic ID, and names are resolved through the topic catalog.
//
//	prefix  key layout                                   value
//	------  -------------------------------------------  ----------------------------------------
//	0x01    "format"                                     u64 format version (FormatVersion)
//	0x02    topicID [16]                                 topic record (JSON: name, partitions, configs, owner; see below)
//	0x03    "producer-id"                                u64 next unallocated producer ID
//	0x04    "cluster-id"                                 cluster ID string, chosen at first boot
//	0x10    topicID [16] | partition u32 | base u64      raw Kafka v2 RecordBatch, as stored
//	0x11    topicID [16] | partition u32 | base u64      batch index: last offset u64 | max timestamp i64 | size u32
//	0x12    topicID [16] | partition u32                 partition state (below)
//	0x13    topicID [16] | partition u32 | producer u64  idempotent producer state (below; see topics/producer.go)
//	0x14    topicID [16] | partition u32 | base u64      segment summary (below)
//	0x20    groupID u64                                  consumer group row: u16 name length | name | last GroupMetadataValue (see groups/store.go)
//	0x21    groupID u64 | topicID [16] | partition u32   committed offset: u16 topic length | topic | OffsetCommitValue (see groups/store.go)
//	0x22    groupID u64 | record key                     consumer group (KIP-848) record: latest value of that __consumer_offsets key (see groups/consumer_records.go)
//	0x23    group name                                   share group (KIP-932): empty value (see groups/share.go)
//	0x24    topicID [16] | partition u32 | group name    share-partition state: start offset and in-flight records (see groups/share_partition.go)
//	0x25    group name                                   share group configs set with IncrementalAlterConfigs (see groups/share_config.go)
//	0x26    groupID u64 | producer u64 | topicID [16] | partition u32   pending transactional offset: u16 topic length | topic | epoch i16 | flags u8 | OffsetCommitValue (see groups/txn_offsets.go)
//	0x27    partition u32 | producer u64                 coordinator epoch of the producer's last transaction marker on that __consumer_offsets partition: version u8 (1) | coordinatorEpoch i32 (see groups/txn_offsets_fence.go)
//	0x28-2f reserved: consumer groups
//	0x30    queue name                                   queue ID u32 (queue catalog; the name is the whole suffix)
//	0x31    queueID u32                                  queue record (JSON: name, kind, topic ID, attributes)
//	0x32    "next-queue-id" | "receipt-key"              u32 next queue ID (never reused) | 32-byte receipt HMAC key
//	0x33    queueID u32 | partition u32 | offset u64     delivery state of one message (see queues/state.go)
//	0x34    queueID u32 | band u8 | due u64 | part u32 | offset u64   ready index, band = 255 - priority (empty value)
//	0x35    queueID u32 | deadline u64 | part u32 | offset u64       lease index -> epoch u32
//	0x36    queueID u32 | expireAt u64 | part u32 | offset u64       expiry index: TTL and retention (empty value)
//	0x37    queueID u32 | dedup hash [16]                dedup entry: partition u32 | offset u64 | expires u64 | body hash [16] (see queues/dedup.go)
//	0x38    queueID u32 | sweep at u64 | dedup hash [16] dedup expiry index (empty value)
//	0x39    queueID u32 | done u64 | part u32 | offset u64           retained terminal index (retain_acked_ms)
//	0x3a    task ID u64                                  redrive task (JSON, see queues/redrive.go)
//	0x3b    queueID u32 | request id                    receive memo: deadline u64 | n u16 | n x (part u32 | offset u64 | epoch u32)
//	0x3c-3f reserved: native queues
//	0x40    storeName                                    event store record (JSON: id, name, topic ID, created)
//	0x41    "next-store-id"                              u32 next unallocated event store ID (IDs are never reused)
//	0x42    storeID u32 | streamName                     streamID u64 (stream catalog)
//	0x43    storeID u32 | streamID u64                   stream head (see events/keys.go)
//	0x44    storeID u32 | streamID u64 | revision u64   position u64 (stream index)
//	0x45    storeID u32 | sha256(eventID)[:16]           idempotency entry (see events/keys.go)
//	0x46    storeID u32 | second u64                     first position whose timestamp is in that Unix second
//	0x47    storeID u32 | consumerName                   durable consumer checkpoint: next position to read (see events/keys.go)
//	0x48-4f reserved: event store
//	0x50    transactionalID                              transaction coordinator row (JSON, see txns/store.go)
//	0x51    topicID [16] | partition u32 | producer u64  ongoing transaction: first offset u64
//	0x52    topicID [16] | partition u32 | marker u64    aborted transaction: producer u64 | first offset u64 (while its data may remain)
//	0x53-5f reserved: transactions
//	0x60    mechanism u8 | user name                     SCRAM credential (JSON: salt, iterations, stored_key, server_key; see auth/store.go); mechanism 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512 (Kafka's ScramMechanism codes)
//	0x61    SHA-256(binding)[:16]                        ACL binding (JSON: resource type, name, pattern type, principal, host, operation, permission; see auth/acl_store.go)
//	0x62    SHA-256(entity)[:16]                         client quota entity (JSON: entity parts and quota values; see auth/quota_store.go)
//	0x63-6f reserved: security
//	0x70    group u64 | 0x01 | index u64                 Raft log entry (protobuf raftpb.Entry; see cluster/storage.go)
//	0x70    group u64 | 0x02                             Raft hard state (protobuf raftpb.HardState: term, vote, commit)
//	0x70    group u64 | 0x03                             latest Raft snapshot (protobuf raftpb.Snapshot: index, term, conf state, state-machine data)
//	0x70    group u64 | 0x04                             truncated state: index u64 | term u64 of the last entry removed from the log
//	0x70    group u64 | 0x05                             incarnation: u64 random, written when the group's storage is first opened empty
//	0x70    group u64 | 0x06 | index u64                 state row: the state machine's state after applying entry index, the base of a log compacted up to it (partition groups: cluster/partition_logstart.go; version 3 holds each producer's coordinator epoch, versions 1 and 2 read as -1)
//	0x71-7f reserved: cluster (Raft groups)
//
// Raft groups (0x70): group 0 is the metadata group (the controller);
// partition groups will take other IDs. A group's keys are contiguous, so
// one range deletion removes a group. Invariant: the log holds exactly the
// entries (truncated index, last index], with no hole; entries above an
// index that a new leader overwrites are deleted in the same batch that
// writes their replacements.
//
// Dedup hash (0x37, 0x38): SHA-256(dedup_id)[:16], or, for content_dedup,
// SHA-256(0x00 | SHA-256(body))[:16] (a dedup_id never starts with 0x00).
// The entry's body hash is SHA-256(body)[:16]; entries written before it
// existed are 20 bytes without it, and are still read. An entry has at least
// one 0x38 key at or before the time it may be dropped: its window's end, or
// later re-checks while dedup_scope in_queue keeps it for a queued original.
//
// Invariants:
//   - For every 0x10 key there is exactly one 0x11 key with the same suffix,
//     written in the same Pebble batch.
//   - Within one partition, batches are contiguous: the batch after base B
//     starts at last(B)+1, except where compaction has removed whole batches.
//   - Offsets below the partition's log start offset may still have keys while
//     a range deletion is pending; readers never look below the log start.
//   - Segments (0x14) cut a partition's batches into consecutive ranges, the
//     units of retention and compaction (Kafka's log segments): every batch
//     belongs to the segment with the greatest base <= its base, and the
//     last segment is the active one, which appends extend. A segment row
//     sums its batches' index rows and is written in the same Pebble batch
//     as every change to them. Retention deletes whole segments, batches,
//     index rows and segment rows together, with range deletions.
//
// Topic record (0x02): JSON {"name", "partitions", "configs", "owner"}.
// "owner" ("queue", "event-store"; topics/owner.go) marks a topic that a
// broker component manages and Kafka clients may only read; it is absent
// for a plain topic, and a row written before owners existed has none, so
// it reads as a plain topic until its owner marks it at start. Brokers
// before owners ignore the field (JSON decoding skips unknown fields).
//
// Partition state row (0x12), 24 bytes (an 8-byte row holds the log start
// offset alone):
//
//	logStart u64 | cleanerCheckpoint u64 | tombstoneHorizon i64
//
// logStart is the first offset readers may ask for; when retention deletes
// every batch it equals the log end offset, which recovery then takes from
// it. cleanerCheckpoint is the offset below which compaction has cleaned
// (Kafka's cleaner-offset-checkpoint). tombstoneHorizon is the earliest time
// (Unix ms) at which a tombstone or a transaction marker kept by compaction
// may be removed, -1 when none waits.
//
// Producer state row (0x13), version 2 (written since the coordinator epoch
// was added; topics/producer.go):
//
//	version u8 (2) | epoch i16 | coordinatorEpoch i32 | n u8 (0-5) |
//	  n × (firstSeq i32 | lastSeq i32 | baseOffset i64 | offsetDelta i32 | timestamp i64)
//
// coordinatorEpoch is that of the producer's last transaction marker on the
// partition (-1: none); a marker with a lower one is refused (KIP-98,
// TRANSACTION_COORDINATOR_FENCED). Version 1 has no coordinatorEpoch (the
// row is 4 + 28n bytes); it still reads, as -1, which any marker passes.
// The version byte tells them apart, never the length.
//
// Segment row (0x14), 40 bytes:
//
//	lastOffset u64 | size u64 | records u64 | rollTimestamp i64 | maxTimestamp i64
//
// lastOffset is the last offset of its last batch; size and records sum its
// batches' bytes and NumRecords; rollTimestamp is the max timestamp of its
// first batch (segment.ms counts from it); maxTimestamp is the largest batch
// max timestamp (retention.ms counts from it). Timestamps of batches without
// one are the broker's append time.
const (
	PrefixFormat         byte = 0x01
	PrefixTopic          byte = 0x02
	PrefixProducerIDNext byte = 0x03
	PrefixClusterID      byte = 0x04
	PrefixBatch          byte = 0x10
	PrefixBatchIndex     byte = 0x11
	PrefixPartitionState byte = 0x12
	PrefixProducerState  byte = 0x13
	PrefixSegment        byte = 0x14

	// Consumer groups (groups/store.go builds these keys).
	PrefixGroup       byte = 0x20
	PrefixGroupOffset byte = 0x21
	// PrefixConsumerGroupRecord: the latest value of each KIP-848 record
	// of a consumer group (groups/consumer_records.go).
	PrefixConsumerGroupRecord byte = 0x22
	// PrefixShareGroup and PrefixSharePartition: share groups (KIP-932)
	// and their share-partition states (groups/share.go).
	PrefixShareGroup     byte = 0x23
	PrefixSharePartition byte = 0x24
	// PrefixShareGroupConfig: group configs of share groups
	// (groups/share_config.go).
	PrefixShareGroupConfig byte = 0x25
	// PrefixGroupTxnOffset: offsets committed by TxnOffsetCommit for a
	// transaction coordinated elsewhere, pending until its marker
	// (groups/txn_offsets.go).
	PrefixGroupTxnOffset byte = 0x26
	// PrefixGroupTxnCoordEpoch: per partition of __consumer_offsets and
	// producer, the coordinator epoch of the last transaction marker
	// applied there (groups/txn_offsets_fence.go).
	PrefixGroupTxnCoordEpoch byte = 0x27

	// Native queues and dead-letter queues (package queues).
	PrefixQueueName      byte = 0x30
	PrefixQueue          byte = 0x31
	PrefixQueueSingleton byte = 0x32
	PrefixQueueState     byte = 0x33
	PrefixQueueReady     byte = 0x34
	PrefixQueueLease     byte = 0x35
	PrefixQueueExpiry    byte = 0x36
	PrefixQueueDedup     byte = 0x37
	PrefixQueueDedupExp  byte = 0x38
	PrefixQueueRetained  byte = 0x39
	PrefixQueueTask      byte = 0x3a
	PrefixQueueMemo      byte = 0x3b

	// Event store (events/keys.go builds these keys).
	PrefixEventStore       byte = 0x40
	PrefixEventStoreNextID byte = 0x41
	PrefixEventStream      byte = 0x42
	PrefixEventStreamHead  byte = 0x43
	PrefixEventStreamIndex byte = 0x44
	PrefixEventIdempotency byte = 0x45
	PrefixEventTimeIndex   byte = 0x46
	PrefixEventConsumer    byte = 0x47

	// Transactions: coordinator rows (package txns) and the per-partition
	// ongoing-transaction and aborted-transaction rows (package topics).
	PrefixTxn        byte = 0x50
	PrefixTxnOngoing byte = 0x51
	PrefixTxnAborted byte = 0x52

	// Security: SASL/SCRAM credentials (package auth). A credential row
	// holds the salt, the iteration count, StoredKey and ServerKey of
	// RFC 5802, never the password.
	PrefixScramCredential byte = 0x60
	// ACL bindings (package auth): one row per binding, keyed by a hash
	// of its canonical form, so a binding exists at most once and nothing
	// variable-length sits in the key.
	PrefixACL byte = 0x61
	// Client quotas (package auth, KIP-546): one row per quota entity
	// (user, client-id, ip and their defaults), keyed by a hash of the
	// entity's canonical form.
	PrefixClientQuota byte = 0x62

	// Cluster: the Raft groups' logs, hard states and snapshots (package
	// cluster). The kind byte after the group ID is part of the format.
	PrefixRaft byte = 0x70
)

// Kinds of the rows of one Raft group (the byte after the group ID).
const (
	RaftKindEntry     byte = 0x01
	RaftKindHardState byte = 0x02
	RaftKindSnapshot  byte = 0x03
	RaftKindTruncated byte = 0x04
	// RaftKindIncarnation: a random number chosen when the group's
	// storage is first opened empty; a node whose data was wiped comes
	// back with a new one, and its peers can tell.
	RaftKindIncarnation byte = 0x05
	// RaftKindState: a state machine's state at an applied index, from
	// which a log compacted up to that index is replayed (partition
	// groups compact without a Raft snapshot).
	RaftKindState byte = 0x06
)

// RaftKey is the row of one kind of a Raft group (hard state, snapshot,
// truncated state).
func RaftKey(group uint64, kind byte) []byte {
	k := make([]byte, 0, 10)
	k = append(k, PrefixRaft)
	k = binary.BigEndian.AppendUint64(k, group)
	return append(k, kind)
}

// RaftEntryKey is the row of the Raft log entry at index in group.
func RaftEntryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(RaftKey(group, RaftKindEntry), index)
}

// RaftStateKey is the state row of group at applied index.
func RaftStateKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(RaftKey(group, RaftKindState), index)
}

// RaftGroupPrefix bounds every row of one Raft group.
func RaftGroupPrefix(group uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{PrefixRaft}, group)
}

// ClientQuotaKey is the row of one client quota entity, keyed by the first
// 16 bytes of the SHA-256 of its canonical form (auth computes it).
func ClientQuotaKey(hash [16]byte) []byte {
	return append([]byte{PrefixClientQuota}, hash[:]...)
}

// ACLKey is the row of one ACL binding, keyed by the first 16 bytes of the
// SHA-256 of its canonical encoding (auth computes it).
func ACLKey(hash [16]byte) []byte {
	return append([]byte{PrefixACL}, hash[:]...)
}

// ScramCredentialKey is the credential row of one user for one SCRAM
// mechanism (the user name is the whole suffix).
func ScramCredentialKey(mechanism byte, user string) []byte {
	return append([]byte{PrefixScramCredential, mechanism}, user...)
}

// TxnKey is the coordinator row of one transactional ID (the whole suffix).
func TxnKey(transactionalID string) []byte {
	return append([]byte{PrefixTxn}, transactionalID...)
}

// TxnOngoingKey is the row of one producer's ongoing transaction in a partition.
func TxnOngoingKey(id TopicID, partition int32, producerID int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixTxnOngoing, id, partition, 8), uint64(producerID))
}

// TxnAbortedKey is the aborted-transaction index row keyed by the offset of its abort marker.
func TxnAbortedKey(id TopicID, partition int32, markerOffset int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixTxnAborted, id, partition, 8), uint64(markerOffset))
}

// TopicID is a Kafka topic UUID.
type TopicID = [16]byte

// FormatKey is the key of the format version row.
func FormatKey() []byte { return []byte{PrefixFormat, 'f', 'o', 'r', 'm', 'a', 't'} }

// ProducerIDNextKey is the key of the next-producer-ID counter.
func ProducerIDNextKey() []byte {
	return append([]byte{PrefixProducerIDNext}, "producer-id"...)
}

// ClusterIDKey is the key of the cluster ID row.
func ClusterIDKey() []byte { return append([]byte{PrefixClusterID}, "cluster-id"...) }

// TopicKey is the catalog row of one topic.
func TopicKey(id TopicID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, PrefixTopic)
	return append(k, id[:]...)
}

// TopicPrefix bounds the whole topic catalog.
func TopicPrefix() []byte { return []byte{PrefixTopic} }

func partitionKey(prefix byte, id TopicID, partition int32, extra int) []byte {
	k := make([]byte, 0, 21+extra)
	k = append(k, prefix)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

// BatchKey is the key of the stored batch whose base offset is base.
func BatchKey(id TopicID, partition int32, base int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixBatch, id, partition, 8), uint64(base))
}

// BatchIndexKey is the key of the index row of the batch at base.
func BatchIndexKey(id TopicID, partition int32, base int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixBatchIndex, id, partition, 8), uint64(base))
}

// PartitionPrefix returns the prefix shared by every key of one partition in
// the table named by prefix (PrefixBatch, PrefixBatchIndex, PrefixProducerState).
func PartitionPrefix(prefix byte, id TopicID, partition int32) []byte {
	return partitionKey(prefix, id, partition, 0)
}

// TopicTablePrefix returns the prefix of every key of one topic in one table.
func TopicTablePrefix(prefix byte, id TopicID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, prefix)
	return append(k, id[:]...)
}

// PartitionStateKey is the key of a partition's state row.
func PartitionStateKey(id TopicID, partition int32) []byte {
	return partitionKey(PrefixPartitionState, id, partition, 0)
}

// SegmentKey is the key of the summary row of the segment starting at base.
func SegmentKey(id TopicID, partition int32, base int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixSegment, id, partition, 8), uint64(base))
}

// ProducerStateKey is the key of one producer's state in one partition.
func ProducerStateKey(id TopicID, partition int32, producerID int64) []byte {
	return binary.BigEndian.AppendUint64(partitionKey(PrefixProducerState, id, partition, 8), uint64(producerID))
}

// OffsetFromKey returns the trailing u64 of a batch, index or producer key.
func OffsetFromKey(key []byte) int64 {
	if len(key) < 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(key[len(key)-8:]))
}

// PrefixEnd returns the smallest key greater than every key with the prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// RaftIndexFromKey returns the index of a Raft log entry key.
func RaftIndexFromKey(key []byte) uint64 {
	if len(key) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(key)-8:])
}
