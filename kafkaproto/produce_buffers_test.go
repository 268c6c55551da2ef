package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// TestProduceBodyBufferKept: a connection sending large Produce frames one
// after the other reads each into the buffer it kept from the one before,
// even when the GC has emptied the buffer pools meanwhile (under load it runs
// several times a second). Before, each frame of 8 MB allocated about 13 MiB
// of body buffers (a fresh one of each size it grew through). The frames
// name a topic that does not exist, so that nothing is written to the store
// (whose memtables and batches would dominate the figure): the broker reads
// the whole body, answers UNKNOWN_TOPIC_OR_PARTITION per partition, and
// allocates next to nothing.
func TestProduceBodyBufferKept(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures differ under -race")
	}
	const partitions = 8
	addr := startBenchServer(t, true, "kept", partitions, false)
	now := time.Now().UnixMilli()
	recs := make([]topics.Record, 1000)
	for i := range recs {
		recs[i] = topics.Record{OffsetDelta: int32(i), Value: make([]byte, 1024)}
	}
	batch, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	for p := range int32(partitions) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kept")).AppendRequest(nil, req, 1)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	body := make([]byte, 64<<10)
	roundTrip := func() {
		if _, err := conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			t.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n > len(body) {
			t.Fatalf("response of %d bytes", n)
		}
		if _, err := io.ReadFull(r, body[:n]); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip()
	const runs = 10
	var total uint64
	for range runs {
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		roundTrip()
		runtime.ReadMemStats(&after)
		total += after.TotalAlloc - before.TotalAlloc
	}
	perRequest := total / runs
	t.Logf("%d bytes allocated per produce request of %d bytes", perRequest, len(frame))
	if limit := uint64(256 << 10); perRequest > limit {
		t.Fatalf("%d bytes allocated per produce request of %d bytes, want at most %d: the request body is allocated anew", perRequest, len(frame), limit)
	}
}
