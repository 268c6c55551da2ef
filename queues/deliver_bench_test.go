package queues

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// BenchmarkReceiveAck: the consumer's hot path, one receive of 10
// messages of 1 KiB that acks the previous 10 in the same write
// (AckAndReceive), fsync included. The queue is refilled by a send of
// 10 outside the timer every iteration.
func BenchmarkReceiveAck(b *testing.B) {
	s, err := pebblestore.Open(b.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 64 << 20, CacheSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(s, tm, Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(t0))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.CreateQueue("q", nil, time.UnixMilli(t0)); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	msgs := make([]SendMessage, 10)
	for i := range msgs {
		msgs[i] = SendMessage{Body: body}
	}
	b.ReportAllocs()
	now := int64(t0)
	var receipts []string
	for b.Loop() {
		now++
		b.StopTimer()
		if _, err := e.Send("q", SendRequest{Messages: msgs}, time.UnixMilli(now)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, _, err := e.AckAndReceive("q", receipts, ReceiveRequest{MaxMessages: 10, MaxBytes: ReceiveBytesDefault}, time.UnixMilli(now))
		if err != nil || len(got) != 10 {
			b.Fatalf("received %d: %v", len(got), err)
		}
		receipts = receipts[:0]
		for _, m := range got {
			receipts = append(receipts, m.Receipt)
		}
	}
}
