package compattests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnAbortHangingByMarker does what `kafka-transactions abort` and
// Admin.abortTransaction do for a transaction that holds a partition's
// last stable offset back: DescribeProducers finds the producer, then
// WriteTxnMarkers ends its transaction there with an ABORT marker. The
// LSO moves to the end, read_committed readers never see the data, an
// older epoch is refused, and a second marker is a no-op here (Kafka
// appends it anyway: DESIGN.md). Run against Apache Kafka too.
// (WriteTxnMarkers was not served: the tool's request closed the
// connection.)
func TestTxnAbortHangingByMarker(t *testing.T) {
	t.Parallel()
	bothBrokers(t, testTxnAbortHangingByMarker)
}

func testTxnAbortHangingByMarker(t *testing.T, addr string, ref bool) {
	b := struct{ Addr func() string }{func() string { return addr }}
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	ctx := testCtx(t, opTimeout)

	// One committed transaction, then one left open.
	cl := txnProducer(t, b.Addr(), topicName(t, "txn"), topic, kgo.TransactionTimeout(time.Minute))
	produceTxn(t, cl, true, "kept")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("hanging")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := committedEnds(t, b.Addr(), topic)[0]; got != 2 {
		t.Fatalf("LSO with the transaction open: %d, want 2 (after the first commit)", got)
	}

	admin := newClient(t, b.Addr())
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	dresp, err := dp.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var prod kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	found := false
	for _, ap := range dresp.Topics[0].Partitions[0].ActiveProducers {
		if ap.CurrentTxnStartOffset == 2 {
			prod, found = ap, true
		}
	}
	if !found {
		t.Fatalf("no producer with a transaction starting at 2: %+v", dresp.Topics[0].Partitions[0])
	}

	c := dialRaw(t, b.Addr())
	// abort answers the error code by partition: Kafka does not keep the
	// request's order.
	abort := func(epoch int16, partitions ...int32) map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = prod.ProducerID, epoch, false, prod.CoordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, partitions
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp := c.roundTrip(req).(*kmsg.WriteTxnMarkersResponse)
		if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != prod.ProducerID || len(resp.Markers[0].Topics) != 1 {
			t.Fatalf("WriteTxnMarkers: malformed %+v", resp)
		}
		codes := map[int32]int16{}
		for _, p := range resp.Markers[0].Topics[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		if len(codes) != len(partitions) {
			t.Fatalf("WriteTxnMarkers: answered %v for partitions %v", codes, partitions)
		}
		return codes
	}
	if ps := abort(int16(prod.ProducerEpoch-1), 0); ps[0] != kerr.InvalidProducerEpoch.Code {
		t.Errorf("older epoch %d: %s, want INVALID_PRODUCER_EPOCH", prod.ProducerEpoch-1, errName(ps[0]))
	}
	ps := abort(int16(prod.ProducerEpoch), 0, 9)
	if ps[0] != 0 || ps[9] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("abort: partition 0 %s, 9 %s; want NONE, UNKNOWN_TOPIC_OR_PARTITION", errName(ps[0]), errName(ps[9]))
	}
	if got := committedEnds(t, b.Addr(), topic)[0]; got != 4 {
		t.Fatalf("LSO after the abort marker: %d, want 4 (2 committed + marker, the hanging record, its marker)", got)
	}
	if got := readCommittedValues(t, b.Addr(), topic, 1); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("read_committed after the abort: %v, want [kept]", got)
	}
	// A retried marker ends nothing and writes nothing (Kafka writes it).
	if ps := abort(int16(prod.ProducerEpoch), 0); ps[0] != 0 {
		t.Fatalf("retried abort: %s", errName(ps[0]))
	}
	if ref {
		return
	}
	if got := endOffsets(t, newAdmin(t, b.Addr()), topic)[0]; got != 4 {
		t.Fatalf("end offset after a retried marker: %d, want 4 (nothing written)", got)
	}
}
