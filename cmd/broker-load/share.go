package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share-group consume (KIP-932): `consume --share-group G` runs
// --consumers members of share group G on --topic, each accepting every
// record it gets (kgo.ShareGroup, Record.Ack(AckAccept): the acks ride on
// the member's next ShareFetch). The run ends once every record expected
// was delivered, and its throughput counts from the first record's
// arrival (the group join excluded) up to the moment every member's
// acknowledgements were flushed to the broker (FlushAcks): records
// consumed and acknowledged per second. Works against any broker serving
// share groups: ours on a plain topic or a native queue's topic, Apache
// Kafka 4.2.

// shareRun is what the members of a share consume run share.
type shareRun struct {
	cfg      *Config
	expected int64
	started  time.Time
	mu       sync.Mutex
	seen     map[shareOffset]bool
	counters consumeCounters
	// firstRecordNanos is when the first record arrived, in nanoseconds
	// since started (0 before): the clock starts there, so joining the
	// group (and, on Apache Kafka, creating its share-state topic) is not
	// counted.
	firstRecordNanos atomic.Int64
}

type shareOffset struct {
	partition int32
	offset    int64
}

// read polls one member until ctx ends, accepting every record.
func (run *shareRun) read(ctx context.Context, client *kgo.Client) {
	counters := &run.counters
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		now := time.Since(run.started)
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				counters.fail(fmt.Errorf("share fetch %s/%d: %w", topic, partition, err))
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			run.mu.Lock()
			key := shareOffset{r.Partition, r.Offset}
			dup := run.seen[key]
			run.seen[key] = true
			run.mu.Unlock()
			if dup {
				counters.duplicates.Add(1) // a redelivery: its lock ran out
				return
			}
			if run.cfg.RecordSizeSet && len(r.Value) != run.cfg.RecordSize {
				counters.badValues.Add(1)
			}
			run.firstRecordNanos.CompareAndSwap(0, int64(now))
			counters.records.Add(1)
			counters.bytes.Add(int64(len(r.Key) + len(r.Value)))
			counters.lastRecordNanos.Store(int64(now))
		})
	}
}

// resetShareGroupToEarliest sets the group's share.auto.offset.reset to
// earliest (a new share group starts at the end of a plain topic, as
// Kafka's); on a native queue's topic the config has no effect.
func resetShareGroupToEarliest(ctx context.Context, cfg *Config) error {
	client, err := kgo.NewClient(seedOptions(cfg)...)
	if err != nil {
		return err
	}
	defer client.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, cfg.ShareGroup
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = "share.auto.offset.reset", kmsg.StringPtr("earliest"), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, client)
	if err == nil {
		for _, r := range resp.Resources {
			err = firstNonNil(err, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if err != nil {
		return fmt.Errorf("setting share.auto.offset.reset=earliest on share group %s: %w", cfg.ShareGroup, err)
	}
	return nil
}

// runShareConsume reads the records below the end offsets seen at start
// (or --records of them) with --consumers members of --share-group.
func runShareConsume(ctx context.Context, cfg *Config) (*Result, error) {
	result := newResult(cfg)
	result.Consumers = cfg.Consumers
	partitions, start, end, err := partitionOffsets(ctx, cfg)
	if err != nil {
		return nil, err
	}
	result.Partitions = len(partitions)
	expected := cfg.Records
	if expected == 0 {
		for _, p := range partitions {
			expected += end[p] - start[p]
		}
	}
	result.Expected = expected
	if err := resetShareGroupToEarliest(ctx, cfg); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &shareRun{cfg: cfg, expected: expected, seen: make(map[shareOffset]bool, expected), started: time.Now()}
	counters := &run.counters
	meter := startCPUMeter(cfg.BrokerPID)
	var wg sync.WaitGroup
	clients := make([]*kgo.Client, 0, cfg.Consumers)
	for range cfg.Consumers {
		client, err := kgo.NewClient(append(seedOptions(cfg), kgo.ShareGroup(cfg.ShareGroup), kgo.ConsumeTopics(cfg.Topic))...)
		if err != nil {
			return nil, err
		}
		defer client.Close()
		clients = append(clients, client)
		wg.Go(func() { run.read(ctx, client) })
	}
	reason := waitForConsumers(ctx, cfg.IdleTimeout, run.started, &counters.lastRecordNanos, func() bool {
		return counters.records.Load() >= expected
	})
	// The last records' acknowledgements: flushed before the clock stops.
	for _, client := range clients {
		if err := client.FlushAcks(ctx); err != nil && reason == nil {
			counters.fail(fmt.Errorf("flushing acknowledgements: %w", err))
		}
	}
	elapsed := time.Since(run.started) - time.Duration(run.firstRecordNanos.Load())
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
	result.setThroughput(elapsed)
	meter.stop(result, result.Bytes)
	switch {
	case reason != nil:
		result.setFirstError(reason)
		return result, reason
	case result.Missing > 0:
		return result, fmt.Errorf("accepted %d records, expected %d", result.Records, expected)
	case result.BadValues > 0 || result.Errors > 0:
		return result, fmt.Errorf("%d values of the wrong size, %d errors", result.BadValues, result.Errors)
	}
	result.OK = true
	return result, nil
}
