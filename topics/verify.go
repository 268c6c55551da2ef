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
	v := logVerifier{res: VerifyResult{Damaged: []Damage{}}, maxReported: opts.MaxReported}
	if err := v.readCatalog(store); err != nil {
		return v.res, err
	}
	var total int64
	if opts.Progress != nil {
		var err error
		if total, err = countBatchIndexRows(store); err != nil {
			return v.res, err
		}
		opts.Progress(0, total)
	}
	err := v.walk(store, func() {
		if opts.Progress != nil && v.res.Batches%1024 == 0 {
			opts.Progress(v.res.Batches, max(total, v.res.Batches))
		}
	})
	if err != nil {
		return v.res, err
	}
	if opts.Progress != nil {
		opts.Progress(v.res.Batches, max(total, v.res.Batches))
	}
	return v.res, nil
}

// logVerifier is one VerifyLog: the result so far, the topic names of the
// catalog, and the end of the previous batch of the partition being
// walked.
type logVerifier struct {
	res         VerifyResult
	maxReported int
	names       map[TopicID]string
	prevPart    []byte // topic ID | partition of the previous batch
	prevEnd     int64  // offset after the previous batch
}

// readCatalog reads the topic catalog: the names damage is reported with,
// and the counts of topics and partitions.
func (v *logVerifier) readCatalog(store *pebblestore.Store) error {
	v.names = map[TopicID]string{}
	it, err := store.NewIter(pebblestore.TopicPrefix(), pebblestore.PrefixEnd(pebblestore.TopicPrefix()))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var id TopicID
		key := it.Key()
		if len(key) != 17 {
			continue
		}
		copy(id[:], key[1:])
		name := "?"
		if val, err := it.Value(); err == nil {
			var rec topicRecord
			if json.Unmarshal(val, &rec) == nil {
				name = rec.Name
				v.res.Partitions += int(rec.Partitions)
			}
		}
		v.names[id] = name
		v.res.Topics++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("verify: reading the topic catalog: %w", err)
	}
	return nil
}

// countBatchIndexRows counts the batch index rows: the total of the
// progress reports.
func countBatchIndexRows(store *pebblestore.Store) (int64, error) {
	idxPrefix := []byte{pebblestore.PrefixBatchIndex}
	it, err := store.NewIter(idxPrefix, pebblestore.PrefixEnd(idxPrefix))
	if err != nil {
		return 0, err
	}
	var total int64
	for ok := it.First(); ok; ok = it.Next() {
		total++
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("verify: counting batches: %w", err)
	}
	return total, nil
}

// report records one problem found at key (a batch key).
func (v *logVerifier) report(key []byte, reason string) {
	v.res.DamagedTotal++
	if len(v.res.Damaged) >= v.maxReported {
		return
	}
	d := Damage{Key: hex.EncodeToString(key), Reason: reason, Partition: -1, Offset: -1}
	if len(key) == 29 {
		var id TopicID
		copy(id[:], key[1:17])
		d.TopicID = hex.EncodeToString(id[:])
		d.Topic = v.names[id]
		if d.Topic == "" {
			d.Topic = "(no catalog row)"
		}
		d.Partition = int32(binary.BigEndian.Uint32(key[17:21]))
		d.Offset = int64(binary.BigEndian.Uint64(key[21:29]))
	}
	v.res.Damaged = append(v.res.Damaged, d)
}

// walk walks the batch table and the batch index together, in suffix
// order (topic ID, partition, base offset), reporting index rows without
// a batch and checking each batch (checkBatch). counted is called after
// each batch is counted.
func (v *logVerifier) walk(store *pebblestore.Store, counted func()) error {
	batchPrefix := []byte{pebblestore.PrefixBatch}
	batches, err := store.NewIter(batchPrefix, pebblestore.PrefixEnd(batchPrefix))
	if err != nil {
		return err
	}
	defer batches.Close()
	idxPrefix := []byte{pebblestore.PrefixBatchIndex}
	index, err := store.NewIter(idxPrefix, pebblestore.PrefixEnd(idxPrefix))
	if err != nil {
		return err
	}
	defer index.Close()

	okB, okI := batches.First(), index.First()
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
			v.report(key, "an index row has no batch: the batch is missing")
			okI = index.Next()
			continue
		}
		key := append([]byte(nil), batches.Key()...)
		v.res.Batches++
		counted()
		if len(key) != 29 {
			v.report(key, fmt.Sprintf("a batch key has %d bytes, want 29", len(key)))
			okB = batches.Next()
			continue
		}
		var indexRow *pebblestore.Iter // positioned on the batch's index row
		if c == 0 {
			indexRow = index
		}
		v.checkBatch(key, batches, indexRow)
		if c != 0 {
			v.report(key, "the batch has no index row")
		} else {
			okI = index.Next()
		}
		okB = batches.Next()
	}
	if err := batches.Close(); err != nil {
		return fmt.Errorf("verify: %w: reading stored batches: %v", pebblestore.ErrCorruption, err)
	}
	if err := index.Close(); err != nil {
		return fmt.Errorf("verify: %w: reading batch index rows: %v", pebblestore.ErrCorruption, err)
	}
	return nil
}

// checkBatch checks the batch at key (batches positioned on it): its topic
// is in the catalog, the batch itself (VerifyStoredBatch), that it does not
// overlap the previous batch of its partition, and that its index row
// (index positioned on it; nil when it has none) describes it.
func (v *logVerifier) checkBatch(key []byte, batches, index *pebblestore.Iter) {
	if _, known := v.names[TopicID(key[1:17])]; !known {
		v.report(key, "the batch belongs to no topic in the catalog")
	}
	value, err := batches.Value()
	if err != nil {
		v.report(key, "cannot read the stored value: "+err.Error())
		return
	}
	v.res.Bytes += int64(len(value))
	h, err := VerifyStoredBatch(key, value)
	if err != nil {
		v.report(key, err.Error())
		return
	}
	part := key[1:21]
	if bytes.Equal(part, v.prevPart) && h.BaseOffset < v.prevEnd {
		v.report(key, fmt.Sprintf("the batch at %d overlaps the previous batch, which ends at %d", h.BaseOffset, v.prevEnd-1))
	}
	v.prevPart = append(v.prevPart[:0], part...)
	v.prevEnd = h.LastOffset() + 1
	if index == nil {
		return
	}
	if iv, err := index.Value(); err != nil {
		v.report(key, "cannot read the index row: "+err.Error())
	} else if idx, err := decodeBatchIndex(iv); err != nil {
		v.report(key, "index row: "+err.Error())
	} else if idx.LastOffset != h.LastOffset() || int(idx.Size) != len(value) {
		v.report(key, fmt.Sprintf("the index row says last offset %d and %d bytes, the batch has %d and %d", idx.LastOffset, idx.Size, h.LastOffset(), len(value)))
	}
}
