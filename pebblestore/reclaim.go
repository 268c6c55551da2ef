package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Space reclaim. A Pebble range deletion only writes a tombstone: the data
// it covers stays on disk until a compaction reaches the range, which Pebble
// schedules at its own pace (minutes, or never for a range nothing writes
// to again). Deleting a 900 MB topic on an almost full disk then freed
// nothing, and the free-space guard kept refusing writes.
//
// So every committed Batch.DeleteRange is remembered (the store's reclaim
// queue) and Reclaim compacts the deleted ranges: it coalesces the queue,
// compacts each range (blob files whose every reference died go with the
// sstables), waits until Pebble has deleted the obsolete files (its cleanup
// runs asynchronously, after the compaction returns), and measures the
// free space again so that a guard that refused writes resumes at once.
// The store owns no goroutine: retention.ReclaimTask calls Reclaim when
// ReclaimWake fires. Domains only write range deletions; they never wait
// for a compaction and hold none of their locks during one.

// ReclaimRangesPerCall bounds the ranges one Reclaim call compacts; the
// rest stay queued (ReclaimResult.More).
const ReclaimRangesPerCall = 64

// ObsoleteFilesWait bounds how long Reclaim and CompactAll wait for Pebble
// to delete the files a compaction made obsolete.
const ObsoleteFilesWait = 10 * time.Second

// ErrObsoleteFilesPending is returned by WaitObsoleteFiles when obsolete
// files are still there at its limit (under a heavy write load Pebble's
// own compactions keep making new ones). Callers go on: their figures may
// then count a few files about to be deleted.
var ErrObsoleteFilesPending = errors.New("pebblestore: obsolete files still pending deletion")

// reclaimQueue holds the ranges deleted by committed batches, not yet
// compacted. mu is a leaf lock.
type reclaimQueue struct {
	wake chan struct{} // capacity 1: a pending signal
	mu   struct {
		sync.Mutex
		ranges [][2][]byte
	}
	scheduled   atomic.Int64
	compacted   atomic.Int64
	failed      atomic.Int64
	calls       atomic.Int64
	reclaimed   atomic.Int64 // bytes of disk usage given back
	lastNanos   atomic.Int64
	pendingSize atomic.Int64
}

func newReclaimQueue() *reclaimQueue {
	return &reclaimQueue{wake: make(chan struct{}, 1)}
}

// add queues ranges (copied) and signals the wake channel.
func (q *reclaimQueue) add(ranges [][2][]byte) {
	if len(ranges) == 0 {
		return
	}
	q.mu.Lock()
	q.mu.ranges = append(q.mu.ranges, ranges...)
	q.pendingSize.Store(int64(len(q.mu.ranges)))
	q.mu.Unlock()
	q.scheduled.Add(int64(len(ranges)))
	q.signal()
}

func (q *reclaimQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to n coalesced ranges and whether more are
// left.
func (q *reclaimQueue) take(n int) ([][2][]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	merged := coalesceRanges(q.mu.ranges)
	var out [][2][]byte
	if len(merged) > n {
		out, q.mu.ranges = merged[:n], slices.Clone(merged[n:])
	} else {
		out, q.mu.ranges = merged, nil
	}
	q.pendingSize.Store(int64(len(q.mu.ranges)))
	return out, len(q.mu.ranges) > 0
}

// coalesceRanges sorts ranges by start and merges those that overlap or
// touch. The input is reordered.
func coalesceRanges(ranges [][2][]byte) [][2][]byte {
	if len(ranges) == 0 {
		return nil
	}
	slices.SortFunc(ranges, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	out := [][2][]byte{ranges[0]}
	for _, r := range ranges[1:] {
		last := &out[len(out)-1]
		if bytes.Compare(r[0], last[1]) <= 0 {
			if bytes.Compare(r[1], last[1]) > 0 {
				last[1] = r[1]
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// ReclaimWake is signaled when deleted ranges wait for Reclaim.
func (s *Store) ReclaimWake() <-chan struct{} { return s.reclaim.wake }

// ReclaimResult reports one Reclaim call.
type ReclaimResult struct {
	// Ranges is how many coalesced ranges were compacted, Failed how many
	// compactions failed (those ranges are left to Pebble).
	Ranges, Failed int
	// DiskUsageBefore and DiskUsageAfter are the database's disk usage
	// (Pebble's metrics) before the first compaction and once the obsolete
	// files were deleted.
	DiskUsageBefore, DiskUsageAfter uint64
	Duration                        time.Duration
	// More reports that ranges are still queued: call again.
	More bool
	// Err is the first error met.
	Err error
}

// Reclaim compacts up to ReclaimRangesPerCall of the queued deleted ranges,
// waits (at most ObsoleteFilesWait) until Pebble deleted the files they made
// obsolete, and probes the free-space guard. It does nothing when nothing
// is queued. One caller at a time (retention.ReclaimTask); it takes no lock
// of any other package.
func (s *Store) Reclaim(ctx context.Context) ReclaimResult {
	ranges, more := s.reclaim.take(ReclaimRangesPerCall)
	res := ReclaimResult{More: more}
	if len(ranges) == 0 {
		return res
	}
	start := time.Now()
	s.reclaim.calls.Add(1)
	res.DiskUsageBefore = s.DiskUsage()
	for i, r := range ranges {
		if err := s.compact(ctx, r[0], r[1]); err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				// Shutting down: keep what is left for a later call
				// (none after Close; Pebble compacts the ranges some day).
				s.reclaim.add(ranges[i:])
				res.Err = err
				res.More = false
				return res
			}
			res.Failed++
			s.reclaim.failed.Add(1)
			if res.Err == nil {
				res.Err = fmt.Errorf("pebblestore: compacting the deleted range [%x, %x): %w", r[0], r[1], err)
			}
			continue
		}
		res.Ranges++
		s.reclaim.compacted.Add(1)
	}
	if err := s.WaitObsoleteFiles(ctx, ObsoleteFilesWait); err != nil && !errors.Is(err, ErrObsoleteFilesPending) && res.Err == nil {
		res.Err = err
	}
	res.DiskUsageAfter = s.DiskUsage()
	if res.DiskUsageAfter < res.DiskUsageBefore {
		s.reclaim.reclaimed.Add(int64(res.DiskUsageBefore - res.DiskUsageAfter))
	}
	// Writes refused for want of space resume now, not at the next tick.
	_ = s.space.Probe()
	res.Duration = time.Since(start)
	s.reclaim.lastNanos.Store(int64(res.Duration))
	return res
}

// ReclaimStats are the reclaim counters since Open, for metrics.
type ReclaimStats struct {
	// Scheduled counts deleted ranges queued, Pending those still queued
	// (after coalescing, at the last take or add), Compacted the coalesced
	// ranges compacted, Failed the failed compactions.
	Scheduled, Pending, Compacted, Failed int64
	// Calls counts Reclaim calls that had work; ReclaimedBytes sums the
	// decrease of disk usage they measured.
	Calls, ReclaimedBytes int64
	// Last is the duration of the last call that had work.
	Last time.Duration
}

// ReclaimStats returns the reclaim counters.
func (s *Store) ReclaimStats() ReclaimStats {
	q := s.reclaim
	return ReclaimStats{
		Scheduled:      q.scheduled.Load(),
		Pending:        q.pendingSize.Load(),
		Compacted:      q.compacted.Load(),
		Failed:         q.failed.Load(),
		Calls:          q.calls.Load(),
		ReclaimedBytes: q.reclaimed.Load(),
		Last:           time.Duration(q.lastNanos.Load()),
	}
}

// WaitObsoleteFiles waits until Pebble has deleted every local sstable and
// blob file that is obsolete (no longer in the current version and read by
// nobody), polling its metrics, for at most limit. Pebble deletes them in
// a background cleanup after the compaction that obsoleted them returned:
// disk usage measured before that counts them still. Files an open
// iterator still reads (zombies) are not waited for.
func (s *Store) WaitObsoleteFiles(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		s.compactMu.RLock()
		if s.closed.Load() {
			s.compactMu.RUnlock()
			return ErrClosed
		}
		m := s.db.Metrics()
		s.compactMu.RUnlock()
		pending := m.Table.Local.ObsoleteSize + m.BlobFiles.Local.ObsoleteSize
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d bytes after %s", ErrObsoleteFilesPending, pending, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
