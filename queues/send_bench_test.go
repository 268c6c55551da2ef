package queues

import (
	"testing"
	"time"
)

// BenchmarkSend: one send of 10 messages of 1 KiB, the queue's hottest
// write, through prepare, the dedup check and the write path, fsync
// included. Issue 15 (Send through write.apply/finish): 94 -> 100
// allocations and 32.4 -> 26.4 KB per send of 10 x 1 KiB (the copy of the
// bodies moved to httpapi), time within the fsync's noise.
func BenchmarkSend(b *testing.B) {
	e := openHotPathEngine(b)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'x'
	}
	msgs := make([]SendMessage, 10)
	for i := range msgs {
		msgs[i] = SendMessage{Body: body}
	}
	b.SetBytes(int64(len(msgs) * len(body)))
	b.ReportAllocs()
	now := int64(t0)
	for b.Loop() {
		now++
		if _, err := e.Send("q", SendRequest{Messages: msgs}, time.UnixMilli(now)); err != nil {
			b.Fatal(err)
		}
	}
}
