package queues

import (
	"encoding/binary"

	"github.com/vibemq/broker/pebblestore"
)

// Key builders for the queue tables 0x30-0x3b. The layouts are documented
// in pebblestore/keys.go and are part of the file format.

// msgKey names one message of a queue: its partition and offset.
type msgKey struct {
	part int32
	off  int64
}

func queueNameKey(name string) []byte {
	return append([]byte{pebblestore.PrefixQueueName}, name...)
}

func queueKey(qid uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{pebblestore.PrefixQueue}, qid)
}

func singletonKey(name string) []byte {
	return append([]byte{pebblestore.PrefixQueueSingleton}, name...)
}

func tablePrefix(prefix byte, qid uint32) []byte {
	k := make([]byte, 5, 34)
	k[0] = prefix
	binary.BigEndian.PutUint32(k[1:], qid)
	return k
}

func appendMsg(k []byte, m msgKey) []byte {
	k = binary.BigEndian.AppendUint32(k, uint32(m.part))
	return binary.BigEndian.AppendUint64(k, uint64(m.off))
}

func stateKey(qid uint32, m msgKey) []byte {
	return appendMsg(tablePrefix(pebblestore.PrefixQueueState, qid), m)
}

// band orders priorities: band 255 - priority, so higher priorities sort first.
func readyBandPrefix(qid uint32, priority uint8) []byte {
	return append(tablePrefix(pebblestore.PrefixQueueReady, qid), 255-priority)
}

func readyKey(qid uint32, priority uint8, due int64, m msgKey) []byte {
	k := readyBandPrefix(qid, priority)
	k = binary.BigEndian.AppendUint64(k, uint64(max(due, 0)))
	return appendMsg(k, m)
}

func leaseKey(qid uint32, deadline int64, m msgKey) []byte {
	k := binary.BigEndian.AppendUint64(tablePrefix(pebblestore.PrefixQueueLease, qid), uint64(max(deadline, 0)))
	return appendMsg(k, m)
}

func expiryKey(qid uint32, expireAt int64, m msgKey) []byte {
	k := binary.BigEndian.AppendUint64(tablePrefix(pebblestore.PrefixQueueExpiry, qid), uint64(max(expireAt, 0)))
	return appendMsg(k, m)
}

func retainedKey(qid uint32, done int64, m msgKey) []byte {
	k := binary.BigEndian.AppendUint64(tablePrefix(pebblestore.PrefixQueueRetained, qid), uint64(max(done, 0)))
	return appendMsg(k, m)
}

func dedupKey(qid uint32, hash [16]byte) []byte {
	return append(tablePrefix(pebblestore.PrefixQueueDedup, qid), hash[:]...)
}

func dedupExpiryKey(qid uint32, expires int64, hash [16]byte) []byte {
	k := binary.BigEndian.AppendUint64(tablePrefix(pebblestore.PrefixQueueDedupExp, qid), uint64(max(expires, 0)))
	return append(k, hash[:]...)
}

func memoKey(qid uint32, requestID string) []byte {
	return append(tablePrefix(pebblestore.PrefixQueueMemo, qid), requestID...)
}

func taskKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pebblestore.PrefixQueueTask}, id)
}

// msgFromKeyTail decodes the trailing part u32 | offset u64 of a key.
func msgFromKeyTail(k []byte) msgKey {
	n := len(k)
	if n < 12 {
		return msgKey{-1, -1}
	}
	return msgKey{part: int32(binary.BigEndian.Uint32(k[n-12:])), off: int64(binary.BigEndian.Uint64(k[n-8:]))}
}

// u64At decodes the big-endian u64 at k[i:].
func u64At(k []byte, i int) int64 {
	if len(k) < i+8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k[i:]))
}

// perQueueTables are the tables whose keys start with a queue ID.
var perQueueTables = []byte{
	pebblestore.PrefixQueueState, pebblestore.PrefixQueueReady, pebblestore.PrefixQueueLease,
	pebblestore.PrefixQueueExpiry, pebblestore.PrefixQueueDedup, pebblestore.PrefixQueueDedupExp,
	pebblestore.PrefixQueueRetained, pebblestore.PrefixQueueMemo,
}

// deliveryTables are the per-queue tables that purge clears (dedup entries
// outlive a purge, as SQS keeps tracking ids after deletes).
var deliveryTables = []byte{
	pebblestore.PrefixQueueState, pebblestore.PrefixQueueReady, pebblestore.PrefixQueueLease,
	pebblestore.PrefixQueueExpiry, pebblestore.PrefixQueueRetained, pebblestore.PrefixQueueMemo,
}
