// Package coordlog simulates, for the tests of groups and txns, what a
// replicated coordinator partition's leader does to the partition's log
// (__consumer_offsets, __transaction_state): compaction as
// cluster/partition_compact.go applies topics.ReplicatedCompactor, the
// compactor cmd/broker wires in. Test support only: no broker code
// imports it.
package coordlog

import (
	"fmt"
	"time"

	"github.com/vibemq/broker/topics"
)

// Compact returns batches compacted as a replicated partition's
// compaction command compacts them: over every batch but the last (never
// compacted), the latest record of each key stays, a tombstone until the
// horizon now + deleteRetention stamped on its batch; a batch left empty
// leaves the log, as it leaves the partition's index. Kept batches keep
// their base offsets. The batches hold no transactional batch.
func Compact(batches [][]byte, now time.Time, deleteRetention time.Duration) ([][]byte, error) {
	var c topics.ReplicatedCompactor
	notAborted := func(int64, int64) bool { return false }
	latest := map[string]int64{}
	n := len(batches) - 1
	for _, b := range batches[:max(n, 0)] {
		if err := c.Map(b, notAborted, latest); err != nil {
			return nil, err
		}
	}
	nowMs := now.UnixMilli()
	var kept [][]byte
	for i, b := range batches {
		if i < n {
			h, _ := topics.ParseBatchHeader(b)
			nb, _, err := c.Clean(b, notAborted, latest, nowMs, nowMs+max(deleteRetention.Milliseconds(), 1))
			if err != nil {
				return nil, err
			}
			if nb != nil {
				topics.SetBaseOffset(nb, h.BaseOffset)
				b = nb
			}
			if nh, _ := topics.ParseBatchHeader(b); nh.NumRecords == 0 {
				continue
			}
		}
		kept = append(kept, b)
	}
	return kept, nil
}

// Tombstones counts the records of batches without a value.
func Tombstones(batches [][]byte) (int, error) {
	n := 0
	for i, b := range batches {
		_, recs, err := topics.DecodeRecords(b)
		if err != nil {
			return 0, fmt.Errorf("coordlog: batch %d of %d does not decode: %w", i, len(batches), err)
		}
		for _, r := range recs {
			if r.Value == nil {
				n++
			}
		}
	}
	return n, nil
}

// Size is the bytes of batches.
func Size(batches [][]byte) int {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	return n
}
