package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// e2eHeaderSize is the bytes at the start of every e2e value: the record's
// sequence number and its intended send time, both big-endian uint64.
const e2eHeaderSize = 16

// monotonicBase anchors the send times carried in e2e values: nanoseconds
// since it, read from Go's monotonic clock, so wall-clock steps cannot skew
// latencies. Producer and consumer share the process, hence the base.
var monotonicBase = time.Now()

func sinceBase() int64 { return int64(time.Since(monotonicBase)) }

// sequenceSet records which sequence numbers arrived.
type sequenceSet struct {
	mu   sync.Mutex
	seen []uint64 // bitset
}

// add marks sequence and reports whether it was new.
func (s *sequenceSet) add(sequence uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	word, bit := sequence/64, uint64(1)<<(sequence%64)
	for uint64(len(s.seen)) <= word {
		s.seen = append(s.seen, 0)
	}
	if s.seen[word]&bit != 0 {
		return false
	}
	s.seen[word] |= bit
	return true
}

// runEndToEnd produces at a fixed rate of --rate records/s for --duration
// (or --records) while consumers read the same partitions from the end
// offsets seen before the first send. Each value carries a sequence number
// and its intended send time: the schedule's, not the moment Produce was
// called, so a stalled producer or broker cannot hide latency (coordinated
// omission). The end-to-end latency is receipt time minus that send time.
// After producing it flushes, then waits until every acknowledged record has
// arrived or --idle-timeout passes without one; a missing acknowledged
// record fails the run.
func runEndToEnd(ctx context.Context, cfg *Config) (*Result, error) {
	result := newResult(cfg)
	result.Producers, result.Consumers, result.Rate = 1, cfg.Consumers, cfg.Rate
	result.Acks, result.Idempotent, result.Compression = cfg.Acks, cfg.Idempotent, cfg.Compression
	producer, err := kgo.NewClient(producerOptions(cfg)...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	// The warm-up record lands before we read the end offsets to consume
	// from, so the consumers never see it.
	pool := newPayloadPool(cfg.RecordSize)
	if err := warmUp(ctx, []*kgo.Client{producer}, pool, cfg.RecordSize, false); err != nil {
		return nil, err
	}
	partitions, _, end, err := partitionOffsets(ctx, cfg)
	if err != nil {
		return nil, err
	}
	result.Partitions = len(partitions)

	consumeCtx, cancelConsume := context.WithCancel(ctx)
	defer cancelConsume()
	c := &e2eConsumers{latency: newLockedHistogram()}
	consumers, err := c.start(consumeCtx, cfg, partitions, end)
	defer func() {
		for _, cl := range consumers {
			cl.Close()
		}
	}()
	if err != nil {
		return nil, err
	}

	meter := startCPUMeter(cfg.BrokerPID)
	pr := &e2eProducer{ackLatency: newLockedHistogram(), startNanos: sinceBase()}
	pr.produce(ctx, cfg, producer, pool)
	reason := waitForConsumers(ctx, cfg.IdleTimeout, monotonicBase, &c.lastReceived, func() bool {
		return c.received.Load() >= pr.acked.Load()
	})
	cancelConsume()
	c.wg.Wait()
	meter.stop(result, pr.ackedBytes.Load()+c.receivedBytes.Load())
	return e2eVerdict(result, pr, c, reason)
}

// e2eConsumers are the end-to-end run's consumers and what they received.
type e2eConsumers struct {
	received, receivedBytes, duplicates, badValues atomic.Int64
	lastReceived                                   atomic.Int64 // nanoseconds since start
	consumeErrors                                  atomic.Int64
	firstConsumeError                              atomic.Pointer[error]
	sequences                                      sequenceSet
	latency                                        *lockedHistogram
	wg                                             sync.WaitGroup
}

// start starts cfg.Consumers consumers, each reading its share of
// partitions from the end offsets end, until ctx ends (wait with c.wg).
// It returns their clients (those created before an error too), for the
// caller to close.
func (c *e2eConsumers) start(ctx context.Context, cfg *Config, partitions []int32, end map[int32]int64) ([]*kgo.Client, error) {
	var clients []*kgo.Client
	for _, assigned := range assignPartitions(partitions, cfg.Consumers) {
		if len(assigned) == 0 {
			continue
		}
		offsets := make(map[int32]kgo.Offset, len(assigned))
		for _, p := range assigned {
			offsets[p] = kgo.NewOffset().At(end[p])
		}
		consumer, err := kgo.NewClient(append(seedOptions(cfg),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
		)...)
		if err != nil {
			return clients, err
		}
		clients = append(clients, consumer)
		c.wg.Go(func() { c.consume(ctx, consumer) })
	}
	return clients, nil
}

// consume polls consumer until ctx ends, recording each record's latency
// from its intended send time, and duplicates and malformed values.
func (c *e2eConsumers) consume(ctx context.Context, consumer *kgo.Client) {
	for ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		now := sinceBase()
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.consumeErrors.Add(1)
				c.firstConsumeError.CompareAndSwap(nil, &err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < e2eHeaderSize {
				c.badValues.Add(1)
				return
			}
			sequence := binary.BigEndian.Uint64(r.Value[0:8])
			sentNanos := int64(binary.BigEndian.Uint64(r.Value[8:16]))
			if !c.sequences.add(sequence) {
				c.duplicates.Add(1)
				return
			}
			c.latency.RecordDuration(time.Duration(now - sentNanos))
			c.received.Add(1)
			c.receivedBytes.Add(int64(len(r.Key) + len(r.Value)))
			c.lastReceived.Store(now)
		})
	}
}

// e2eProducer is the end-to-end run's producer side: what it sent and what
// was acknowledged.
type e2eProducer struct {
	acked, ackedBytes atomic.Int64
	counters          produceCounters
	ackLatency        *lockedHistogram
	sent              int64
	scheduleLagMax    time.Duration
	startNanos        int64 // sinceBase at the start of the schedule
}

// produce sends on schedule until --records or --duration: record i is due
// at start + i/rate seconds and carries its sequence number and due time.
// It flushes before returning.
func (pr *e2eProducer) produce(ctx context.Context, cfg *Config, producer *kgo.Client, pool *payloadPool) {
	var cursor int
	start := time.Now()
	for ctx.Err() == nil {
		if cfg.Records > 0 && pr.sent >= cfg.Records {
			break
		}
		due := time.Duration(pr.sent * int64(time.Second) / int64(cfg.Rate))
		if cfg.Duration > 0 && due >= cfg.Duration {
			break
		}
		if wait := due - time.Since(start); wait > 0 {
			time.Sleep(wait)
		} else {
			pr.scheduleLagMax = max(pr.scheduleLagMax, -wait)
		}
		dueNanos := pr.startNanos + int64(due)
		value := make([]byte, cfg.RecordSize)
		binary.BigEndian.PutUint64(value[0:8], uint64(pr.sent))
		binary.BigEndian.PutUint64(value[8:16], uint64(dueNanos))
		copy(value[e2eHeaderSize:], pool.value(&cursor, cfg.RecordSize)[e2eHeaderSize:])
		producer.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				pr.counters.fail(err)
				return
			}
			pr.ackLatency.RecordDuration(time.Duration(sinceBase() - dueNanos))
			pr.acked.Add(1)
			pr.ackedBytes.Add(int64(len(r.Value)))
		})
		pr.sent++
	}
	if err := producer.Flush(ctx); err != nil {
		pr.counters.fail(fmt.Errorf("flush: %w", err))
	}
}

// e2eVerdict fills result from what was sent and received, and fails the
// run on a produce error, a missing acknowledged record (reason: why the
// wait for it ended), a duplicate or a malformed value.
func e2eVerdict(result *Result, pr *e2eProducer, c *e2eConsumers, reason error) (*Result, error) {
	result.Sent, result.Acked, result.Received = pr.sent, pr.acked.Load(), c.received.Load()
	result.Records, result.Bytes = result.Received, c.receivedBytes.Load()
	result.Duplicates, result.BadValues = c.duplicates.Load(), c.badValues.Load()
	result.Missing = max(result.Acked-result.Received, 0)
	result.Errors = pr.counters.errors.Load() + c.consumeErrors.Load()
	result.setFirstError(pr.counters.firstErr())
	if p := c.firstConsumeError.Load(); p != nil {
		result.setFirstError(*p)
	}
	result.setThroughput(time.Duration(c.lastReceived.Load() - pr.startNanos))
	latencies := c.latency.Snapshot()
	result.setLatency(latencies)
	if acks := pr.ackLatency.Snapshot(); acks.Count() > 0 {
		result.AckP99Ms = milliseconds(acks.Quantile(0.99))
	}
	result.ScheduleLagMaxMs = milliseconds(int64(pr.scheduleLagMax))

	switch {
	case pr.counters.errors.Load() > 0:
		return result, fmt.Errorf("%d records failed to produce, first: %s", pr.counters.errors.Load(), result.FirstError)
	case result.Missing > 0:
		if reason == nil {
			reason = errors.New("not every acknowledged record arrived")
		}
		return result, fmt.Errorf("%d acknowledged records never arrived: %w", result.Missing, reason)
	case result.Duplicates > 0 || result.BadValues > 0:
		return result, fmt.Errorf("%d duplicates, %d values without the e2e header", result.Duplicates, result.BadValues)
	}
	result.OK = true
	return result, nil
}
