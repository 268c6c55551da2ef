package topics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// FuzzValidateBatch checks, for any input:
//   - ValidateBatch, ParseBatchHeader and DecodeRecords never panic, and every
//     error wraps one of the sentinels;
//   - a batch that validates also decodes with DecodeRecords into NumRecords
//     records with offset deltas 0..n-1, and re-encodes (EncodeBatch, same
//     codec) into a batch that validates and decodes to the same records;
//   - a header that parses from the first half of the input parses equal
//     from the whole input (inputs fed in two halves).
//
// Mutations almost always break the CRC or the length, so each input is also
// tried with BatchLength and CRC repaired; that lets the fuzzer reach the
// record decoder.
func FuzzValidateBatch(f *testing.F) {
	for _, codec := range batchTestCodecs {
		for _, n := range []int{1, 3} {
			b, err := EncodeBatch(batchTestHeader(codec), batchTestRecords(n, 40, uint64(n)))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	h := batchTestHeader(CodecSnappy)
	h.NumRecords, h.LastOffsetDelta = 2, 1
	f.Add(batchTestRaw(h, batchTestXerial(batchAppendRecords(nil, batchTestRecords(2, 30, 9)), 40)))
	f.Add([]byte{})
	f.Add(make([]byte, BatchHeaderSize))

	f.Fuzz(func(t *testing.T, data []byte) {
		batchFuzzCheck(t, data)
		if len(data) >= BatchHeaderSize {
			repaired := bytes.Clone(data)
			binary.BigEndian.PutUint32(repaired[batchLengthOffset:], uint32(len(repaired)-batchLogOverhead))
			batchUpdateCRC(repaired)
			batchFuzzCheck(t, repaired)
		}
		half := data[:len(data)/2]
		if hh, err := ParseBatchHeader(half); err == nil {
			hf, err := ParseBatchHeader(data)
			if err != nil || hf != hh {
				t.Fatalf("header parsed from the first half %+v differs from the whole %+v (%v)", hh, hf, err)
			}
		}
	})
}

func batchFuzzCheck(t *testing.T, data []byte) {
	for _, opts := range []ValidateOptions{{}, {RequireKeys: true, MaxBatchBytes: 1 << 10}} {
		h, err := ValidateBatch(data, opts)
		if err != nil {
			batchFuzzSentinel(t, "ValidateBatch", err)
			continue
		}
		h2, records, err := DecodeRecords(data)
		if err != nil {
			t.Fatalf("ValidateBatch accepted a batch DecodeRecords refuses: %v", err)
		}
		if h2 != h || len(records) != int(h.NumRecords) {
			t.Fatalf("DecodeRecords: header %+v and %d records; ValidateBatch: %+v", h2, len(records), h)
		}
		for i, r := range records {
			if r.OffsetDelta != int32(i) {
				t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
			}
			if opts.RequireKeys && r.Key == nil {
				t.Fatalf("record %d has a null key but RequireKeys passed", i)
			}
		}
		again, err := EncodeBatch(h, records)
		if err != nil {
			t.Fatalf("EncodeBatch of decoded records: %v", err)
		}
		if _, err := ValidateBatch(again, ValidateOptions{}); err != nil {
			t.Fatalf("re-encoded batch does not validate: %v", err)
		}
		_, records2, err := DecodeRecords(again)
		if err != nil || !reflect.DeepEqual(records2, records) {
			t.Fatalf("re-encoded batch decodes differently (%v)", err)
		}
	}
	if _, _, err := DecodeRecords(data); err != nil {
		batchFuzzSentinel(t, "DecodeRecords", err)
	}
}

func batchFuzzSentinel(t *testing.T, what string, err error) {
	for _, sentinel := range []error{ErrCorruptMessage, ErrInvalidRecord, ErrMessageTooLarge, ErrUnsupportedCompression, ErrUnsupportedMessageFormat} {
		if errors.Is(err, sentinel) {
			return
		}
	}
	t.Fatalf("%s error %v wraps no sentinel", what, err)
}

// FuzzCodecDecompress checks that Decompress never panics, fails only with
// ErrCorruptMessage, and never returns more than the decompression limit.
func FuzzCodecDecompress(f *testing.F) {
	raw := batchAppendRecords(nil, batchTestRecords(5, 100, 1))
	for _, codec := range batchTestCodecs[1:] {
		c, err := Compress(codec, raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(int8(codec), c)
	}
	f.Add(int8(CodecSnappy), batchTestXerial(raw, 64))
	f.Fuzz(func(t *testing.T, codec int8, data []byte) {
		c := Codec(codec & batchAttributeCodecMask)
		if c == CodecNone || !c.Known() {
			return
		}
		out, err := Decompress(c, data)
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("%s: error %v is not ErrCorruptMessage", c, err)
			}
			return
		}
		if len(out) > codecDecompressedLimit(len(data)) {
			t.Fatalf("%s: %d bytes decompressed to %d, above the limit", c, len(data), len(out))
		}
	})
}
