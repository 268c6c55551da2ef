package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func validCompression(name string) bool {
	_, err := compressionCodec(name)
	return err == nil
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown compression %q", name)
}

// producerOptions are the kgo options of one producer client.
func producerOptions(cfg *Config) []kgo.Opt {
	codec, _ := compressionCodec(cfg.Compression) // Validate checked it
	opts := append(seedOptions(cfg),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(cfg.BatchMaxBytes)),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
	)
	switch cfg.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !cfg.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(cfg.InFlight))
	}
	return opts
}

// prepareTopic creates the topic when asked, then waits until every partition
// has a leader, so that the measured phase does not include topic creation.
func prepareTopic(ctx context.Context, cfg *Config) error {
	client, err := kgo.NewClient(seedOptions(cfg)...)
	if err != nil {
		return err
	}
	defer client.Close()
	admin := kadm.NewClient(client)

	if cfg.CreateTopic {
		response, err := admin.CreateTopic(ctx, int32(cfg.Partitions), 1, nil, cfg.Topic)
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(response.Err, kerr.TopicAlreadyExists):
		default:
			return fmt.Errorf("create topic %q: %w", cfg.Topic, err)
		}
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		partitions, err := topicPartitions(ctx, admin, cfg.Topic)
		if err == nil {
			if cfg.CreateTopic && len(partitions) != cfg.Partitions {
				fmt.Fprintf(os.Stderr, "broker-load: topic %q already has %d partitions, not the %d asked for\n",
					cfg.Topic, len(partitions), cfg.Partitions)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %q is not ready: %w", cfg.Topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicPartitions returns the partitions of topic, sorted, once all of them
// have a leader.
func topicPartitions(ctx context.Context, admin *kadm.Client, topic string) ([]int32, error) {
	topics, err := admin.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	detail, ok := topics[topic]
	switch {
	case !ok:
		return nil, fmt.Errorf("topic %q not in metadata", topic)
	case detail.Err != nil:
		return nil, detail.Err
	case len(detail.Partitions) == 0:
		return nil, fmt.Errorf("topic %q has no partitions", topic)
	}
	var partitions []int32
	for _, p := range detail.Partitions {
		if p.Err != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Err)
		}
		if p.Leader < 0 {
			return nil, fmt.Errorf("partition %d has no leader", p.Partition)
		}
		partitions = append(partitions, p.Partition)
	}
	slices.Sort(partitions)
	return partitions, nil
}

// partitionOffsets returns the start and end offsets of every partition.
func partitionOffsets(ctx context.Context, cfg *Config) (partitions []int32, start, end map[int32]int64, err error) {
	client, err := kgo.NewClient(seedOptions(cfg)...)
	if err != nil {
		return nil, nil, nil, err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	partitions, err = topicPartitions(ctx, admin, cfg.Topic)
	if err != nil {
		return nil, nil, nil, err
	}
	starts, err := admin.ListStartOffsets(ctx, cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := admin.ListEndOffsets(ctx, cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list end offsets: %w", err)
	}
	start, end = make(map[int32]int64), make(map[int32]int64)
	for _, p := range partitions {
		s, ok1 := starts.Lookup(cfg.Topic, p)
		e, ok2 := ends.Lookup(cfg.Topic, p)
		if !ok1 || !ok2 {
			return nil, nil, nil, fmt.Errorf("no offsets for partition %d", p)
		}
		start[p], end[p] = s.Offset, e.Offset
	}
	return partitions, start, end, nil
}

// assignPartitions splits partitions round-robin between n consumers.
func assignPartitions(partitions []int32, n int) [][]int32 {
	assigned := make([][]int32, n)
	for i, p := range partitions {
		assigned[i%n] = append(assigned[i%n], p)
	}
	return assigned
}

// payloadPool is a buffer that record values are sliced from, so producing
// allocates no value bytes and consecutive records differ (compression sees
// realistic, not identical, records). Its content is half random bytes and
// half repeated text, in 16-byte runs, so it compresses about 2:1.
type payloadPool struct {
	buffer []byte
}

const payloadPoolBytes = 4 << 20

func newPayloadPool(recordSize int) *payloadPool {
	rng := rand.New(rand.NewPCG(0x5eed, uint64(recordSize)))
	const text = "vibemq broker-load payload text. "
	buffer := make([]byte, payloadPoolBytes+recordSize)
	for i := 0; i < len(buffer); i += 16 {
		run := buffer[i:min(i+16, len(buffer))]
		if rng.IntN(2) == 0 {
			for j := range run {
				run[j] = byte(rng.Uint32())
			}
		} else {
			for j := range run {
				run[j] = text[(i+j)%len(text)]
			}
		}
	}
	return &payloadPool{buffer: buffer}
}

// value returns size bytes of the pool at the offset after *cursor and
// advances *cursor; each goroutine keeps its own cursor. The caller must not
// modify the bytes.
func (p *payloadPool) value(cursor *int, size int) []byte {
	// A prime stride larger than a record spreads neighbours across the pool.
	*cursor = (*cursor + 7919) % payloadPoolBytes
	return p.buffer[*cursor : *cursor+size : *cursor+size]
}
