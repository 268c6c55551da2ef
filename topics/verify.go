package topics

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// VerifyStoredBatch checks one stored batch row (a pebblestore.BatchKey and
// its value): the value is one whole v2 RecordBatch whose CRC-32C matches
// its bytes and whose base offset is the one in the key. Errors wrap
// ErrCorruptMessage or ErrUnsupportedMessageFormat and say what is wrong.
func VerifyStoredBatch(key, value []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(value)
	if err != nil {
		return h, err
	}
	if h.Magic != batchMagic {
		return h, fmt.Errorf("%w: batch magic is %d, want 2", ErrUnsupportedMessageFormat, h.Magic)
	}
	if len(value) != h.Size() {
		return h, fmt.Errorf("%w: the stored value is %d bytes but its batch length says %d", ErrCorruptMessage, len(value), h.Size())
	}
	if err := batchCheckCRC(value, &h); err != nil {
		return h, err
	}
	if base := pebblestore.OffsetFromKey(key); base != h.BaseOffset {
		return h, fmt.Errorf("%w: the batch is stored at offset %d but its header says base offset %d", ErrCorruptMessage, base, h.BaseOffset)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: last offset delta %d is negative", ErrCorruptMessage, h.LastOffsetDelta)
	}
	return h, nil
}

// Damage is one problem VerifyLog found.
type Damage struct {
	Topic     string
	TopicID   string
	Partition int32
	// Offset is the base offset of the damaged batch (or index row).
	Offset int64
	Key    string // hex
	Reason string
}

// VerifyResult is what VerifyLog checked and found.
type VerifyResult struct {
	Topics     int
	Partitions int
	Batches    int64
	Bytes      int64
	Damaged    []Damage
	// DamagedTotal counts every problem; Damaged keeps the first
	// VerifyOptions.MaxReported.
	DamagedTotal int64
}

// VerifyOptions tune VerifyLog.
type VerifyOptions struct {
	// Progress, if set, is called now and then with the batches checked
	// and the total (the number of batch index rows).
	Progress func(done, total int64)
	// MaxReported bounds Damaged (default 1000).
	MaxReported int
}

// VerifyLog re-checks every stored batch of every partition in store: the
// CRC and framing of each batch (VerifyStoredBatch), that each batch has an
// index row describing it and each index row a batch, and that batches of a
// partition do not overlap. It reads a consistent snapshot and works on a
// live store or an offline one. The returned error is for a failure to read
// (for instance Pebble's own checksums failing); damage found in batches is
// reported in the result.
func VerifyLog(store *pebblestore.Store, opts VerifyOptions) (VerifyResult, error) {
	if opts.MaxReported <= 0 {
		opts.MaxReported = 1000
	}
	res := VerifyResult{Damaged: []Damage{}}
	names := map[TopicID]string{}
	{
		it, err := store.NewIter(pebblestore.TopicPrefix(), pebblestore.PrefixEnd(pebblestore.TopicPrefix()))
		if err != nil {
			return res, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			var id TopicID
			key := it.Key()
			if len(key) != 17 {
				continue
			}
			copy(id[:], key[1:])
			name := "?"
			if v, err := it.Value(); err == nil {
				var rec topicRecord
				if json.Unmarshal(v, &rec) == nil {
					name = rec.Name
					res.Partitions += int(rec.Partitions)
				}
			}
			names[id] = name
			res.Topics++
		}
		if err := it.Close(); err != nil {
			return res, fmt.Errorf("verify: reading the topic catalog: %w", err)
		}
	}

	var total int64
	idxPrefix := []byte{pebblestore.PrefixBatchIndex}
	if opts.Progress != nil {
		it, err := store.NewIter(idxPrefix, pebblestore.PrefixEnd(idxPrefix))
		if err != nil {
			return res, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			total++
		}
		if err := it.Close(); err != nil {
			return res, fmt.Errorf("verify: counting batches: %w", err)
		}
		opts.Progress(0, total)
	}

	report := func(key []byte, reason string) {
		res.DamagedTotal++
		if len(res.Damaged) >= opts.MaxReported {
			return
		}
		d := Damage{Key: hex.EncodeToString(key), Reason: reason, Partition: -1, Offset: -1}
		if len(key) == 29 {
			var id TopicID
			copy(id[:], key[1:17])
			d.TopicID = hex.EncodeToString(id[:])
			d.Topic = names[id]
			if d.Topic == "" {
				d.Topic = "(no catalog row)"
			}
			d.Partition = int32(binary.BigEndian.Uint32(key[17:21]))
			d.Offset = int64(binary.BigEndian.Uint64(key[21:29]))
		}
		res.Damaged = append(res.Damaged, d)
	}

	batchPrefix := []byte{pebblestore.PrefixBatch}
	batches, err := store.NewIter(batchPrefix, pebblestore.PrefixEnd(batchPrefix))
	if err != nil {
		return res, err
	}
	defer batches.Close()
	index, err := store.NewIter(idxPrefix, pebblestore.PrefixEnd(idxPrefix))
	if err != nil {
		return res, err
	}
	defer index.Close()

	// Walk both tables in suffix order (topic ID, partition, base offset).
	okB, okI := batches.First(), index.First()
	var prevPart []byte // topic ID | partition of the previous batch
	var prevEnd int64   // offset after the previous batch
	for okB || okI {
		var c int
		switch {
		case !okB:
			c = 1
		case !okI:
			c = -1
		default:
			c = bytes.Compare(batches.Key()[1:], index.Key()[1:])
		}
		if c > 0 {
			key := append([]byte{pebblestore.PrefixBatch}, index.Key()[1:]...)
			report(key, "an index row has no batch: the batch is missing")
			okI = index.Next()
			continue
		}
		key := append([]byte(nil), batches.Key()...)
		res.Batches++
		if opts.Progress != nil && res.Batches%1024 == 0 {
			opts.Progress(res.Batches, max(total, res.Batches))
		}
		if len(key) != 29 {
			report(key, fmt.Sprintf("a batch key has %d bytes, want 29", len(key)))
			okB = batches.Next()
			continue
		}
		if _, known := names[TopicID(key[1:17])]; !known {
			report(key, "the batch belongs to no topic in the catalog")
		}
		value, err := batches.Value()
		if err != nil {
			report(key, "cannot read the stored value: "+err.Error())
		} else {
			res.Bytes += int64(len(value))
			h, err := VerifyStoredBatch(key, value)
			if err != nil {
				report(key, err.Error())
			} else {
				part := key[1:21]
				if bytes.Equal(part, prevPart) && h.BaseOffset < prevEnd {
					report(key, fmt.Sprintf("the batch at %d overlaps the previous batch, which ends at %d", h.BaseOffset, prevEnd-1))
				}
				prevPart = append(prevPart[:0], part...)
				prevEnd = h.LastOffset() + 1
				if c == 0 {
					if iv, err := index.Value(); err != nil {
						report(key, "cannot read the index row: "+err.Error())
					} else if idx, err := decodeBatchIndex(iv); err != nil {
						report(key, "index row: "+err.Error())
					} else if idx.LastOffset != h.LastOffset() || int(idx.Size) != len(value) {
						report(key, fmt.Sprintf("the index row says last offset %d and %d bytes, the batch has %d and %d", idx.LastOffset, idx.Size, h.LastOffset(), len(value)))
					}
				}
			}
		}
		if c != 0 {
			report(key, "the batch has no index row")
		} else {
			okI = index.Next()
		}
		okB = batches.Next()
	}
	if opts.Progress != nil {
		opts.Progress(res.Batches, max(total, res.Batches))
	}
	if err := batches.Close(); err != nil {
		return res, fmt.Errorf("verify: %w: reading stored batches: %v", pebblestore.ErrCorruption, err)
	}
	if err := index.Close(); err != nil {
		return res, fmt.Errorf("verify: %w: reading batch index rows: %v", pebblestore.ErrCorruption, err)
	}
	return res, nil
}
