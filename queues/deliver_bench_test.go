package queues

import (
	"testing"
	"time"
)

// BenchmarkReceiveAck: the consumer's hot path, one receive of 10
// messages of 1 KiB that acks the previous 10 in the same write
// (AckAndReceive), fsync included. The queue is refilled by a send of
// 10 outside the timer every iteration.
func BenchmarkReceiveAck(b *testing.B) {
	e := openHotPathEngine(b)
	msgs := tenMessages()
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
