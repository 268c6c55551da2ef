package topics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	kafkacompress "github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var batchTestCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// batchTestRecords returns n records with offset deltas 0..n-1 and values of
// about valueSize bytes of text. Every fourth record has a null key, every
// fifth a null value, every third a header with a null value; no-header
// records have nil Headers, as DecodeRecords returns them.
func batchTestRecords(n, valueSize int, seed uint64) []Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	words := []string{"alpha", "beta", "gamma", "delta", "order", "user", "id", "42", "true", "{", "}", ":", ","}
	records := make([]Record, n)
	for i := range records {
		r := &records[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta = int64(i) * 3
		if i%4 != 3 {
			r.Key = fmt.Appendf(nil, "key-%d", i)
		}
		if i%5 != 4 {
			var sb strings.Builder
			for sb.Len() < valueSize {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			r.Value = []byte(sb.String()[:valueSize])
		}
		if i%3 == 0 {
			r.Headers = []RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}, {Key: "empty", Value: nil}}
		}
	}
	return records
}

func batchTestHeader(codec Codec) BatchHeader {
	return BatchHeader{
		BaseOffset:           0,
		PartitionLeaderEpoch: -1,
		Attributes:           int16(codec),
		BaseTimestamp:        1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_300,
		ProducerID:           77,
		ProducerEpoch:        3,
		BaseSequence:         10,
	}
}

func batchTestEncode(t testing.TB, h BatchHeader, records []Record) []byte {
	t.Helper()
	b, err := EncodeBatch(h, records)
	if err != nil {
		t.Fatalf("EncodeBatch: %v", err)
	}
	return b
}

// batchTestRaw builds a batch around already encoded (and, for a codec,
// compressed) records without any of EncodeBatch's checks, so tests can
// write batches EncodeBatch refuses to.
func batchTestRaw(h BatchHeader, payload []byte) []byte {
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(payload))
	b = append(b, payload...)
	binary.BigEndian.PutUint64(b[0:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[batchLengthOffset:], uint32(len(b)-batchLogOverhead))
	binary.BigEndian.PutUint32(b[batchPartitionLeaderEpochOffset:], uint32(h.PartitionLeaderEpoch))
	b[batchMagicOffset] = batchMagic
	binary.BigEndian.PutUint16(b[batchAttributesOffset:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[batchLastOffsetDeltaOffset:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[batchBaseTimestampOffset:], uint64(h.BaseTimestamp))
	binary.BigEndian.PutUint64(b[batchMaxTimestampOffset:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[batchProducerIDOffset:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[batchProducerEpochOffset:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[batchBaseSequenceOffset:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[batchNumRecordsOffset:], uint32(h.NumRecords))
	batchUpdateCRC(b)
	return b
}

// batchTestRecordBytes encodes one record from its body fields, computing the
// length prefix; body is appended verbatim after the offset delta so tests
// can write malformed keys, values and headers.
func batchTestRecordBytes(offsetDelta int32, body []byte) []byte {
	var inner []byte
	inner = append(inner, 0)                      // attributes
	inner = binary.AppendVarint(inner, 0)         // timestamp delta
	inner = batchAppendVarint(inner, offsetDelta) // offset delta
	inner = append(inner, body...)
	return append(batchAppendVarint(nil, int32(len(inner))), inner...)
}

// batchTestKV is a well-formed key "k", value "v", no headers.
func batchTestKV() []byte {
	b := batchAppendNullableBytes(nil, []byte("k"))
	b = batchAppendNullableBytes(b, []byte("v"))
	return batchAppendVarint(b, 0)
}

func TestBatchRoundTripAllCodecs(t *testing.T) {
	sets := map[string][]Record{
		"one":          batchTestRecords(1, 10, 1),
		"hundred":      batchTestRecords(100, 100, 2),
		"large values": batchTestRecords(4, 300<<10, 3), // several lz4 blocks
		"empty fields": {{OffsetDelta: 0, Key: []byte{}, Value: []byte{}, Headers: []RecordHeader{{Key: "", Value: []byte{}}}}},
		"nulls":        {{OffsetDelta: 0, TimestampDelta: -5, Attributes: 0}},
	}
	for _, codec := range batchTestCodecs {
		for name, records := range sets {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				h := batchTestHeader(codec)
				b := batchTestEncode(t, h, records)
				got, err := ValidateBatch(b, ValidateOptions{})
				if err != nil {
					t.Fatalf("ValidateBatch: %v", err)
				}
				if got.Codec() != codec || got.NumRecords != int32(len(records)) || got.LastOffsetDelta != int32(len(records)-1) ||
					got.Size() != len(b) || got.Magic != 2 || got.ProducerID != 77 || got.BaseSequence != 10 ||
					got.BaseTimestamp != h.BaseTimestamp || got.MaxTimestamp != h.MaxTimestamp || got.PartitionLeaderEpoch != -1 {
					t.Fatalf("header %+v does not match what was encoded", got)
				}
				parsed, err := ParseBatchHeader(b)
				if err != nil || parsed != got {
					t.Fatalf("ParseBatchHeader = %+v, %v; ValidateBatch said %+v", parsed, err, got)
				}
				h2, decoded, err := DecodeRecords(b)
				if err != nil {
					t.Fatalf("DecodeRecords: %v", err)
				}
				if h2 != got {
					t.Fatalf("DecodeRecords header %+v, ValidateBatch header %+v", h2, got)
				}
				if !reflect.DeepEqual(decoded, records) {
					t.Fatalf("records differ after the round trip (nil and empty must be kept apart)")
				}
			})
		}
	}
}

func TestValidateBatchErrors(t *testing.T) {
	records := batchTestRecords(3, 20, 4)
	valid := batchTestEncode(t, batchTestHeader(CodecNone), records)
	size := len(valid)
	header := func(mutate func(h *BatchHeader)) BatchHeader {
		h := batchDecodeHeader(valid)
		mutate(&h)
		return h
	}
	// withRecords wraps hand-encoded records in a batch claiming n records.
	withRecords := func(n int32, recs ...[]byte) []byte {
		h := batchTestHeader(CodecNone)
		h.NumRecords, h.LastOffsetDelta = n, n-1
		return batchTestRaw(h, bytes.Join(recs, nil))
	}
	patch := func(offset int, v []byte, fixCRC bool) []byte {
		b := bytes.Clone(valid)
		copy(b[offset:], v)
		if fixCRC {
			batchUpdateCRC(b)
		}
		return b
	}
	be32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	be16 := func(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	keyless := batchTestEncode(t, batchTestHeader(CodecNone), []Record{{OffsetDelta: 0, Key: []byte("k")}, {OffsetDelta: 1, Value: []byte("no key")}})
	gappy := batchTestEncode(t, batchTestHeader(CodecNone), []Record{{OffsetDelta: 0}, {OffsetDelta: 1}, {OffsetDelta: 3}})
	copy(gappy[batchLastOffsetDeltaOffset:], be32(2))
	batchUpdateCRC(gappy)
	zstdBomb, err := Compress(CodecZstd, make([]byte, codecDecompressedBytesFloor+1))
	if err != nil {
		t.Fatal(err)
	}
	bombHeader := batchTestHeader(CodecZstd)
	bombHeader.NumRecords = 1

	cases := []struct {
		name string
		b    []byte
		opts ValidateOptions
		want error
	}{
		{"empty", nil, ValidateOptions{}, ErrInvalidRecord},
		{"truncated before magic", valid[:12], ValidateOptions{}, ErrInvalidRecord},
		{"truncated header", valid[:40], ValidateOptions{}, ErrInvalidRecord},
		{"truncated last byte", valid[:size-1], ValidateOptions{}, ErrInvalidRecord},
		{"length below header", patch(batchLengthOffset, be32(48), false), ValidateOptions{}, ErrCorruptMessage},
		{"negative length", patch(batchLengthOffset, be32(-1), false), ValidateOptions{}, ErrCorruptMessage},
		{"length past the end", patch(batchLengthOffset, be32(int32(size)), false), ValidateOptions{}, ErrInvalidRecord},
		{"magic 1", patch(batchMagicOffset, []byte{1}, false), ValidateOptions{}, ErrUnsupportedMessageFormat},
		{"magic 3", patch(batchMagicOffset, []byte{3}, false), ValidateOptions{}, ErrCorruptMessage},
		{"bad CRC", patch(batchCRCOffset, []byte{0xde, 0xad, 0xbe, 0xef}, false), ValidateOptions{}, ErrCorruptMessage},
		{"flipped record byte", patch(size-1, []byte{valid[size-1] ^ 1}, false), ValidateOptions{}, ErrCorruptMessage},
		{"zero records", batchTestRaw(header(func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 0, -1 }), valid[BatchHeaderSize:]), ValidateOptions{}, ErrInvalidRecord},
		{"more records declared than held", batchTestRaw(header(func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 4, 3 }), valid[BatchHeaderSize:]), ValidateOptions{}, ErrInvalidRecord},
		{"fewer records declared than held", batchTestRaw(header(func(h *BatchHeader) { h.NumRecords, h.LastOffsetDelta = 2, 1 }), valid[BatchHeaderSize:]), ValidateOptions{}, ErrInvalidRecord},
		{"last offset delta mismatch", patch(batchLastOffsetDeltaOffset, be32(5), true), ValidateOptions{}, ErrInvalidRecord},
		{"negative last offset delta", patch(batchLastOffsetDeltaOffset, be32(-1), true), ValidateOptions{}, ErrInvalidRecord},
		{"offset delta gap", gappy, ValidateOptions{}, ErrInvalidRecord},
		{"offset deltas out of order", withRecords(2, batchTestRecordBytes(1, batchTestKV()), batchTestRecordBytes(0, batchTestKV())), ValidateOptions{}, ErrInvalidRecord},
		{"trailing bytes inside the batch", batchTestRaw(batchDecodeHeader(valid), append(bytes.Clone(valid[BatchHeaderSize:]), 0, 0)), ValidateOptions{}, ErrInvalidRecord},
		{"trailing bytes after the batch", append(bytes.Clone(valid), 1, 2, 3), ValidateOptions{}, ErrCorruptMessage},
		{"two batches", append(bytes.Clone(valid), valid...), ValidateOptions{}, ErrInvalidRecord},
		{"control bit", patch(batchAttributesOffset, be16(batchAttributeControl), true), ValidateOptions{}, ErrInvalidRecord},
		{"producer ID without sequence", patch(batchBaseSequenceOffset, be32(-1), true), ValidateOptions{}, ErrInvalidRecord},
		{"keyless record on a compacted topic", keyless, ValidateOptions{RequireKeys: true}, ErrInvalidRecord},
		{"too large", valid, ValidateOptions{MaxBatchBytes: size - 1}, ErrMessageTooLarge},
		{"codec 5", patch(batchAttributesOffset, be16(5), true), ValidateOptions{}, ErrUnsupportedCompression},
		{"codec 6", patch(batchAttributesOffset, be16(6), true), ValidateOptions{}, ErrUnsupportedCompression},
		{"codec 7", patch(batchAttributesOffset, be16(7), true), ValidateOptions{}, ErrUnsupportedCompression},
		{"gzip garbage", batchTestRaw(header(func(h *BatchHeader) { h.Attributes = int16(CodecGzip) }), []byte("not gzip at all")), ValidateOptions{}, ErrCorruptMessage},
		{"zstd bomb", batchTestRaw(bombHeader, zstdBomb), ValidateOptions{}, ErrCorruptMessage},
		{"negative record length", withRecords(1, batchAppendVarint(nil, -3)), ValidateOptions{}, ErrInvalidRecord},
		{"record length past the batch", withRecords(1, append(batchAppendVarint(nil, 100), make([]byte, 10)...)), ValidateOptions{}, ErrInvalidRecord},
		{"record too short", withRecords(1, append(batchAppendVarint(nil, 2), 0, 0)), ValidateOptions{}, ErrInvalidRecord},
		{"varint longer than 5 bytes", withRecords(1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), ValidateOptions{}, ErrInvalidRecord},
		{"varint overflowing int32", withRecords(1, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}), ValidateOptions{}, ErrInvalidRecord},
		{"key length -2", withRecords(1, batchTestRecordBytes(0, append(batchAppendVarint(nil, -2), batchTestKV()...))), ValidateOptions{}, ErrInvalidRecord},
		{"key length past the record", withRecords(1, batchTestRecordBytes(0, append(batchAppendVarint(nil, 50), 1, 1, 0))), ValidateOptions{}, ErrInvalidRecord},
		{"value length past the record", withRecords(1, batchTestRecordBytes(0, append(batchAppendVarint(batchAppendVarint(nil, -1), 9), 1, 0))), ValidateOptions{}, ErrInvalidRecord},
		{"negative header count", withRecords(1, batchTestRecordBytes(0, batchAppendVarint([]byte{1, 1}, -1))), ValidateOptions{}, ErrInvalidRecord},
		{"header count past the record", withRecords(1, batchTestRecordBytes(0, batchAppendVarint([]byte{1, 1}, 1000))), ValidateOptions{}, ErrInvalidRecord},
		{"header key length -1", withRecords(1, batchTestRecordBytes(0, append(batchAppendVarint(batchAppendVarint([]byte{1, 1}, 1), -1), 1, 1))), ValidateOptions{}, ErrInvalidRecord},
		{"bytes left inside a record", withRecords(1, batchTestRecordBytes(0, append(batchTestKV(), 0xaa))), ValidateOptions{}, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateBatch(tc.b, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ValidateBatch error = %v; want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want.Error()+": ") {
				t.Fatalf("error %q does not explain %q", err, tc.want)
			}
			t.Log(err)
		})
	}

	// The same batches pass without the option that rejects them.
	if _, err := ValidateBatch(keyless, ValidateOptions{}); err != nil {
		t.Fatalf("keyless batch without RequireKeys: %v", err)
	}
	if _, err := ValidateBatch(valid, ValidateOptions{MaxBatchBytes: size, RequireKeys: false}); err != nil {
		t.Fatalf("batch of exactly MaxBatchBytes: %v", err)
	}
	if _, err := ValidateBatch(withRecords(1, batchTestRecordBytes(0, batchTestKV())), ValidateOptions{RequireKeys: true}); err != nil {
		t.Fatalf("hand-built batch: %v", err)
	}
}

// TestBatchFromFranzGo builds batches the way franz-go's kmsg encodes them,
// compressed by kafka-go's codecs (xerial-framed snappy, as Java and sarama
// write it), and checks that they validate and decode to the same records.
func TestBatchFromFranzGo(t *testing.T) {
	for _, codec := range batchTestCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := batchTestRecords(20, 500, 5)
			var raw []byte
			for _, r := range want {
				kr := kmsg.Record{
					Attributes:       r.Attributes,
					TimestampDelta64: r.TimestampDelta,
					OffsetDelta:      r.OffsetDelta,
					Key:              r.Key,
					Value:            r.Value,
				}
				for _, h := range r.Headers {
					kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
				}
				kr.Length = int32(len(kr.AppendTo(nil)) - 1) // Length 0 is one varint byte
				raw = kr.AppendTo(raw)
			}
			payload := raw
			if codec != CodecNone {
				var buf bytes.Buffer
				w := kafkacompress.Compression(codec).Codec().NewWriter(&buf)
				if _, err := w.Write(raw); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				payload = buf.Bytes()
				if codec == CodecSnappy && !bytes.HasPrefix(payload, codecXerialMagic) {
					t.Fatalf("kafka-go snappy output is not xerial framed")
				}
			}
			kb := kmsg.RecordBatch{
				FirstOffset:          0,
				Length:               int32(BatchHeaderSize - batchLogOverhead + len(payload)),
				PartitionLeaderEpoch: -1,
				Magic:                2,
				Attributes:           int16(codec),
				LastOffsetDelta:      int32(len(want) - 1),
				FirstTimestamp:       1000,
				MaxTimestamp:         1057,
				ProducerID:           -1,
				ProducerEpoch:        -1,
				FirstSequence:        -1,
				NumRecords:           int32(len(want)),
				Records:              payload,
			}
			b := kb.AppendTo(nil)
			kb.CRC = int32(crc32.Checksum(b[batchAttributesOffset:], crc32.MakeTable(crc32.Castagnoli)))
			b = kb.AppendTo(nil)

			h, err := ValidateBatch(b, ValidateOptions{})
			if err != nil {
				t.Fatalf("ValidateBatch: %v", err)
			}
			if h.Codec() != codec || h.NumRecords != 20 || h.ProducerID != -1 || h.MaxTimestamp != 1057 {
				t.Fatalf("header %+v", h)
			}
			_, got, err := DecodeRecords(b)
			if err != nil {
				t.Fatalf("DecodeRecords: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded records differ from what kmsg encoded")
			}
		})
	}
}

// TestBatchReadByFranzGo checks that EncodeBatch output parses with kmsg and
// decompresses with kafka-go's codecs into the same records.
func TestBatchReadByFranzGo(t *testing.T) {
	for _, codec := range batchTestCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			want := batchTestRecords(30, 300, 6)
			h := batchTestHeader(codec)
			h.BaseOffset = 1234
			b := batchTestEncode(t, h, want)

			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(b); err != nil {
				t.Fatalf("kmsg ReadFrom: %v", err)
			}
			if kb.FirstOffset != 1234 || kb.Magic != 2 || int(kb.Length)+12 != len(b) || kb.NumRecords != 30 || kb.LastOffsetDelta != 29 ||
				kb.ProducerID != 77 || kb.ProducerEpoch != 3 || kb.FirstSequence != 10 || kb.Attributes != int16(codec) {
				t.Fatalf("kmsg header %+v", kb)
			}
			if crc := crc32.Checksum(b[batchAttributesOffset:], crc32.MakeTable(crc32.Castagnoli)); uint32(kb.CRC) != crc {
				t.Fatalf("CRC %x, want %x", uint32(kb.CRC), crc)
			}
			raw := kb.Records
			if codec != CodecNone {
				r := kafkacompress.Compression(codec).Codec().NewReader(bytes.NewReader(kb.Records))
				var err error
				if raw, err = io.ReadAll(r); err != nil {
					t.Fatalf("kafka-go %s reader: %v", codec, err)
				}
				r.Close()
			}
			for i, w := range want {
				var kr kmsg.Record
				if err := kr.ReadFrom(raw); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				raw = raw[batchVarintLen(kr.Length)+int(kr.Length):]
				if kr.OffsetDelta != w.OffsetDelta || kr.TimestampDelta64 != w.TimestampDelta ||
					!bytes.Equal(kr.Key, w.Key) || (kr.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(kr.Value, w.Value) || (kr.Value == nil) != (w.Value == nil) || len(kr.Headers) != len(w.Headers) {
					t.Fatalf("record %d: kmsg read %+v, want %+v", i, kr, w)
				}
				for j, hd := range w.Headers {
					if kr.Headers[j].Key != hd.Key || !bytes.Equal(kr.Headers[j].Value, hd.Value) || (kr.Headers[j].Value == nil) != (hd.Value == nil) {
						t.Fatalf("record %d header %d: %+v, want %+v", i, j, kr.Headers[j], hd)
					}
				}
			}
			if len(raw) != 0 {
				t.Fatalf("%d bytes after the last record", len(raw))
			}
		})
	}
}

// batchTestXerial frames chunks of raw as xerial/snappy-java does.
func batchTestXerial(raw []byte, chunkSize int) []byte {
	out := append([]byte(nil), codecXerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // compatible version
	for len(raw) > 0 {
		n := min(chunkSize, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

func TestCodecXerialSnappy(t *testing.T) {
	records := batchTestRecords(10, 200, 8)
	raw := batchAppendRecords(nil, records)
	framed := batchTestXerial(raw, 300)
	got, err := Decompress(CodecSnappy, framed)
	if err != nil {
		t.Fatalf("Decompress xerial: %v", err)
	}
	if !bytes.Equal(got, raw) {
		t.Fatalf("xerial decode differs")
	}
	if got, err := Decompress(CodecSnappy, framed[:codecXerialHeaderSize]); err != nil || len(got) != 0 {
		t.Fatalf("header-only xerial = %d bytes, %v; want empty", len(got), err)
	}

	h := batchTestHeader(CodecSnappy)
	h.NumRecords, h.LastOffsetDelta = 10, 9
	b := batchTestRaw(h, framed)
	if _, err := ValidateBatch(b, ValidateOptions{}); err != nil {
		t.Fatalf("ValidateBatch of a xerial batch: %v", err)
	}
	if _, decoded, err := DecodeRecords(b); err != nil || !reflect.DeepEqual(decoded, records) {
		t.Fatalf("DecodeRecords of a xerial batch: %v", err)
	}

	corrupt := map[string][]byte{
		"chunk length cut":          framed[:codecXerialHeaderSize+2],
		"chunk length past the end": append(bytes.Clone(framed[:codecXerialHeaderSize]), 0, 0, 1, 0, 1, 2),
		"negative chunk length":     append(bytes.Clone(framed[:codecXerialHeaderSize]), 0xff, 0xff, 0xff, 0xff, 1),
		"chunk cut short":           framed[:len(framed)-1],
		"empty chunk":               append(bytes.Clone(framed[:codecXerialHeaderSize]), 0, 0, 0, 0),
	}
	for name, data := range corrupt {
		if _, err := Decompress(CodecSnappy, data); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%s: error = %v; want ErrCorruptMessage", name, err)
		}
	}
}

func TestCodecDecompressBounded(t *testing.T) {
	zeros := make([]byte, codecDecompressedBytesFloor+1)
	for _, codec := range []Codec{CodecGzip, CodecLZ4, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			bomb, err := Compress(codec, zeros)
			if err != nil {
				t.Fatal(err)
			}
			if len(bomb)*codecExpansionRatioMax > codecDecompressedBytesFloor {
				t.Fatalf("%s compressed %d zeros to %d bytes; not a bomb", codec, len(zeros), len(bomb))
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = Decompress(codec, bomb)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("Decompress of a %d-byte bomb: %v; want ErrCorruptMessage", len(bomb), err)
			}
			// Decoding stops at the limit (zstd: at its decoder tier, here
			// the limit); doubling growth allocates about twice that.
			allowed := uint64(4 * codecDecompressedBytesFloor)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allowed {
				t.Fatalf("refusing the bomb allocated %d bytes", alloc)
			}
			// Exactly at the limit is fine.
			at, err := Compress(codec, zeros[:codecDecompressedBytesFloor])
			if err != nil {
				t.Fatal(err)
			}
			if out, err := Decompress(codec, at); err != nil || len(out) != codecDecompressedBytesFloor {
				t.Fatalf("Decompress at the limit: %d bytes, %v", len(out), err)
			}
		})
	}
	t.Run("snappy", func(t *testing.T) {
		// A block header declaring 1 GiB is refused before allocating.
		block := binary.AppendUvarint(nil, 1<<30)
		block = append(block, 0)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decompress(CodecSnappy, block)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("error = %v; want ErrCorruptMessage", err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Fatalf("refusing the block allocated %d bytes", alloc)
		}
		// A xerial chunk declaring more than the limit is refused too.
		framed := batchTestXerial(nil, 1)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(block)))
		framed = append(framed, block...)
		if _, err := Decompress(CodecSnappy, framed); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("xerial chunk declaring 1 GiB: error = %v; want ErrCorruptMessage", err)
		}
	})
	for n, want := range map[int]int{0: 16 << 20, 1 << 10: 16 << 20, 1 << 20: 64 << 20, 2 << 20: 128 << 20, 1 << 30: 128 << 20} {
		if got := codecDecompressedLimit(n); got != want {
			t.Errorf("codecDecompressedLimit(%d) = %d; want %d", n, got, want)
		}
	}
}

func TestCodecErrors(t *testing.T) {
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		if _, err := Decompress(codec, []byte("\x82SNAPPX this is no compressed data at all")); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("%s: Decompress of garbage: %v; want ErrCorruptMessage", codec, err)
		}
	}
	for _, codec := range []Codec{5, 6, 7, -1} {
		if _, err := Decompress(codec, []byte{1}); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("Decompress codec %d: %v", codec, err)
		}
		if _, err := Compress(codec, []byte{1}); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("Compress codec %d: %v", codec, err)
		}
		if _, err := EncodeBatch(BatchHeader{Attributes: int16(codec) & 7}, nil); codec > 4 && !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("EncodeBatch codec %d: %v", codec, err)
		}
	}
	// Empty input is an empty stream for the frame formats.
	for _, codec := range batchTestCodecs {
		c, err := Compress(codec, nil)
		if err != nil {
			t.Fatalf("%s: Compress(nil): %v", codec, err)
		}
		if d, err := Decompress(codec, c); err != nil || len(d) != 0 {
			t.Fatalf("%s: Decompress(Compress(nil)) = %q, %v", codec, d, err)
		}
	}
}

// TestRecordVarint checks the int32 varint codec against encoding/binary's
// zigzag varlong, which encodes every int32 the same way.
func TestRecordVarint(t *testing.T) {
	values := []int32{0, 1, -1, 63, -64, 64, -65, 8191, 8192, 1 << 20, math.MaxInt32, math.MinInt32, math.MinInt32 + 1}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		values = append(values, int32(rng.Uint32()))
	}
	for _, v := range values {
		b := batchAppendVarint(nil, v)
		if want := binary.AppendVarint(nil, int64(v)); !bytes.Equal(b, want) {
			t.Fatalf("batchAppendVarint(%d) = %x; want %x", v, b, want)
		}
		if len(b) != batchVarintLen(v) {
			t.Fatalf("batchVarintLen(%d) = %d; encoded %d bytes", v, batchVarintLen(v), len(b))
		}
		got, n := batchVarint(append(b, 0xee))
		if got != v || n != len(b) {
			t.Fatalf("batchVarint(%x) = %d, %d; want %d, %d", b, got, n, v, len(b))
		}
		if _, n := batchVarint(b[:len(b)-1]); n != 0 {
			t.Fatalf("batchVarint of truncated %x read %d bytes", b, n)
		}
		if batchVarlongLen(int64(v)) != len(b) {
			t.Fatalf("batchVarlongLen(%d) = %d; want %d", v, batchVarlongLen(int64(v)), len(b))
		}
	}
	for _, bad := range [][]byte{{0x80, 0x80, 0x80, 0x80, 0x10}, {0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, {0x80, 0x80, 0x80, 0x80, 0x80}} {
		if _, n := batchVarint(bad); n != -1 {
			t.Fatalf("batchVarint(%x) read %d bytes; want -1 (too long)", bad, n)
		}
	}
}

func TestParseBatchHeader(t *testing.T) {
	h := batchTestHeader(CodecLZ4)
	h.BaseOffset = 1 << 40
	h.Attributes |= batchAttributeTransactional | batchAttributeLogAppendTime
	b := batchTestEncode(t, h, batchTestRecords(5, 10, 9))
	got, err := ParseBatchHeader(append(bytes.Clone(b), "next batch"...))
	if err != nil {
		t.Fatal(err)
	}
	if got.BaseOffset != 1<<40 || got.LastOffset() != 1<<40+4 || got.Size() != len(b) || got.Codec() != CodecLZ4 ||
		!got.IsTransactional() || !got.LogAppendTime() || got.IsControl() || got.NumRecords != 5 {
		t.Fatalf("ParseBatchHeader = %+v", got)
	}
	for n := range len(b) {
		if _, err := ParseBatchHeader(b[:n]); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("ParseBatchHeader of %d of %d bytes: %v", n, len(b), err)
		}
	}
	short := bytes.Clone(b)
	binary.BigEndian.PutUint32(short[batchLengthOffset:], 48)
	if _, err := ParseBatchHeader(short); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("length 48: %v", err)
	}
	binary.BigEndian.PutUint32(short[batchLengthOffset:], 0x80000000)
	if _, err := ParseBatchHeader(short); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("negative length: %v", err)
	}
}

func TestEncodeBatchLastOffsetDelta(t *testing.T) {
	// Compaction keeps the original offset range: deltas with gaps and a
	// header LastOffsetDelta past the last surviving record.
	compacted := []Record{{OffsetDelta: 0, Key: []byte("a")}, {OffsetDelta: 2, Key: []byte("b")}, {OffsetDelta: 5, Key: []byte("c")}}
	h := batchTestHeader(CodecZstd)
	h.LastOffsetDelta = 7
	b := batchTestEncode(t, h, compacted)
	got, records, err := DecodeRecords(b)
	if err != nil {
		t.Fatalf("DecodeRecords of a compacted batch: %v", err)
	}
	if got.LastOffsetDelta != 7 || got.NumRecords != 3 || !reflect.DeepEqual(records, compacted) {
		t.Fatalf("compacted batch header %+v", got)
	}
	if _, err := ValidateBatch(b, ValidateOptions{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ValidateBatch of a batch with gaps: %v; want ErrInvalidRecord", err)
	}

	// A smaller header value is replaced by the last record's delta.
	h.LastOffsetDelta = 1
	if got, _, _ := DecodeRecords(batchTestEncode(t, h, compacted)); got.LastOffsetDelta != 5 {
		t.Fatalf("LastOffsetDelta = %d; want 5", got.LastOffsetDelta)
	}

	// No records: an empty batch, codec none, as Kafka keeps for producer state.
	h.LastOffsetDelta = 9
	empty := batchTestEncode(t, h, nil)
	if len(empty) != BatchHeaderSize {
		t.Fatalf("empty batch is %d bytes", len(empty))
	}
	got, records, err = DecodeRecords(empty)
	if err != nil || len(records) != 0 || got.NumRecords != 0 || got.LastOffsetDelta != 9 || got.Codec() != CodecNone || got.ProducerID != 77 {
		t.Fatalf("empty batch: %+v, %d records, %v", got, len(records), err)
	}
	if _, err := ValidateBatch(empty, ValidateOptions{}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ValidateBatch of an empty batch: %v; want ErrInvalidRecord", err)
	}

	for name, records := range map[string][]Record{
		"repeated delta": {{OffsetDelta: 0}, {OffsetDelta: 0}},
		"falling delta":  {{OffsetDelta: 3}, {OffsetDelta: 2}},
		"negative delta": {{OffsetDelta: -1}},
	} {
		if _, err := EncodeBatch(BatchHeader{}, records); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: EncodeBatch error = %v; want ErrInvalidRecord", name, err)
		}
	}
}

func TestDecodeRecordsErrors(t *testing.T) {
	valid := batchTestEncode(t, batchTestHeader(CodecGzip), batchTestRecords(3, 10, 10))
	bad := bytes.Clone(valid)
	bad[len(bad)-3] ^= 0xff
	magic := bytes.Clone(valid)
	magic[batchMagicOffset] = 1
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"truncated":      {valid[:len(valid)-1], ErrCorruptMessage},
		"trailing bytes": {append(bytes.Clone(valid), 0), ErrCorruptMessage},
		"bad CRC":        {bad, ErrCorruptMessage},
		"magic 1":        {magic, ErrUnsupportedMessageFormat},
	}
	for name, tc := range cases {
		if _, _, err := DecodeRecords(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: DecodeRecords error = %v; want %v", name, err, tc.want)
		}
	}
}

func TestBatchSetters(t *testing.T) {
	b := batchTestEncode(t, batchTestHeader(CodecSnappy), batchTestRecords(4, 50, 11))
	SetBaseOffset(b, 9_000_000_000)
	SetPartitionLeaderEpoch(b, 12)
	h, err := ValidateBatch(b, ValidateOptions{})
	if err != nil {
		t.Fatalf("after SetBaseOffset and SetPartitionLeaderEpoch: %v", err)
	}
	if h.BaseOffset != 9_000_000_000 || h.LastOffset() != 9_000_000_003 || h.PartitionLeaderEpoch != 12 || h.LogAppendTime() {
		t.Fatalf("header %+v", h)
	}
	SetLogAppendTime(b, 1_800_000_000_000)
	h, err = ValidateBatch(b, ValidateOptions{})
	if err != nil {
		t.Fatalf("after SetLogAppendTime: %v", err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 1_800_000_000_000 || h.Codec() != CodecSnappy {
		t.Fatalf("header %+v", h)
	}
}

// TestValidateBatchAllocations pins that validating a batch allocates
// nothing once the pools are warm.
func TestValidateBatchAllocations(t *testing.T) {
	// The race detector makes sync.Pool drop items at random; then only the
	// uncompressed path, which uses no pool, can be held to zero.
	probeNews := 0
	probe := sync.Pool{New: func() any { probeNews++; return new([64]byte) }}
	for range 1000 {
		probe.Put(probe.Get())
	}
	poolsReliable := probeNews < 10 // a GC may empty the pool once or twice
	for _, codec := range batchTestCodecs {
		if codec != CodecNone && !poolsReliable {
			continue
		}
		b := batchTestEncode(t, batchTestHeader(codec), batchTestRecords(16, 1024, 12))
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := ValidateBatch(b, ValidateOptions{RequireKeys: false}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: ValidateBatch allocates %.1f times per call; want 0", codec, allocs)
		}
	}
}

// BenchmarkValidateBatch validates a 16 KiB batch of 16 keyed 1 KiB records.
// MB/s is of the uncompressed batch; batch-bytes is the size on the wire.
func BenchmarkValidateBatch(b *testing.B) {
	records := batchTestRecords(16, 1024, 13)
	for i := range records {
		records[i].Key = fmt.Appendf(nil, "key-%d", i)
		if records[i].Value == nil {
			records[i].Value = records[0].Value
		}
	}
	uncompressed := batchTestEncode(b, batchTestHeader(CodecNone), records)
	for _, codec := range batchTestCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			batch := batchTestEncode(b, batchTestHeader(codec), records)
			b.SetBytes(int64(len(uncompressed)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatch(batch, ValidateOptions{RequireKeys: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(batch)), "batch-bytes")
		})
	}
}

func BenchmarkDecodeRecords(b *testing.B) {
	records := batchTestRecords(16, 1024, 13)
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			batch := batchTestEncode(b, batchTestHeader(codec), records)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeRecords(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
