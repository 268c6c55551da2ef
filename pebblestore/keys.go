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
//	0x02    topicID [16]                                 topic record (JSON: name, partitions, configs)
//	0x03    "producer-id"                                u64 next unallocated producer ID
//	0x04    "cluster-id"                                 cluster ID string, chosen at first boot
//	0x10    topicID [16] | partition u32 | base u64      raw Kafka v2 RecordBatch, as stored
//	0x11    topicID [16] | partition u32 | base u64      batch index: last offset u64 | max timestamp i64 | size u32
//	0x12    topicID [16] | partition u32                 partition state: log start offset u64
//	0x13    topicID [16] | partition u32 | producer u64  idempotent producer state (see topics/producer.go)
//	0x20-2f reserved: consumer groups
//	0x30-3f reserved: native queues and dead letters
//	0x40-4f reserved: event store
//	0x50-5f reserved: transactions
//
// Invariants:
//   - For every 0x10 key there is exactly one 0x11 key with the same suffix,
//     written in the same Pebble batch.
//   - Within one partition, batches are contiguous: the batch after base B
//     starts at last(B)+1, except where compaction has removed whole batches.
//   - Offsets below the partition's log start offset may still have keys while
//     a range deletion is pending; readers never look below the log start.
const (
	PrefixFormat         byte = 0x01
	PrefixTopic          byte = 0x02
	PrefixProducerIDNext byte = 0x03
	PrefixClusterID      byte = 0x04
	PrefixBatch          byte = 0x10
	PrefixBatchIndex     byte = 0x11
	PrefixPartitionState byte = 0x12
	PrefixProducerState  byte = 0x13
)

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
