package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetch sends Fetch v12 requests (no session, read_uncommitted,
// every partition from offset 0, 1 MiB per partition, max_bytes 50 MiB)
// over one loopback TCP connection to an in-process server on a real store
// in a temp dir, one request at a time, and reads each response: decode,
// handler, reads from Pebble (the memtable: 8 MiB per partition stays
// below it), the response's encoding and its write. MB/s counts the record
// bytes returned; B/op and allocs/op are mostly the server's (the client
// reads into a reused buffer).
//
//	go test ./kafkaproto -run '^$' -bench BenchmarkFetch -benchmem -count 3
func BenchmarkFetch(b *testing.B) {
	for _, records := range []int{16, 1000} {
		for _, partitions := range []int32{1, 8} {
			size := "16KiB"
			if records >= 1000 {
				size = "1MiB"
			}
			b.Run(fmt.Sprintf("batch=%s/partitions=%d", size, partitions), func(b *testing.B) {
				benchFetch(b, records, partitions)
			})
		}
	}
}

// benchConn is a client connection that sends pre-encoded frames and reads
// each response into a reused buffer.
type benchConn struct {
	tb   testing.TB
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

func dialBench(tb testing.TB, addr string) *benchConn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &benchConn{tb: tb, conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
}

// roundTrip writes frame and returns the response body after its size
// (correlation ID first), valid until the next call.
func (c *benchConn) roundTrip(frame []byte) []byte {
	if _, err := c.conn.Write(frame); err != nil {
		c.tb.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		c.tb.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(c.body) < n {
		c.body = make([]byte, n)
	}
	c.body = c.body[:n]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		c.tb.Fatal(err)
	}
	return c.body
}

func benchFetch(b *testing.B, records int, partitions int32) {
	addr := startBenchServer(b, true, "bench", partitions, false)
	c := dialBench(b, addr)
	frame, batchLen := benchProduceFrame(b, records, partitions)
	for n := 0; n < 8<<20; n += batchLen {
		c.roundTrip(frame)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 12, 0, 1, 50<<20
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bench"
	for p := range partitions {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, fetch, 2)
	// The first response is decoded and checked; the others have the same
	// shape.
	body := c.roundTrip(frame)
	resp := fetch.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = fetch.Version
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation ID, empty tagged fields
		b.Fatal(err)
	}
	got := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				b.Fatalf("partition %d: %v", p.Partition, err)
			}
			got += len(p.RecordBatches)
		}
	}
	if got == 0 {
		b.Fatal("the fetch returned no records")
	}
	b.SetBytes(int64(got))
	for b.Loop() {
		c.roundTrip(frame)
	}
}
