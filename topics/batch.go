package topics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// BatchHeaderSize is the size of a Kafka v2 RecordBatch header (KIP-98).
// Byte offsets of its fields, all big-endian:
//
//	offset size field
//	     0    8 BaseOffset
//	     8    4 BatchLength           bytes after this field: batch size - 12
//	    12    4 PartitionLeaderEpoch  not covered by the CRC
//	    16    1 Magic                 2
//	    17    4 CRC                   CRC-32C (Castagnoli) of bytes [21:end]
//	    21    2 Attributes            bits 0-2 codec, 3 LogAppendTime,
//	                                  4 transactional, 5 control, 6 delete horizon
//	    23    4 LastOffsetDelta
//	    27    8 BaseTimestamp
//	    35    8 MaxTimestamp
//	    43    8 ProducerID            -1 when not idempotent
//	    51    2 ProducerEpoch
//	    53    4 BaseSequence
//	    57    4 NumRecords
//	    61      records, compressed as a whole when the codec is not none
//
// Each record is: length varint (bytes that follow), attributes int8,
// timestampDelta varlong, offsetDelta varint, key length varint (-1 = null),
// key, value length varint (-1 = null), value, header count varint, then per
// header: key length varint, key, value length varint (-1 = null), value.
// Varints are zigzag encoded; a varint is at most 5 bytes, a varlong 10.
const BatchHeaderSize = 61

const (
	batchLengthOffset               = 8
	batchPartitionLeaderEpochOffset = 12
	batchMagicOffset                = 16
	batchCRCOffset                  = 17
	batchAttributesOffset           = 21
	batchLastOffsetDeltaOffset      = 23
	batchBaseTimestampOffset        = 27
	batchMaxTimestampOffset         = 35
	batchProducerIDOffset           = 43
	batchProducerEpochOffset        = 51
	batchBaseSequenceOffset         = 53
	batchNumRecordsOffset           = 57

	// batchLogOverhead is the BaseOffset and BatchLength fields, which
	// BatchLength does not count.
	batchLogOverhead = 12
	// batchLengthMin is the BatchLength of a batch with no records.
	batchLengthMin = BatchHeaderSize - batchLogOverhead
	// batchMagic is the only RecordBatch format this package handles.
	batchMagic = 2
	// batchRecordBytesMin is the smallest encoded record: length,
	// attributes, timestamp delta, offset delta, key length, value length
	// and header count, one byte each.
	batchRecordBytesMin = 7
	// batchNoProducerID is the ProducerID of a non-idempotent batch.
	batchNoProducerID = -1

	batchAttributeCodecMask     = 0x07
	batchAttributeLogAppendTime = 0x08
	batchAttributeTransactional = 0x10
	batchAttributeControl       = 0x20
	batchAttributeDeleteHorizon = 0x40
)

var batchCRCTable = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Every error from this file wraps exactly one of them
// with %w and adds a sentence saying what is wrong; each maps to the Kafka
// error code of the same name.
var (
	// ErrCorruptMessage: the bytes are damaged (CRC mismatch, impossible
	// length, undecodable compressed data). Kafka CORRUPT_MESSAGE.
	ErrCorruptMessage = errors.New("topics: corrupt message")
	// ErrInvalidRecord: the batch is intact but breaks a rule (record count,
	// offset deltas, control bit, missing key on a compacted topic, record
	// structure). Kafka INVALID_RECORD.
	ErrInvalidRecord = errors.New("topics: invalid record")
	// ErrMessageTooLarge: the batch is larger than max.message.bytes.
	// Kafka MESSAGE_TOO_LARGE.
	ErrMessageTooLarge = errors.New("topics: message too large")
	// ErrUnsupportedCompression: codec id 5-7. Kafka
	// UNSUPPORTED_COMPRESSION_TYPE.
	ErrUnsupportedCompression = errors.New("topics: unsupported compression type")
	// ErrUnsupportedMessageFormat: magic other than 2. Kafka
	// UNSUPPORTED_FOR_MESSAGE_FORMAT.
	ErrUnsupportedMessageFormat = errors.New("topics: unsupported message format")
)

// BatchHeader is the decoded 61-byte header of a v2 RecordBatch. Field names
// follow the Kafka protocol.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Codec returns the compression codec of the records (attribute bits 0-2).
func (h BatchHeader) Codec() Codec { return Codec(h.Attributes & batchAttributeCodecMask) }

// LogAppendTime reports whether the batch timestamps are the broker's append
// time rather than the producer's create time (attribute bit 3).
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&batchAttributeLogAppendTime != 0 }

// IsTransactional reports whether the batch is part of a transaction
// (attribute bit 4).
func (h BatchHeader) IsTransactional() bool { return h.Attributes&batchAttributeTransactional != 0 }

// IsControl reports whether the batch holds a control record (transaction
// marker, attribute bit 5). Only the broker writes control batches.
func (h BatchHeader) IsControl() bool { return h.Attributes&batchAttributeControl != 0 }

// HasDeleteHorizon reports whether compaction has stamped the batch with a
// delete horizon (attribute bit 6, KIP-534); the horizon is then its
// BaseTimestamp.
func (h BatchHeader) HasDeleteHorizon() bool { return h.Attributes&batchAttributeDeleteHorizon != 0 }

// LastOffset is the offset of the last record the batch covers.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the number of bytes of the whole batch, header included.
func (h BatchHeader) Size() int { return int(h.BatchLength) + batchLogOverhead }

// ParseBatchHeader decodes the header of the batch at the start of b. It
// checks only that b holds the header, that BatchLength is at least 49 (a
// batch without records) and that b holds the Size() bytes BatchLength
// declares; it does not check the magic or the CRC. b may hold more batches
// after the first. Errors wrap ErrCorruptMessage. It never panics.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes are too few for a %d-byte batch header", ErrCorruptMessage, len(b), BatchHeaderSize)
	}
	h := batchDecodeHeader(b)
	if h.BatchLength < batchLengthMin {
		return h, fmt.Errorf("%w: batch length %d is below the minimum %d", ErrCorruptMessage, h.BatchLength, batchLengthMin)
	}
	if int64(len(b)) < int64(h.BatchLength)+batchLogOverhead {
		return h, fmt.Errorf("%w: batch length %d needs %d bytes but only %d remain", ErrCorruptMessage, h.BatchLength, int64(h.BatchLength)+batchLogOverhead, len(b))
	}
	return h, nil
}

// batchDecodeHeader decodes the header fields without checking them.
// REQUIRES: len(b) >= BatchHeaderSize.
func batchDecodeHeader(b []byte) BatchHeader {
	_ = b[BatchHeaderSize-1]
	return BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[0:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[batchLengthOffset:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[batchPartitionLeaderEpochOffset:])),
		Magic:                int8(b[batchMagicOffset]),
		CRC:                  binary.BigEndian.Uint32(b[batchCRCOffset:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[batchAttributesOffset:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[batchLastOffsetDeltaOffset:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[batchBaseTimestampOffset:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[batchMaxTimestampOffset:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[batchProducerIDOffset:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[batchProducerEpochOffset:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[batchBaseSequenceOffset:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[batchNumRecordsOffset:])),
	}
}

// batchCheckCRC verifies the CRC-32C of the whole batch b.
// REQUIRES: len(b) >= BatchHeaderSize and h decoded from b.
func batchCheckCRC(b []byte, h *BatchHeader) error {
	if crc := crc32.Checksum(b[batchAttributesOffset:], batchCRCTable); crc != h.CRC {
		return fmt.Errorf("%w: batch CRC is 0x%08x but its bytes sum to 0x%08x", ErrCorruptMessage, h.CRC, crc)
	}
	return nil
}

// ValidateOptions are the topic settings ValidateBatch enforces.
type ValidateOptions struct {
	// MaxBatchBytes is the topic's max.message.bytes: the largest batch
	// accepted, header included. 0 means no limit.
	MaxBatchBytes int
	// RequireKeys refuses records with a null key (compacted topics).
	RequireKeys bool
	// CheckTimestamps requires the timestamp of every record (the base
	// timestamp plus its delta; -1 means none and is not checked) to lie in
	// [MinTimestamp, MaxTimestamp]: Kafka's message.timestamp.before.max.ms
	// and after.max.ms on CreateTime topics (ErrInvalidTimestamp).
	CheckTimestamps            bool
	MinTimestamp, MaxTimestamp int64
}

// ValidateBatch checks the records field of one partition of a Produce
// request (v3+) as Kafka's ProduceRequest.validateRecords and LogValidator do
// for magic 2, and returns the batch header. b must be exactly one batch:
//
//   - fewer bytes than a batch needs, or more than one whole batch:
//     ErrInvalidRecord; trailing bytes that are not a batch, BatchLength
//     below 49: ErrCorruptMessage;
//   - magic other than 2: ErrUnsupportedMessageFormat;
//   - larger than opts.MaxBatchBytes: ErrMessageTooLarge;
//   - CRC-32C of bytes [21:] differs from the CRC field: ErrCorruptMessage;
//   - NumRecords < 1, LastOffsetDelta != NumRecords-1, the control bit set,
//     a producer ID without a base sequence: ErrInvalidRecord;
//   - codec 5-7: ErrUnsupportedCompression; compressed records that do not
//     decompress, or decompress beyond the limit in codecDecompressedLimit:
//     ErrCorruptMessage;
//   - records that do not decode (bad varints, negative or overlong
//     lengths, bytes left inside a record), offset deltas other than
//     0..NumRecords-1 in order, a record count other than NumRecords, bytes
//     after the last record, a null key when opts.RequireKeys: ErrInvalidRecord;
//   - with opts.CheckTimestamps, a record timestamp outside the bounds:
//     ErrInvalidTimestamp.
//
// Timestamps unless asked, the base offset (Kafka wants 0 from clients; the
// broker overwrites it anyway) and producer state are not checked here.
//
// Uncompressed batches are walked in place without allocating; compressed
// ones are decompressed into a pooled buffer. ValidateBatch never panics and
// does not modify or retain b.
func ValidateBatch(b []byte, opts ValidateOptions) (BatchHeader, error) {
	if len(b) < batchMagicOffset+1 {
		return BatchHeader{}, fmt.Errorf("%w: records hold %d bytes, too few to begin a batch", ErrInvalidRecord, len(b))
	}
	if magic := int8(b[batchMagicOffset]); magic > batchMagic {
		// Kafka answers CORRUPT_MESSAGE for a magic it has never defined.
		return BatchHeader{}, fmt.Errorf("%w: batch magic is %d; only magic 2 (RecordBatch, Kafka 0.11+) exists", ErrCorruptMessage, magic)
	} else if magic != batchMagic {
		return BatchHeader{}, fmt.Errorf("%w: batch magic is %d; only magic 2 (RecordBatch, Kafka 0.11+) is supported", ErrUnsupportedMessageFormat, magic)
	}
	length := int32(binary.BigEndian.Uint32(b[batchLengthOffset:]))
	if length < batchLengthMin {
		return BatchHeader{}, fmt.Errorf("%w: batch length %d is below the minimum %d", ErrCorruptMessage, length, batchLengthMin)
	}
	size := int64(length) + batchLogOverhead
	if int64(len(b)) < size {
		return BatchHeader{}, fmt.Errorf("%w: batch length %d says the batch is %d bytes but the records hold only %d", ErrInvalidRecord, length, size, len(b))
	}
	if int64(len(b)) > size {
		rest := b[size:]
		if batchIsWhole(rest) {
			return BatchHeader{}, fmt.Errorf("%w: records hold more than one batch; a produce request carries exactly one per partition", ErrInvalidRecord)
		}
		return BatchHeader{}, fmt.Errorf("%w: %d bytes follow the %d-byte batch", ErrCorruptMessage, len(rest), size)
	}
	if opts.MaxBatchBytes > 0 && size > int64(opts.MaxBatchBytes) {
		return BatchHeader{}, fmt.Errorf("%w: batch is %d bytes, above the topic's max.message.bytes %d", ErrMessageTooLarge, size, opts.MaxBatchBytes)
	}
	h := batchDecodeHeader(b)
	if err := batchCheckCRC(b, &h); err != nil {
		return h, err
	}
	if h.NumRecords < 1 {
		return h, fmt.Errorf("%w: batch declares %d records; a produced batch needs at least one", ErrInvalidRecord, h.NumRecords)
	}
	if int64(h.LastOffsetDelta) != int64(h.NumRecords)-1 {
		return h, fmt.Errorf("%w: last offset delta %d does not match the %d records declared", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	}
	if h.IsControl() {
		return h, fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	}
	if h.ProducerID > batchNoProducerID && h.BaseSequence < 0 {
		return h, fmt.Errorf("%w: batch has producer ID %d but base sequence %d", ErrInvalidRecord, h.ProducerID, h.BaseSequence)
	}
	payload := b[BatchHeaderSize:]
	codec := h.Codec()
	if codec == CodecNone {
		return h, batchValidateRecords(payload, &h, opts)
	}
	if !codec.Known() {
		return h, fmt.Errorf("%w: codec id %d", ErrUnsupportedCompression, int8(codec))
	}
	buf := codecGetBuffer()
	raw, err := codecDecompressAppend((*buf)[:0], codec, payload)
	if err == nil {
		err = batchValidateRecords(raw, &h, opts)
	}
	codecPutBuffer(buf, raw)
	return h, err
}

// batchIsWhole reports whether b starts with a complete batch as Kafka's
// ByteBufferLogInputStream frames one (length, magic in range, all bytes
// present), so that trailing bytes can be told apart from a second batch.
func batchIsWhole(b []byte) bool {
	if len(b) <= batchMagicOffset {
		return false
	}
	length := int32(binary.BigEndian.Uint32(b[batchLengthOffset:]))
	magic := int8(b[batchMagicOffset])
	return length >= 14 && magic >= 0 && magic <= batchMagic && int64(len(b)) >= int64(length)+batchLogOverhead
}

// batchValidateRecords walks the h.NumRecords records in raw, requiring
// offset deltas 0..NumRecords-1 and nothing after the last record.
func batchValidateRecords(raw []byte, h *BatchHeader, opts ValidateOptions) error {
	pos := 0
	for i := range h.NumRecords {
		if pos == len(raw) {
			return fmt.Errorf("%w: batch declares %d records but holds %d", ErrInvalidRecord, h.NumRecords, i)
		}
		r, n, err := batchNextRecord(raw[pos:], i)
		if err != nil {
			return err
		}
		if r.offsetDelta != i {
			return fmt.Errorf("%w: record %d has offset delta %d; want %d", ErrInvalidRecord, i, r.offsetDelta, i)
		}
		if opts.RequireKeys && r.key == nil {
			return fmt.Errorf("%w: record %d has a null key; compacted topics need a key on every record", ErrInvalidRecord, i)
		}
		if opts.CheckTimestamps {
			if ts := h.BaseTimestamp + r.timestampDelta; ts != -1 && (ts < opts.MinTimestamp || ts > opts.MaxTimestamp) {
				return fmt.Errorf("%w: timestamp %d of record %d is out of range; the timestamp should be within [%d, %d]",
					ErrInvalidTimestamp, ts, i, opts.MinTimestamp, opts.MaxTimestamp)
			}
		}
		pos += n
	}
	if pos != len(raw) {
		return fmt.Errorf("%w: %d bytes follow the last of the %d records", ErrInvalidRecord, len(raw)-pos, h.NumRecords)
	}
	return nil
}

// batchRecordView is one record decoded in place: key, value and headers
// alias the bytes it was decoded from.
type batchRecordView struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key            []byte // nil when null
	value          []byte // nil when null
	headerCount    int32
	headers        []byte // headerCount encoded headers, already checked
}

// batchNextRecord decodes the record at the start of raw, the index-th of its
// batch (for messages), and returns it with the number of bytes it takes.
// Every length is checked against the bytes left before it is used, so a
// hostile record cannot cause a large allocation or a panic.
func batchNextRecord(raw []byte, index int32) (batchRecordView, int, error) {
	var r batchRecordView
	length, n := batchVarint(raw)
	if n <= 0 {
		return r, 0, batchRecordError(index, "length is not a valid varint")
	}
	if length < 0 {
		return r, 0, fmt.Errorf("%w: record %d has negative length %d", ErrInvalidRecord, index, length)
	}
	if int(length) > len(raw)-n {
		return r, 0, fmt.Errorf("%w: record %d has length %d but only %d bytes remain", ErrInvalidRecord, index, length, len(raw)-n)
	}
	body := raw[n : n+int(length)]
	if len(body) < batchRecordBytesMin-1 {
		return r, 0, fmt.Errorf("%w: record %d is %d bytes, too short for its fields", ErrInvalidRecord, index, len(body))
	}
	r.attributes = int8(body[0])
	pos := 1
	timestampDelta, m := binary.Varint(body[pos:])
	if m <= 0 {
		return r, 0, batchRecordError(index, "timestamp delta is not a valid varlong")
	}
	r.timestampDelta = timestampDelta
	pos += m
	offsetDelta, m := batchVarint(body[pos:])
	if m <= 0 {
		return r, 0, batchRecordError(index, "offset delta is not a valid varint")
	}
	r.offsetDelta = offsetDelta
	pos += m
	var err error
	if r.key, pos, err = batchNullableBytes(body, pos, index, "key"); err != nil {
		return r, 0, err
	}
	if r.value, pos, err = batchNullableBytes(body, pos, index, "value"); err != nil {
		return r, 0, err
	}
	count, m := batchVarint(body[pos:])
	if m <= 0 {
		return r, 0, batchRecordError(index, "header count is not a valid varint")
	}
	pos += m
	// Each header takes at least two bytes (two one-byte lengths).
	if count < 0 || int(count) > (len(body)-pos)/2 {
		return r, 0, fmt.Errorf("%w: record %d declares %d headers in %d bytes", ErrInvalidRecord, index, count, len(body)-pos)
	}
	headersStart := pos
	for range count {
		keyLength, m := batchVarint(body[pos:])
		if m <= 0 {
			return r, 0, batchRecordError(index, "header key length is not a valid varint")
		}
		pos += m
		if keyLength < 0 || int(keyLength) > len(body)-pos {
			return r, 0, fmt.Errorf("%w: record %d has header key length %d with %d bytes left", ErrInvalidRecord, index, keyLength, len(body)-pos)
		}
		pos += int(keyLength)
		if _, pos, err = batchNullableBytes(body, pos, index, "header value"); err != nil {
			return r, 0, err
		}
	}
	r.headerCount = count
	r.headers = body[headersStart:pos]
	if pos != len(body) {
		return r, 0, fmt.Errorf("%w: record %d has %d bytes after its last header", ErrInvalidRecord, index, len(body)-pos)
	}
	return r, n + int(length), nil
}

// batchNullableBytes decodes a varint length (-1 = null) and that many bytes
// from body at pos, returning them and the position after them. A present
// but empty field is a non-nil empty slice.
func batchNullableBytes(body []byte, pos int, index int32, field string) ([]byte, int, error) {
	length, m := batchVarint(body[pos:])
	if m <= 0 {
		return nil, pos, batchRecordError(index, field+" length is not a valid varint")
	}
	pos += m
	if length == -1 {
		return nil, pos, nil
	}
	if length < 0 || int(length) > len(body)-pos {
		return nil, pos, fmt.Errorf("%w: record %d has %s length %d with %d bytes left", ErrInvalidRecord, index, field, length, len(body)-pos)
	}
	end := pos + int(length)
	return body[pos:end:end], end, nil
}

func batchRecordError(index int32, what string) error {
	return fmt.Errorf("%w: record %d %s", ErrInvalidRecord, index, what)
}

// batchVarint decodes a zigzag varint that fits an int32 in at most 5 bytes
// (Kafka ByteUtils.readVarint). n is the number of bytes read, or 0 when b
// ends first, or -1 when the varint is longer than 5 bytes or overflows.
func batchVarint(b []byte) (v int32, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint32(b[0])
		return int32(u>>1) ^ -int32(u&1), 1
	}
	var u uint32
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, -1
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, 0
}

// batchAppendVarint appends v zigzag encoded.
func batchAppendVarint(b []byte, v int32) []byte {
	return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31)))
}

// batchVarintLen is the encoded length of v as a zigzag varint.
func batchVarintLen(v int32) int {
	u := uint32(v<<1) ^ uint32(v>>31)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// batchVarlongLen is the encoded length of v as a zigzag varlong.
func batchVarlongLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// RecordHeader is one record header. Value nil is a null value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch. Offsets and timestamps are deltas from
// the batch's BaseOffset and BaseTimestamp.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil = null key
	Value          []byte // nil = null value (tombstone)
	Headers        []RecordHeader
}

// DecodeRecords decodes every record of the one whole batch in batch: it
// checks the magic (2), the CRC and that len(batch) is the batch size, then
// decompresses if needed. Unlike ValidateBatch it accepts what a log may hold
// after compaction: NumRecords 0 (an empty batch kept for producer state) and
// offset deltas with gaps, as long as they increase and do not exceed
// LastOffsetDelta. It does not apply the produce-time rules (control bit,
// producer fields).
//
// For an uncompressed batch, Key, Value and header values alias batch; copy
// them to keep them past batch's lifetime or before batch is modified.
func DecodeRecords(batch []byte) (BatchHeader, []Record, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return h, nil, err
	}
	if h.Magic != batchMagic {
		return h, nil, fmt.Errorf("%w: batch magic is %d; only magic 2 is supported", ErrUnsupportedMessageFormat, h.Magic)
	}
	if len(batch) != h.Size() {
		return h, nil, fmt.Errorf("%w: %d bytes follow the %d-byte batch", ErrCorruptMessage, len(batch)-h.Size(), h.Size())
	}
	if err := batchCheckCRC(batch, &h); err != nil {
		return h, nil, err
	}
	if h.NumRecords < 0 || h.LastOffsetDelta < 0 {
		return h, nil, fmt.Errorf("%w: batch declares %d records and last offset delta %d", ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	}
	raw := batch[BatchHeaderSize:]
	codec := h.Codec()
	if !codec.Known() {
		return h, nil, fmt.Errorf("%w: codec id %d", ErrUnsupportedCompression, int8(codec))
	}
	if codec != CodecNone && len(raw) > 0 {
		if raw, err = codecDecompressAppend(nil, codec, raw); err != nil {
			return h, nil, err
		}
	}
	records := make([]Record, 0, min(int(h.NumRecords), len(raw)/batchRecordBytesMin))
	pos := 0
	previousDelta := int32(-1)
	for i := range h.NumRecords {
		if pos == len(raw) {
			return h, nil, fmt.Errorf("%w: batch declares %d records but holds %d", ErrInvalidRecord, h.NumRecords, i)
		}
		view, n, err := batchNextRecord(raw[pos:], i)
		if err != nil {
			return h, nil, err
		}
		if view.offsetDelta <= previousDelta || view.offsetDelta > h.LastOffsetDelta {
			return h, nil, fmt.Errorf("%w: record %d has offset delta %d; want above %d and at most the last offset delta %d", ErrInvalidRecord, i, view.offsetDelta, previousDelta, h.LastOffsetDelta)
		}
		previousDelta = view.offsetDelta
		records = append(records, Record{
			Attributes:     view.attributes,
			TimestampDelta: view.timestampDelta,
			OffsetDelta:    view.offsetDelta,
			Key:            view.key,
			Value:          view.value,
			Headers:        batchDecodeHeaders(view.headers, view.headerCount),
		})
		pos += n
	}
	if pos != len(raw) {
		return h, nil, fmt.Errorf("%w: %d bytes follow the last of the %d records", ErrInvalidRecord, len(raw)-pos, h.NumRecords)
	}
	return h, records, nil
}

// batchDecodeHeaders materializes headers that batchNextRecord has checked.
func batchDecodeHeaders(b []byte, count int32) []RecordHeader {
	if count == 0 {
		return nil
	}
	headers := make([]RecordHeader, count)
	pos := 0
	for i := range headers {
		keyLength, m := batchVarint(b[pos:])
		pos += m
		headers[i].Key = string(b[pos : pos+int(keyLength)])
		pos += int(keyLength)
		valueLength, m := batchVarint(b[pos:])
		pos += m
		if valueLength >= 0 {
			end := pos + int(valueLength)
			headers[i].Value = b[pos:end:end]
			pos = end
		}
	}
	return headers
}

// EncodeBatch builds a complete v2 batch from h and records. It takes
// BaseOffset, PartitionLeaderEpoch, Attributes, BaseTimestamp, MaxTimestamp,
// ProducerID, ProducerEpoch and BaseSequence from h as given, compresses the
// records with h.Codec(), and sets Magic 2, BatchLength, NumRecords, the CRC
// and LastOffsetDelta: the last record's OffsetDelta, or h.LastOffsetDelta
// when that is larger (a compacted batch keeps the offset range of the
// batch it came from).
//
// Record offset deltas must be non-negative and strictly increasing
// (ErrInvalidRecord); gaps are allowed. With no records the batch has no
// records section and codec none, as Kafka writes an empty batch. A batch
// whose size does not fit BatchLength fails with ErrMessageTooLarge; codec
// 5-7 with ErrUnsupportedCompression.
func EncodeBatch(h BatchHeader, records []Record) ([]byte, error) {
	codec := h.Codec()
	if !codec.Known() {
		return nil, fmt.Errorf("%w: codec id %d", ErrUnsupportedCompression, int8(codec))
	}
	if len(records) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d records do not fit one batch", ErrMessageTooLarge, len(records))
	}
	lastDelta := h.LastOffsetDelta
	previousDelta := int32(-1)
	rawSize := 0
	for i := range records {
		r := &records[i]
		if r.OffsetDelta <= previousDelta {
			return nil, fmt.Errorf("%w: record %d has offset delta %d, not above the previous %d", ErrInvalidRecord, i, r.OffsetDelta, previousDelta)
		}
		previousDelta = r.OffsetDelta
		bodySize, err := batchRecordBodySize(r, i)
		if err != nil {
			return nil, err
		}
		rawSize += batchVarintLen(int32(bodySize)) + bodySize
		if rawSize > math.MaxInt32-BatchHeaderSize {
			return nil, fmt.Errorf("%w: records exceed the largest batch, %d bytes", ErrMessageTooLarge, math.MaxInt32)
		}
	}
	lastDelta = max(lastDelta, previousDelta)
	if lastDelta < 0 {
		return nil, fmt.Errorf("%w: last offset delta %d is negative", ErrInvalidRecord, lastDelta)
	}
	if len(records) == 0 {
		codec = CodecNone
		h.Attributes &^= batchAttributeCodecMask
	}

	var out []byte
	if codec == CodecNone {
		out = make([]byte, BatchHeaderSize, BatchHeaderSize+rawSize)
		out = batchAppendRecords(out, records)
	} else {
		buf := codecGetBuffer()
		raw := batchAppendRecords((*buf)[:0], records)
		out = make([]byte, BatchHeaderSize, BatchHeaderSize+rawSize/2+64)
		var err error
		out, err = codecCompressAppend(out, codec, raw)
		codecPutBuffer(buf, raw)
		if err != nil {
			return nil, err
		}
		if len(out)-batchLogOverhead > math.MaxInt32 {
			return nil, fmt.Errorf("%w: compressed batch is %d bytes, above the largest batch %d", ErrMessageTooLarge, len(out), math.MaxInt32)
		}
	}

	binary.BigEndian.PutUint64(out[0:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(out[batchLengthOffset:], uint32(len(out)-batchLogOverhead))
	binary.BigEndian.PutUint32(out[batchPartitionLeaderEpochOffset:], uint32(h.PartitionLeaderEpoch))
	out[batchMagicOffset] = batchMagic
	binary.BigEndian.PutUint16(out[batchAttributesOffset:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(out[batchLastOffsetDeltaOffset:], uint32(lastDelta))
	binary.BigEndian.PutUint64(out[batchBaseTimestampOffset:], uint64(h.BaseTimestamp))
	binary.BigEndian.PutUint64(out[batchMaxTimestampOffset:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(out[batchProducerIDOffset:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(out[batchProducerEpochOffset:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(out[batchBaseSequenceOffset:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(out[batchNumRecordsOffset:], uint32(len(records)))
	batchUpdateCRC(out)
	return out, nil
}

// batchRecordBodySize is the encoded size of r after its length varint.
func batchRecordBodySize(r *Record, index int) (int, error) {
	size := 1 + batchVarlongLen(r.TimestampDelta) + batchVarintLen(r.OffsetDelta)
	size += batchBytesFieldSize(r.Key) + batchBytesFieldSize(r.Value)
	if len(r.Headers) > math.MaxInt32 {
		return 0, fmt.Errorf("%w: record %d has %d headers", ErrMessageTooLarge, index, len(r.Headers))
	}
	size += batchVarintLen(int32(len(r.Headers)))
	for i := range r.Headers {
		if len(r.Headers[i].Key) > math.MaxInt32 {
			return 0, fmt.Errorf("%w: record %d header %d key is %d bytes", ErrMessageTooLarge, index, i, len(r.Headers[i].Key))
		}
		size += batchVarintLen(int32(len(r.Headers[i].Key))) + len(r.Headers[i].Key)
		size += batchBytesFieldSize(r.Headers[i].Value)
		if size > math.MaxInt32 {
			break
		}
	}
	if size > math.MaxInt32 || size < 0 {
		return 0, fmt.Errorf("%w: record %d is over %d bytes", ErrMessageTooLarge, index, math.MaxInt32)
	}
	return size, nil
}

// batchBytesFieldSize is the encoded size of a nullable bytes field. A field
// longer than MaxInt32 yields a size that makes the record too large.
func batchBytesFieldSize(b []byte) int {
	if b == nil {
		return 1
	}
	if len(b) > math.MaxInt32 {
		return math.MaxInt32
	}
	return batchVarintLen(int32(len(b))) + len(b)
}

// batchAppendRecords appends the encoded records to dst.
// REQUIRES: batchRecordBodySize succeeded for every record.
func batchAppendRecords(dst []byte, records []Record) []byte {
	for i := range records {
		r := &records[i]
		bodySize, _ := batchRecordBodySize(r, i)
		dst = batchAppendVarint(dst, int32(bodySize))
		dst = append(dst, byte(r.Attributes))
		dst = binary.AppendVarint(dst, r.TimestampDelta)
		dst = batchAppendVarint(dst, r.OffsetDelta)
		dst = batchAppendNullableBytes(dst, r.Key)
		dst = batchAppendNullableBytes(dst, r.Value)
		dst = batchAppendVarint(dst, int32(len(r.Headers)))
		for j := range r.Headers {
			dst = batchAppendVarint(dst, int32(len(r.Headers[j].Key)))
			dst = append(dst, r.Headers[j].Key...)
			dst = batchAppendNullableBytes(dst, r.Headers[j].Value)
		}
	}
	return dst
}

func batchAppendNullableBytes(dst, b []byte) []byte {
	if b == nil {
		return batchAppendVarint(dst, -1)
	}
	dst = batchAppendVarint(dst, int32(len(b)))
	return append(dst, b...)
}

// batchUpdateCRC recomputes the CRC field of the whole batch b.
func batchUpdateCRC(b []byte) {
	binary.BigEndian.PutUint32(b[batchCRCOffset:], crc32.Checksum(b[batchAttributesOffset:], batchCRCTable))
}

// SetBaseOffset rewrites the BaseOffset field (bytes [0:8]) in place. The CRC
// does not cover it, so the batch stays valid.
// REQUIRES: len(batch) >= 8.
func SetBaseOffset(batch []byte, base int64) {
	binary.BigEndian.PutUint64(batch[0:8], uint64(base))
}

// SetPartitionLeaderEpoch rewrites the PartitionLeaderEpoch field (bytes
// [12:16]) in place, as the broker stamps it on append. The CRC does not
// cover it.
// REQUIRES: len(batch) >= BatchHeaderSize.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[batchPartitionLeaderEpochOffset:], uint32(epoch))
}

// SetLogAppendTime marks the batch as timestamped by the broker (attribute
// bit 3) with MaxTimestamp appendTime, and recomputes the CRC, as Kafka does
// on topics with message.timestamp.type=LogAppendTime. Record timestamp
// deltas are left alone; consumers use MaxTimestamp for every record.
// REQUIRES: batch is one whole batch.
func SetLogAppendTime(batch []byte, appendTime int64) {
	attributes := binary.BigEndian.Uint16(batch[batchAttributesOffset:])
	binary.BigEndian.PutUint16(batch[batchAttributesOffset:], attributes|batchAttributeLogAppendTime)
	binary.BigEndian.PutUint64(batch[batchMaxTimestampOffset:], uint64(appendTime))
	batchUpdateCRC(batch)
}
