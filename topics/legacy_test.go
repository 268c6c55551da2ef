package topics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"
)

// legacySet builds a message set of uncompressed messages, offsets 0..n-1.
func legacySet(magic int8, ts int64, kvs ...[2][]byte) []byte {
	var set []byte
	for i, kv := range kvs {
		set = legacyAppend(set, int64(i), legacyMessage{magic: magic, timestamp: ts + int64(i), key: kv[0], value: kv[1]})
	}
	return set
}

// legacyWrapper wraps inner in one compressed message of the given magic.
func legacyWrapper(t testing.TB, magic int8, codec Codec, ts int64, inner []byte) []byte {
	t.Helper()
	value, err := Compress(codec, inner)
	if err != nil {
		t.Fatal(err)
	}
	return legacyAppend(nil, 0, legacyMessage{magic: magic, attributes: int8(codec), timestamp: ts, value: value})
}

func kv(k, v string) [2][]byte {
	var kb, vb []byte
	if k != "" {
		kb = []byte(k)
	}
	if v != "" {
		vb = []byte(v)
	}
	return [2][]byte{kb, vb}
}

// TestUpconvertMessageSet: message sets of magic 0 and 1, plain and in
// compressed wrappers of every codec old clients used, become one v2 batch
// with the same keys, values (nulls kept) and timestamps, numbered from 0,
// with no producer ID; magic 0 takes the append time.
func TestUpconvertMessageSet(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	const ts = 1_600_000_000_000
	plain := []([2][]byte){kv("k1", "v1"), kv("", "v2"), kv("k3", "")}
	cases := []struct {
		name    string
		set     []byte
		codec   Codec
		wantTS0 int64
	}{
		{"magic0", legacySet(0, 0, plain...), CodecNone, now.UnixMilli()},
		{"magic1", legacySet(1, ts, plain...), CodecNone, ts},
		{"magic1-gzip", legacyWrapper(t, 1, CodecGzip, ts+9, legacySet(1, ts, plain...)), CodecGzip, ts},
		{"magic1-snappy", legacyWrapper(t, 1, CodecSnappy, ts+9, legacySet(1, ts, plain...)), CodecSnappy, ts},
		{"magic1-lz4", legacyWrapper(t, 1, CodecLZ4, ts+9, legacySet(1, ts, plain...)), CodecLZ4, ts},
		{"magic0-gzip", legacyWrapper(t, 0, CodecGzip, 0, legacySet(0, 0, plain...)), CodecGzip, now.UnixMilli()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			batch, err := UpconvertMessageSet(c.set, now)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateBatch(batch, ValidateOptions{}); err != nil {
				t.Fatalf("converted batch does not validate: %v", err)
			}
			h, records, err := DecodeRecords(batch)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec() != c.codec || h.ProducerID != -1 || h.BaseSequence != -1 {
				t.Errorf("header: codec %s producer %d seq %d; want %s, -1, -1", h.Codec(), h.ProducerID, h.BaseSequence, c.codec)
			}
			if len(records) != len(plain) {
				t.Fatalf("%d records, want %d", len(records), len(plain))
			}
			for i, r := range records {
				if r.OffsetDelta != int32(i) || !bytes.Equal(r.Key, plain[i][0]) || !bytes.Equal(r.Value, plain[i][1]) ||
					(r.Key == nil) != (plain[i][0] == nil) || (r.Value == nil) != (plain[i][1] == nil) {
					t.Errorf("record %d: delta %d key %q value %q; want %d %q %q", i, r.OffsetDelta, r.Key, r.Value, i, plain[i][0], plain[i][1])
				}
				wantTS := c.wantTS0
				if c.wantTS0 == ts {
					wantTS += int64(i)
				}
				if got := h.BaseTimestamp + r.TimestampDelta; got != wantTS {
					t.Errorf("record %d: timestamp %d, want %d", i, got, wantTS)
				}
			}
		})
	}
}

// TestUpconvertMessageSetErrors: damaged or unconvertible sets get the
// sentinel that maps to Kafka's code, and never a panic.
func TestUpconvertMessageSetErrors(t *testing.T) {
	now := time.Now()
	good := legacySet(1, 1, kv("k", "v"))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	v2 := bytes.Clone(good)
	v2[16] = 2
	binary.BigEndian.PutUint32(v2[12:], crcOf(v2[16:]))
	magic5 := bytes.Clone(good)
	magic5[16] = 5
	binary.BigEndian.PutUint32(magic5[12:], crcOf(magic5[16:]))
	nested := legacyWrapper(t, 1, CodecGzip, 1, legacyWrapper(t, 1, CodecGzip, 1, good))
	zstd := legacyWrapper(t, 1, CodecZstd, 1, good)
	badValue := legacyAppend(nil, 0, legacyMessage{magic: 1, attributes: int8(CodecGzip), timestamp: 1, value: []byte("not gzip at all, not at all")})
	emptyWrapper := legacyWrapper(t, 1, CodecGzip, 1, nil)
	cases := []struct {
		name string
		set  []byte
		want error
	}{
		{"empty", nil, ErrInvalidRecord},
		{"truncated", good[:len(good)-1], ErrCorruptMessage},
		{"trailing bytes", append(bytes.Clone(good), 0, 0, 0), ErrCorruptMessage},
		{"bad crc", badCRC, ErrCorruptMessage},
		{"v2 batch", v2, ErrInvalidRecord},
		{"magic 5", magic5, ErrInvalidRecord},
		{"nested compression", nested, ErrCorruptMessage},
		{"zstd", zstd, ErrUnsupportedCompression},
		{"undecodable gzip", badValue, ErrCorruptMessage},
		{"empty wrapper", emptyWrapper, ErrCorruptMessage},
	}
	for _, c := range cases {
		if _, err := UpconvertMessageSet(c.set, now); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

func crcOf(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// TestDownconvertBatches: stored v2 batches (compressed, with headers, a
// control batch between them, a LogAppendTime batch) read by a Fetch v0-v3
// client: each record once as an uncompressed message of the asked magic,
// absolute offsets, records below the fetch offset and control batches
// left out, and the limit cut at a message boundary.
func TestDownconvertBatches(t *testing.T) {
	const ts = 1_600_000_000_000
	enc := func(base int64, attrs int16, maxTS int64, recs ...Record) []byte {
		b, err := EncodeBatch(BatchHeader{BaseOffset: base, Attributes: attrs, BaseTimestamp: ts, MaxTimestamp: maxTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hdr := []RecordHeader{{Key: "h", Value: []byte("x")}}
	var log []byte
	log = append(log, enc(0, int16(CodecZstd), ts+1,
		Record{OffsetDelta: 0, Key: []byte("a"), Value: []byte("1"), Headers: hdr},
		Record{OffsetDelta: 1, TimestampDelta: 1, Value: []byte("2")})...)
	marker, err := ControlBatch(7, 0, true, 0, time.UnixMilli(ts))
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(marker, 2)
	log = append(log, marker...)
	log = append(log, enc(3, batchAttributeLogAppendTime, ts+500,
		Record{OffsetDelta: 0, Key: []byte("c"), Value: nil})...)

	type msg struct {
		offset int64
		magic  int8
		attrs  int8
		ts     int64
		key    []byte
		value  []byte
	}
	decode := func(set []byte) []msg {
		var out []msg
		for pos := 0; pos < len(set); {
			size := int(binary.BigEndian.Uint32(set[pos+8:]))
			m, err := legacyDecode(set[pos+12 : pos+12+size])
			if err != nil {
				t.Fatalf("message at %d: %v", pos, err)
			}
			out = append(out, msg{int64(binary.BigEndian.Uint64(set[pos:])), m.magic, m.attributes, m.timestamp, m.key, m.value})
			pos += 12 + size
		}
		return out
	}
	for _, magic := range []int8{0, 1} {
		set, next, err := DownconvertBatches(nil, log, magic, 1, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := decode(set)
		if len(got) != 2 || next != 4 {
			t.Fatalf("magic %d: %d messages, next %d; want 2 (offsets 1 and 3), next 4", magic, len(got), next)
		}
		want := []msg{{1, magic, 0, ts + 1, nil, []byte("2")}, {3, magic, legacyTimestampLogAppendTime, ts + 500, []byte("c"), nil}}
		if magic == 0 {
			want[0].ts, want[1].ts, want[1].attrs = -1, -1, 0
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.offset != w.offset || g.magic != w.magic || g.attrs != w.attrs || g.ts != w.ts ||
				!bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) {
				t.Errorf("magic %d message %d: %+v, want %+v", magic, i, g, w)
			}
		}
	}
	// A limit below the first message still returns it; below two, one.
	set, next, err := DownconvertBatches(nil, log, 1, 0, 1)
	if err != nil || len(decode(set)) != 1 || next != 1 {
		t.Errorf("limit 1: %d messages next %d err %v; want 1 message, next 1", len(decode(set)), next, err)
	}
}

// FuzzLegacyConvert checks, for any input: UpconvertMessageSet and
// DownconvertBatches never panic and fail only with the sentinels; a set
// that converts gives a batch that validates, and converting that batch
// down gives one message per record with the same keys and values.
// Inputs whose first message has a bad CRC are also tried with it repaired,
// so the fuzzer reaches the decoder.
func FuzzLegacyConvert(f *testing.F) {
	f.Add(legacySet(0, 0, kv("k", "v"), kv("", "x")))
	f.Add(legacySet(1, 5, kv("k", ""), kv("a", "b")))
	f.Add(legacyWrapper(f, 1, CodecGzip, 5, legacySet(1, 5, kv("k", "v"))))
	f.Add(legacyWrapper(f, 1, CodecSnappy, 5, legacySet(1, 5, kv("k", "v"))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(set []byte) {
			batch, err := UpconvertMessageSet(set, time.UnixMilli(1))
			if err != nil {
				if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrUnsupportedCompression) {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			h, err := ValidateBatch(batch, ValidateOptions{})
			if err != nil {
				t.Fatalf("converted batch does not validate: %v", err)
			}
			_, records, err := DecodeRecords(batch)
			if err != nil {
				t.Fatal(err)
			}
			down, next, err := DownconvertBatches(nil, batch, 1, 0, 1<<30)
			if err != nil || next != int64(h.NumRecords) {
				t.Fatalf("downconvert: next %d err %v; want %d", next, err, h.NumRecords)
			}
			i := 0
			err = legacyForEach(down, func(m legacyMessage) error {
				if !bytes.Equal(m.key, records[i].Key) || !bytes.Equal(m.value, records[i].Value) {
					t.Fatalf("message %d differs from record", i)
				}
				i++
				return nil
			})
			if err != nil || i != len(records) {
				t.Fatalf("down-converted set: %d messages, err %v; want %d", i, err, len(records))
			}
		}
		if _, _, err := DownconvertBatches(nil, data, 1, 0, 1<<20); err != nil &&
			!errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) &&
			!errors.Is(err, ErrUnsupportedCompression) && !errors.Is(err, ErrUnsupportedMessageFormat) {
			t.Fatalf("downconvert of any input: unexpected error %v", err)
		}
		check(data)
		if len(data) >= legacyLogOverhead+legacyHeaderSizeV0 {
			fixed := bytes.Clone(data)
			size := int(int32(binary.BigEndian.Uint32(fixed[8:])))
			if size >= legacyHeaderSizeV0 && size <= len(fixed)-legacyLogOverhead {
				binary.BigEndian.PutUint32(fixed[12:], crc32.ChecksumIEEE(fixed[16:legacyLogOverhead+size]))
				check(fixed)
			}
		}
	})
}
