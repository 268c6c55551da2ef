package topics

// Legacy message sets: the record formats before the v2 RecordBatch (KIP-98),
// still sent by clients pinned to Kafka 0.8-0.10 (sarama before 1.32 by
// default, kafka-python with an old api_version, librdkafka with
// broker.version.fallback below 0.11). The log stores only v2 batches: a
// Produce v0-v2 request's message set is converted up to one v2 batch
// (UpconvertMessageSet), and a Fetch v0-v3 response converts the stored
// batches down (DownconvertBatches), as Apache Kafka did before KIP-896
// removed those versions in 4.0.
//
// A message set is a sequence of messages, each:
//
//	offset size field
//	     0    8 Offset       ignored on produce; inner offsets of a
//	                         compressed magic-1 wrapper are relative (KIP-31)
//	     8    4 MessageSize  bytes that follow
//	    12    4 CRC          CRC-32 (IEEE) of bytes [16:end]
//	    16    1 Magic        0 or 1
//	    17    1 Attributes   bits 0-2 codec, bit 3 LogAppendTime (magic 1)
//	    18    8 Timestamp    magic 1 only (KIP-32)
//	    ..    4+n Key        length -1 = null
//	    ..    4+n Value      length -1 = null; a compressed wrapper's value
//	                         is the compressed inner message set

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

const (
	legacyLogOverhead = 12 // Offset and MessageSize
	// legacyHeaderSizeV0 is CRC, Magic, Attributes, and the key and value
	// lengths: the smallest magic-0 message body.
	legacyHeaderSizeV0 = 4 + 1 + 1 + 4 + 4
	// legacyHeaderSizeV1 adds the timestamp.
	legacyHeaderSizeV1           = legacyHeaderSizeV0 + 8
	legacyTimestampLogAppendTime = 0x08
)

// legacyMessage is one decoded message of a message set.
type legacyMessage struct {
	magic      int8
	attributes int8
	timestamp  int64 // -1 for magic 0
	key, value []byte
}

// UpconvertMessageSet converts a Produce v0-v2 message set into one v2
// batch with no producer ID, as Kafka's log validator did for a v2 log. The
// batch keeps the codec of the first compressed wrapper (none if there is
// none); the messages of several wrappers and plain messages become its
// records in order. Magic-1 timestamps are kept; magic-0 messages, which have
// none, get now (Kafka wrote NO_TIMESTAMP, which time-based retention and
// ListOffsets by time cannot use).
//
// Errors: a bad CRC or length, an undecodable compressed value and a wrapper
// inside a wrapper wrap ErrCorruptMessage; a magic other than 0 and 1 (a v2
// batch in an old request: Kafka refused it the same way) or an empty set
// ErrInvalidRecord; codec 4 (zstd needs magic 2) and 5-7
// ErrUnsupportedCompression.
func UpconvertMessageSet(set []byte, now time.Time) ([]byte, error) {
	var records []Record
	codec := CodecNone
	nowMillis := now.UnixMilli()
	add := func(m legacyMessage) {
		ts := m.timestamp
		if m.magic == 0 || ts < 0 {
			ts = nowMillis
		}
		records = append(records, Record{TimestampDelta: ts, Key: m.key, Value: m.value})
	}
	err := legacyForEach(set, func(m legacyMessage) error {
		c := Codec(m.attributes & batchAttributeCodecMask)
		if c == CodecNone {
			add(m)
			return nil
		}
		if c == CodecZstd || !c.Known() {
			return fmt.Errorf("%w: codec id %d in a magic %d message (zstd needs the v2 batch format)", ErrUnsupportedCompression, int8(c), m.magic)
		}
		if codec == CodecNone {
			codec = c
		}
		inner, err := Decompress(c, m.value)
		if err != nil {
			return err
		}
		n := 0
		err = legacyForEach(inner, func(im legacyMessage) error {
			if im.attributes&batchAttributeCodecMask != 0 {
				return fmt.Errorf("%w: a compressed message inside a compressed message", ErrCorruptMessage)
			}
			if m.magic == 1 && m.attributes&legacyTimestampLogAppendTime != 0 {
				im.timestamp = m.timestamp
			}
			add(im)
			n++
			return nil
		})
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: a compressed message holds no messages", ErrCorruptMessage)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: the message set holds no messages", ErrInvalidRecord)
	}
	base, maxTS := records[0].TimestampDelta, records[0].TimestampDelta
	for i := range records {
		ts := records[i].TimestampDelta
		maxTS = max(maxTS, ts)
		records[i].TimestampDelta = ts - base
		records[i].OffsetDelta = int32(i)
	}
	return EncodeBatch(BatchHeader{
		PartitionLeaderEpoch: -1,
		Attributes:           int16(codec),
		BaseTimestamp:        base,
		MaxTimestamp:         maxTS,
		ProducerID:           batchNoProducerID,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}, records)
}

// legacyForEach decodes every message of set in order and calls fn with
// it. Key and value alias set.
func legacyForEach(set []byte, fn func(legacyMessage) error) error {
	for pos := 0; pos < len(set); {
		if len(set)-pos < legacyLogOverhead {
			return fmt.Errorf("%w: %d bytes after the last message are too few for a message", ErrCorruptMessage, len(set)-pos)
		}
		size := int(int32(binary.BigEndian.Uint32(set[pos+8:])))
		body := set[pos+legacyLogOverhead:]
		if size < legacyHeaderSizeV0 || size > len(body) {
			return fmt.Errorf("%w: message at byte %d declares %d bytes; %d follow", ErrCorruptMessage, pos, size, len(body))
		}
		body = body[:size]
		m, err := legacyDecode(body)
		if err != nil {
			return fmt.Errorf("message at byte %d: %w", pos, err)
		}
		if err := fn(m); err != nil {
			return err
		}
		pos += legacyLogOverhead + size
	}
	return nil
}

// legacyDecode decodes one message body (from its CRC to its end).
func legacyDecode(body []byte) (legacyMessage, error) {
	m := legacyMessage{magic: int8(body[4]), attributes: int8(body[5]), timestamp: -1}
	switch m.magic {
	case 0, 1:
	case 2:
		return m, fmt.Errorf("%w: a v2 record batch needs Produce v3 or later (KIP-98)", ErrInvalidRecord)
	default:
		return m, fmt.Errorf("%w: magic %d; message sets have magic 0 or 1", ErrInvalidRecord, m.magic)
	}
	if crc := binary.BigEndian.Uint32(body); crc != crc32.ChecksumIEEE(body[4:]) {
		return m, fmt.Errorf("%w: CRC mismatch", ErrCorruptMessage)
	}
	pos := 6
	if m.magic == 1 {
		if len(body) < legacyHeaderSizeV1 {
			return m, fmt.Errorf("%w: a magic 1 message of %d bytes is too short", ErrCorruptMessage, len(body))
		}
		m.timestamp = int64(binary.BigEndian.Uint64(body[pos:]))
		pos += 8
	}
	var ok bool
	if m.key, pos, ok = legacyBytes(body, pos); !ok {
		return m, fmt.Errorf("%w: bad key length", ErrCorruptMessage)
	}
	if m.value, pos, ok = legacyBytes(body, pos); !ok {
		return m, fmt.Errorf("%w: bad value length", ErrCorruptMessage)
	}
	if pos != len(body) {
		return m, fmt.Errorf("%w: %d bytes follow the value", ErrCorruptMessage, len(body)-pos)
	}
	return m, nil
}

// legacyBytes reads a nullable int32-length byte field at pos.
func legacyBytes(b []byte, pos int) ([]byte, int, bool) {
	if len(b)-pos < 4 {
		return nil, pos, false
	}
	n := int(int32(binary.BigEndian.Uint32(b[pos:])))
	pos += 4
	if n == -1 {
		return nil, pos, true
	}
	if n < 0 || n > len(b)-pos {
		return nil, pos, false
	}
	return b[pos : pos+n : pos+n], pos + n, true
}

// DownconvertBatches appends to dst the records of the v2 batches in
// batches (whole batches, as a read returns them; anything else fails with
// ErrCorruptMessage) as an uncompressed
// message set of the given magic (0 for Fetch v0-v1, 1 for v2-v3), as Kafka
// down-converted for old consumers: records below from are left out
// (a batch starts before the fetch offset), control batches are left out,
// headers are dropped (no place for them before magic 2), a LogAppendTime
// batch's records carry its MaxTimestamp with the attribute set. Compressed
// batches are decompressed: a message of an old format is never larger than
// its record by more than its fixed header, but the set may be larger than
// the compressed batches were.
//
// limit bounds the set: once it holds a message, a message that would take
// it past limit stops the conversion (the client fetches the rest from the
// next offset). It returns dst and the offset after the last message
// appended (from when none).
func DownconvertBatches(dst, batches []byte, magic int8, from int64, limit int) ([]byte, int64, error) {
	start := len(dst)
	next := from
	for pos := 0; pos < len(batches); {
		h, err := ParseBatchHeader(batches[pos:])
		if err != nil {
			return dst, next, err
		}
		end := pos + h.Size()
		batch := batches[pos:end]
		pos = end
		if h.IsControl() {
			continue
		}
		_, records, err := DecodeRecords(batch)
		if err != nil {
			return dst, next, err
		}
		for i := range records {
			r := &records[i]
			offset := h.BaseOffset + int64(r.OffsetDelta)
			if offset < from {
				continue
			}
			ts := h.BaseTimestamp + r.TimestampDelta
			var attrs int8
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
				attrs = legacyTimestampLogAppendTime
			}
			size := legacyHeaderSizeV0 + len(r.Key) + len(r.Value)
			if magic == 1 {
				size += 8
			} else {
				attrs = 0
			}
			if len(dst) > start && len(dst)-start+legacyLogOverhead+size > limit {
				return dst, next, nil
			}
			dst = legacyAppend(dst, offset, legacyMessage{magic: magic, attributes: attrs, timestamp: ts, key: r.Key, value: r.Value})
			next = offset + 1
		}
	}
	return dst, next, nil
}

// legacyAppend appends m at offset to dst (its timestamp only for magic 1).
func legacyAppend(dst []byte, offset int64, m legacyMessage) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	sizeAt := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // size, set below
	crcAt := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, set below
	dst = append(dst, byte(m.magic), byte(m.attributes))
	if m.magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(m.timestamp))
	}
	for _, b := range [][]byte{m.key, m.value} {
		if b == nil {
			dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
		dst = append(dst, b...)
	}
	binary.BigEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-crcAt))
	binary.BigEndian.PutUint32(dst[crcAt:], crc32.ChecksumIEEE(dst[crcAt+4:]))
	return dst
}
