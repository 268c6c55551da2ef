package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeCounters are shared by every consumer goroutine.
type consumeCounters struct {
	records    atomic.Int64
	bytes      atomic.Int64
	duplicates atomic.Int64
	gaps       atomic.Int64 // offsets skipped, summed
	badValues  atomic.Int64
	errors     atomic.Int64
	firstError atomic.Pointer[error]
	// lastRecordNanos is when the last counted record arrived, in
	// nanoseconds since the run's start.
	lastRecordNanos atomic.Int64
	// donePartitions counts partitions read up to their end offset.
	donePartitions atomic.Int64
}

func (c *consumeCounters) fail(err error) {
	c.errors.Add(1)
	c.firstError.CompareAndSwap(nil, &err)
}

// consumeRun is what the consumers of a consume run share: what they set
// out to read and the counters of what they read.
type consumeRun struct {
	cfg      *Config
	bounded  bool            // read up to end, not --records
	expected int64           // records expected in all
	end      map[int32]int64 // end offsets seen at the start
	started  time.Time
	counters consumeCounters
}

// read polls client until ctx ends, checking that each partition's offsets
// arrive in order from next (the next offset expected, by partition), with
// no gap and no duplicate.
func (run *consumeRun) read(ctx context.Context, client *kgo.Client, next map[int32]int64) {
	cfg, counters, end := run.cfg, &run.counters, run.end
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		now := time.Since(run.started)
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				counters.fail(fmt.Errorf("fetch %s/%d: %w", topic, partition, err))
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			want := next[r.Partition]
			switch {
			case run.bounded && want >= end[r.Partition]:
				return // past what we set out to read
			case r.Offset < want:
				counters.duplicates.Add(1)
				return
			case r.Offset > want:
				counters.gaps.Add(r.Offset - want)
			}
			next[r.Partition] = r.Offset + 1
			if run.bounded && r.Offset+1 >= end[r.Partition] {
				counters.donePartitions.Add(1)
			}
			if n := counters.records.Add(1); !run.bounded && n > run.expected {
				counters.records.Add(-1) // beyond --records: not ours to count
				return
			}
			if cfg.RecordSizeSet && len(r.Value) != cfg.RecordSize {
				counters.badValues.Add(1)
			}
			counters.bytes.Add(int64(len(r.Key) + len(r.Value)))
			counters.lastRecordNanos.Store(int64(now))
		})
	}
}

// runConsume reads the topic from its start offsets with cfg.Consumers
// clients, each assigned a share of the partitions directly (no group).
//
// Without --records it reads exactly the records below the end offsets seen
// at start and checks, per partition, that offsets arrive in order with no
// gap and no duplicate. With --records it reads until that many records
// arrived. Either way it gives up after --idle-timeout without a record,
// and the run fails if it read less than expected.
func runConsume(ctx context.Context, cfg *Config) (*Result, error) {
	result := newResult(cfg)
	result.Consumers = cfg.Consumers
	partitions, start, end, err := partitionOffsets(ctx, cfg)
	if err != nil {
		return nil, err
	}
	result.Partitions = len(partitions)
	bounded := cfg.Records == 0 // read up to the end offsets seen now
	expected := cfg.Records
	if bounded {
		for _, p := range partitions {
			expected += end[p] - start[p]
		}
	}
	result.Expected = expected

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	meter := startCPUMeter(cfg.BrokerPID)
	run := &consumeRun{cfg: cfg, bounded: bounded, expected: expected, end: end, started: time.Now()}
	counters, started := &run.counters, run.started
	for _, assigned := range assignPartitions(partitions, cfg.Consumers) {
		if len(assigned) == 0 {
			continue
		}
		offsets := make(map[int32]kgo.Offset, len(assigned))
		next := make(map[int32]int64, len(assigned)) // next offset expected
		for _, p := range assigned {
			offsets[p] = kgo.NewOffset().At(start[p])
			next[p] = start[p]
			if bounded && end[p] <= start[p] {
				counters.donePartitions.Add(1)
			}
		}
		client, err := kgo.NewClient(append(seedOptions(cfg),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
		)...)
		if err != nil {
			return nil, err
		}
		defer client.Close()
		wg.Go(func() { run.read(ctx, client, next) })
	}

	// Stop when everything expected arrived, or nothing did for a while.
	reason := waitForConsumers(ctx, cfg.IdleTimeout, started, &counters.lastRecordNanos, func() bool {
		if bounded {
			return counters.donePartitions.Load() >= int64(len(partitions))
		}
		return counters.records.Load() >= expected
	})
	cancel()
	wg.Wait()

	result.Records, result.Bytes = counters.records.Load(), counters.bytes.Load()
	result.Received = result.Records
	result.Duplicates = counters.duplicates.Load()
	result.Missing = max(expected-result.Records, 0)
	result.BadValues = counters.badValues.Load()
	result.Errors = counters.errors.Load()
	if p := counters.firstError.Load(); p != nil {
		result.setFirstError(*p)
	}
	// Throughput is measured up to the last record, not up to the moment
	// the idle timeout noticed the end.
	result.setThroughput(time.Duration(counters.lastRecordNanos.Load()))
	meter.stop(result, result.Bytes)

	switch {
	case reason != nil:
		result.setFirstError(reason)
		return result, reason
	case result.Missing > 0:
		return result, fmt.Errorf("read %d records, expected %d (%d offsets skipped)",
			result.Records, expected, counters.gaps.Load())
	case result.Duplicates > 0 || result.BadValues > 0:
		return result, fmt.Errorf("%d duplicates, %d values of the wrong size", result.Duplicates, result.BadValues)
	}
	result.OK = true
	return result, nil
}

// waitForConsumers polls done every few milliseconds. It returns nil once
// done reports true, or an error once lastNanos (time since started of the
// last record) is idle for longer than idle, or when ctx ends.
func waitForConsumers(ctx context.Context, idle time.Duration, started time.Time,
	lastNanos *atomic.Int64, done func() bool) error {
	ticker := time.NewTicker(5 * time.Millisecond)
	defer ticker.Stop()
	for {
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-ticker.C:
		}
		if time.Since(started)-time.Duration(lastNanos.Load()) > idle {
			return fmt.Errorf("no record for %v", idle)
		}
	}
}
