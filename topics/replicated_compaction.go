package topics

import "fmt"

// ReplicatedCompactor decides the compaction of a replicated partition's
// clean range batch by batch (package cluster applies it alike on every
// replica, cluster/partition_compact.go, in two passes over the range:
// Map over every batch, then Clean over every batch; cmd/broker wires it
// in, so cluster knows no record format beyond the batch header). Batches
// are whole v2 batches with their base offsets set; aborted reports
// whether a transactional data batch of producer pid at base offset is in
// an aborted transaction. The rules, as cleanBatch's on a local
// partition: the latest record of every key in the range stays (aborted
// and control batches do not enter the map); keyless records and aborted
// batches go; a batch keeping a tombstone is stamped with the delete
// horizon the first time (KIP-534) and the tombstone goes once a
// command's now reaches the stamp; control batches are kept. A rewritten
// batch keeps its base offset, last offset delta, producer fields and
// attributes (EncodeBatch); one left without records is an empty batch
// of codec none. Deterministic: the same batches and arguments give the
// same bytes.
type ReplicatedCompactor struct{}

// Map adds the keyed records of batch to latest (key -> its latest
// offset), unless batch is a control batch or an aborted one.
func (ReplicatedCompactor) Map(batch []byte, aborted func(pid, base int64) bool, latest map[string]int64) error {
	h, recs, err := DecodeRecords(batch)
	if err != nil {
		return fmt.Errorf("decode the batch of offset %d: %w", h.BaseOffset, err)
	}
	if h.IsControl() || (h.IsTransactional() && aborted(h.ProducerID, h.BaseOffset)) {
		return nil
	}
	for _, r := range recs {
		if r.Key != nil {
			latest[string(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
		}
	}
	return nil
}

// Clean is batch after compaction at nowMs with the map latest: its new
// bytes (nil when unchanged) and, when it keeps a tombstone, its delete
// horizon (its stamp, or horizon when stamped now), else -1.
func (ReplicatedCompactor) Clean(batch []byte, aborted func(pid, base int64) bool, latest map[string]int64, nowMs, horizon int64) ([]byte, int64, error) {
	h, recs, err := DecodeRecords(batch)
	if err != nil {
		return nil, -1, fmt.Errorf("decode the batch of offset %d: %w", h.BaseOffset, err)
	}
	if h.IsControl() {
		return nil, -1, nil
	}
	kept, tombstones := keptRecords(h, recs, latest, nowMs, h.IsTransactional() && aborted(h.ProducerID, h.BaseOffset))
	stamped := h.HasDeleteHorizon()
	bh := int64(-1)
	switch {
	case tombstones && stamped:
		bh = h.BaseTimestamp
	case tombstones:
		bh = horizon
	}
	if len(kept) == len(recs) && (!tombstones || stamped) {
		return nil, bh, nil
	}
	b, err := rebuildKept(h, kept, tombstones, horizon)
	if err != nil {
		return nil, -1, fmt.Errorf("rewrite the batch of offset %d: %w", h.BaseOffset, err)
	}
	return b, bh, nil
}

// keptRecords is what compaction keeps of batch h's records and whether
// a tombstone is among them.
func keptRecords(h BatchHeader, recs []Record, latest map[string]int64, nowMs int64, aborted bool) ([]Record, bool) {
	kept := make([]Record, 0, len(recs))
	tombstones := false
	for _, r := range recs {
		off := h.BaseOffset + int64(r.OffsetDelta)
		switch {
		case aborted || r.Key == nil || latest[string(r.Key)] > off:
			continue
		case r.Value == nil && h.HasDeleteHorizon() && nowMs >= h.BaseTimestamp:
			continue
		case r.Value == nil:
			tombstones = true
		}
		kept = append(kept, r)
	}
	return kept, tombstones
}

// rebuildKept encodes batch h with the records kept: stamped with
// horizon when it keeps a tombstone for the first time; record
// timestamps keep their absolute values.
func rebuildKept(h BatchHeader, kept []Record, tombstones bool, horizon int64) ([]byte, error) {
	nh := h
	nh.BaseOffset = 0 // reads set the base offset
	stamps := make([]int64, len(kept))
	maxTs := int64(-1)
	for k := range kept {
		stamps[k] = h.BaseTimestamp + kept[k].TimestampDelta
		maxTs = max(maxTs, stamps[k])
	}
	switch {
	case h.HasDeleteHorizon():
	case tombstones:
		nh.Attributes |= batchAttributeDeleteHorizon
		nh.BaseTimestamp = horizon
	case len(kept) > 0:
		nh.BaseTimestamp = stamps[0]
	}
	for k := range kept {
		kept[k].TimestampDelta = stamps[k] - nh.BaseTimestamp
	}
	if !h.LogAppendTime() && len(kept) > 0 {
		nh.MaxTimestamp = maxTs
	}
	if len(kept) == 0 {
		nh.Attributes &^= int16(batchAttributeCodecMask)
	}
	return EncodeBatch(nh, kept)
}
