package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceCounters are shared by every producer's promises.
type produceCounters struct {
	acked      atomic.Int64
	ackedBytes atomic.Int64
	errors     atomic.Int64
	firstError atomic.Pointer[error]
}

func (c *produceCounters) fail(err error) {
	c.errors.Add(1)
	c.firstError.CompareAndSwap(nil, &err)
}

func (c *produceCounters) firstErr() error {
	if p := c.firstError.Load(); p != nil {
		return *p
	}
	return nil
}

// runProduce runs cfg.Producers clients, each calling Produce as fast as the
// client accepts records (it blocks at --max-buffered-records), until
// --duration has passed or --records have been handed out. The measured time
// ends when every producer has flushed, so throughput counts only
// acknowledged records.
func runProduce(ctx context.Context, cfg *Config) (*Result, error) {
	result := newResult(cfg)
	result.Producers, result.Acks, result.Idempotent, result.Compression =
		cfg.Producers, cfg.Acks, cfg.Idempotent, cfg.Compression
	partitions, _, _, err := partitionOffsets(ctx, cfg)
	if err != nil {
		return nil, err
	}
	result.Partitions = len(partitions)

	result.TransactionRecords = cfg.TransactionRecords
	clients := make([]*kgo.Client, cfg.Producers)
	for i := range clients {
		opts := producerOptions(cfg)
		if cfg.TransactionRecords > 0 {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("broker-load-%d-%d", os.Getpid(), i)))
		}
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return nil, err
		}
		defer clients[i].Close()
	}
	pool := newPayloadPool(cfg.RecordSize)
	if err := warmUp(ctx, clients, pool, cfg.RecordSize, cfg.TransactionRecords > 0); err != nil {
		return nil, err
	}
	var (
		latencies = make([]*lockedHistogram, cfg.Producers)
		wg        sync.WaitGroup
	)
	run := &produceRun{cfg: cfg, pool: pool}
	run.remaining.Store(cfg.Records)
	counters := &run.counters
	meter := startCPUMeter(cfg.BrokerPID)
	start := time.Now()
	if cfg.Duration > 0 {
		run.deadline = start.Add(cfg.Duration)
	}
	for i, client := range clients {
		latencies[i] = newLockedHistogram()
		wg.Go(func() {
			run.produceLoop(ctx, client, latencies[i])
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	latency := NewHistogram()
	for _, h := range latencies {
		latency.Merge(h.Snapshot())
	}
	result.Records, result.Bytes = counters.acked.Load(), counters.ackedBytes.Load()
	result.Acked = result.Records
	result.Errors = counters.errors.Load()
	result.setFirstError(counters.firstErr())
	result.setThroughput(elapsed)
	result.setLatency(latency)
	meter.stop(result, result.Bytes)

	switch {
	case ctx.Err() != nil:
		result.setFirstError(ctx.Err())
		return result, fmt.Errorf("interrupted: %w", ctx.Err())
	case result.Errors > 0:
		return result, fmt.Errorf("%d records failed, first: %s", result.Errors, result.FirstError)
	case cfg.Records > 0 && cfg.Duration == 0 && result.Records != cfg.Records:
		return result, fmt.Errorf("acknowledged %d records, want %d", result.Records, cfg.Records)
	}
	result.OK = true
	return result, nil
}

// warmUp produces one record synchronously through every client, so that
// connections, metadata and producer IDs are in place before the clock
// starts. These records are not counted; they stay in the topic.
func warmUp(ctx context.Context, clients []*kgo.Client, pool *payloadPool, recordSize int, transactional bool) error {
	cursor := 0
	for i, client := range clients {
		if transactional {
			if err := client.BeginTransaction(); err != nil {
				return fmt.Errorf("producer %d warm-up: %w", i, err)
			}
		}
		record := &kgo.Record{Value: pool.value(&cursor, recordSize)}
		if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
			return fmt.Errorf("producer %d warm-up: %w", i, err)
		}
		if transactional {
			if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("producer %d warm-up commit: %w", i, err)
			}
		}
	}
	return nil
}

// endTransaction flushes the open transaction's records and commits it.
func endTransaction(ctx context.Context, client *kgo.Client, counters *produceCounters) {
	if err := client.Flush(ctx); err != nil {
		counters.fail(fmt.Errorf("flush: %w", err))
	}
	if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		counters.fail(fmt.Errorf("commit: %w", err))
	}
}

// produceRun is what the producers of a produce run share: the records
// not yet handed out (if --records), the end (if --duration) and the
// outcome counters.
type produceRun struct {
	cfg       *Config
	pool      *payloadPool
	deadline  time.Time    // zero: none
	remaining atomic.Int64 // records not yet handed out, if --records
	counters  produceCounters
}

// produceLoop produces through client until the run ends, recording each
// acknowledgement's latency in latency; with --transaction-records it
// commits a transaction every that many records.
func (run *produceRun) produceLoop(ctx context.Context, client *kgo.Client, latency *lockedHistogram) {
	cfg, pool, deadline, remaining, counters := run.cfg, run.pool, run.deadline, &run.remaining, &run.counters
	cursor := 0
	var inTransaction int64 // records produced in the open transaction
	for ctx.Err() == nil {
		if cfg.Records > 0 && remaining.Add(-1) < 0 {
			break
		}
		sent := time.Now()
		if !deadline.IsZero() && sent.After(deadline) {
			break
		}
		if cfg.TransactionRecords > 0 {
			if inTransaction == cfg.TransactionRecords {
				endTransaction(ctx, client, counters)
				inTransaction = 0
			}
			if inTransaction == 0 {
				if err := client.BeginTransaction(); err != nil {
					counters.fail(fmt.Errorf("begin transaction: %w", err))
					return
				}
			}
			inTransaction++
		}
		record := &kgo.Record{Value: pool.value(&cursor, cfg.RecordSize)}
		size := int64(len(record.Value))
		// Promises run serially on the client's promise goroutine.
		client.Produce(ctx, record, func(_ *kgo.Record, err error) {
			if err != nil {
				counters.fail(err)
				return
			}
			latency.RecordDuration(time.Since(sent))
			counters.acked.Add(1)
			counters.ackedBytes.Add(size)
		})
	}
	if inTransaction > 0 {
		endTransaction(ctx, client, counters)
		return
	}
	if err := client.Flush(ctx); err != nil {
		counters.fail(fmt.Errorf("flush: %w", err))
	}
}
