package compattests

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProducer is a franz-go transactional producer for topic.
func txnProducer(t testing.TB, addr, txnID, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append([]kgo.Opt{
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	}, opts...)...)
}

// produceTxn runs one transaction writing values and ends it.
func produceTxn(t testing.TB, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("EndTransaction(commit=%v): %v", commit, err)
	}
}

// committedEnds lists the last stable offset of every partition of topic
// (ListOffsets latest under read_committed).
func committedEnds(t testing.TB, addr, topic string) map[int32]int64 {
	t.Helper()
	l, err := newAdmin(t, addr).ListCommittedOffsets(testCtx(t, opTimeout), topic)
	if err != nil {
		t.Fatalf("ListCommittedOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	for p, o := range l[topic] {
		if o.Err != nil {
			t.Fatalf("ListCommittedOffsets %s/%d: %v", topic, p, o.Err)
		}
		out[p] = o.Offset
	}
	return out
}

// readCommittedValues reads topic from the start with a read_committed
// consumer until want records arrived (and a little longer, to catch
// extras), and returns the sorted values.
func readCommittedValues(t testing.TB, addr, topic string, want int) []string {
	t.Helper()
	cl := newClient(t, addr,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(45 * time.Second)
	var settle time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("read_committed fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) >= want && settle.IsZero() {
			settle = time.Now().Add(700 * time.Millisecond)
		}
		if !settle.IsZero() && time.Now().After(settle) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed %s: %d records %v, want %d", topic, len(got), got, want)
		}
	}
	sort.Strings(got)
	return got
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// TestTxnCommitAbortReadCommitted: a franz-go transactional producer commits,
// aborts and commits again over two partitions; a read_committed consumer
// sees exactly the committed records, and ListOffsets under read_committed
// reaches the end once no transaction is open.
func TestTxnCommitAbortReadCommitted(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 2, nil)
	cl := txnProducer(t, b.Addr(), topicName(t, "txn"), topic)
	produceTxn(t, cl, true, seq("c", 10)...)
	produceTxn(t, cl, false, seq("a", 10)...)
	produceTxn(t, cl, true, seq("d", 10)...)

	want := append(seq("c", 10), seq("d", 10)...)
	sort.Strings(want)
	got := readCommittedValues(t, b.Addr(), topic, len(want))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read_committed saw %v\nwant %v", got, want)
	}
	hwm := endOffsets(t, newAdmin(t, b.Addr()), topic)
	lso := committedEnds(t, b.Addr(), topic)
	for p, end := range hwm {
		if lso[p] != end {
			t.Fatalf("partition %d: last stable offset %d, high watermark %d with no open transaction", p, lso[p], end)
		}
	}
}

// TestTxnZombieFenced: a second producer with the same transactional ID
// fences the first: the first's open transaction is aborted (its records are
// never visible to read_committed) and its EndTransaction fails with a
// fencing error.
func TestTxnZombieFenced(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	id := topicName(t, "txn")
	zombie := txnProducer(t, b.Addr(), id, topic)
	ctx := testCtx(t, opTimeout)
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	fresh := txnProducer(t, b.Addr(), id, topic)
	produceTxn(t, fresh, true, "fresh")

	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Logf("fenced producer's EndTransaction: %v", err)
	}
	got := readCommittedValues(t, b.Addr(), topic, 1)
	if strings.Join(got, ",") != "fresh" {
		t.Fatalf("read_committed saw %v, want [fresh]", got)
	}
}

// TestTxnTimeoutAbortedByBroker: a transaction left open past its
// transaction.timeout.ms is aborted by the broker, which releases the last
// stable offset for read_committed readers; its records stay invisible.
func TestTxnTimeoutAbortedByBroker(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	cl := txnProducer(t, b.Addr(), topicName(t, "txn"), topic, kgo.TransactionTimeout(1500*time.Millisecond))
	ctx := testCtx(t, opTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("left-open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("plain")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if lso := committedEnds(t, b.Addr(), topic)[0]; lso != 0 {
		t.Fatalf("last stable offset %d while the transaction is open, want 0", lso)
	}
	deadline := time.Now().Add(15 * time.Second)
	for committedEnds(t, b.Addr(), topic)[0] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the broker did not abort the timed-out transaction")
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := readCommittedValues(t, b.Addr(), topic, 1)
	if strings.Join(got, ",") != "plain" {
		t.Fatalf("read_committed saw %v, want [plain]", got)
	}
}

// TestTxnRestartMidTransaction: the broker is killed while a transaction is
// open; after the restart the transaction's state is intact (the producer
// commits it), a committed one stays committed and an aborted one aborted.
func TestTxnRestartMidTransaction(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 2, nil)
	cl := txnProducer(t, b.Addr(), topicName(t, "txn"), topic)
	produceTxn(t, cl, true, seq("c", 4)...)
	produceTxn(t, cl, false, seq("a", 4)...)
	ctx := testCtx(t, opTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range seq("o", 4) {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b.Kill()
	b.Start()
	if lso := committedEnds(t, b.Addr(), topic); lso[0]+lso[1] != 12 {
		t.Fatalf("last stable offsets %v after restart: want a sum of 12 (4 committed, 4 aborted, 4 markers; the open transaction excluded)", lso)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	want := append(seq("c", 4), seq("o", 4)...)
	sort.Strings(want)
	got := readCommittedValues(t, b.Addr(), topic, len(want))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read_committed after restart saw %v\nwant %v", got, want)
	}
}

// runTransactSession consumes input in group and copies every record to
// output inside transactions (kgo.GroupTransactSession) until stop is
// closed; it then closes the session.
func runTransactSession(t *testing.T, addr, group, txnID, input, output string, stop <-chan struct{}, done chan<- error) {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.ClientID("compat-tests"),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(output),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
	)
	if err != nil {
		done <- err
		return
	}
	defer sess.Close()
	for {
		select {
		case <-stop:
			done <- nil
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := sess.PollFetches(ctx)
		cancel()
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			done <- fmt.Errorf("begin: %w", err)
			return
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { out = append(out, kgo.StringRecord("out-"+string(r.Value))) })
		ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
		produceErr := sess.ProduceSync(ctx, out...).FirstErr()
		_, endErr := sess.End(ctx, kgo.TransactionEndTry(produceErr == nil))
		cancel()
		if endErr != nil {
			t.Logf("session %s: End: %v (retried by the next poll)", txnID, endErr)
		}
	}
}

// TestTxnGroupTransactSession: read-process-write between two topics with
// franz-go GroupTransactSession under member churn (a second member joins,
// the first leaves mid-stream): the output, read with read_committed, holds
// every input record exactly once.
func TestTxnGroupTransactSession(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	input, output := topicName(t, "in"), topicName(t, "out")
	createTopic(t, adm, input, 2, nil)
	createTopic(t, adm, output, 2, nil)
	group := topicName(t, "group")

	const n = 300
	plain := newClient(t, b.Addr(), kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		ctx := testCtx(t, opTimeout)
		for i := from; i < to; i++ {
			if err := plain.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%04d", i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, n/3)
	stop1, stop2 := make(chan struct{}), make(chan struct{})
	done1, done2 := make(chan error, 1), make(chan error, 1)
	var once1, once2 sync.Once
	stopSession := func(once *sync.Once, stop chan struct{}, done chan error) error {
		var err error
		once.Do(func() { close(stop); err = <-done })
		return err
	}
	// Sessions log through t: stop them before the test ends, even on failure.
	t.Cleanup(func() {
		_ = stopSession(&once1, stop1, done1)
		_ = stopSession(&once2, stop2, done2)
	})
	go runTransactSession(t, b.Addr(), group, topicName(t, "txn1"), input, output, stop1, done1)
	time.Sleep(time.Second)
	go runTransactSession(t, b.Addr(), group, topicName(t, "txn2"), input, output, stop2, done2)
	produce(n/3, 2*n/3)
	time.Sleep(time.Second)
	if err := stopSession(&once1, stop1, done1); err != nil {
		t.Fatalf("session 1: %v", err)
	}
	produce(2*n/3, n)

	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("out-%04d", i)
	}
	got := readCommittedValues(t, b.Addr(), output, n)
	if err := stopSession(&once2, stop2, done2); err != nil {
		t.Fatalf("session 2: %v", err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		seen := map[string]int{}
		for _, v := range got {
			seen[v]++
		}
		var dup, missing []string
		for _, w := range want {
			switch seen[w] {
			case 0:
				missing = append(missing, w)
			case 1:
			default:
				dup = append(dup, w)
			}
		}
		t.Fatalf("output has %d records, want %d: duplicated %v, missing %v", len(got), n, dup, missing)
	}
}

// TestTxnDescribeAndList: DescribeTransactions and ListTransactions show an
// open transaction (Ongoing, its partitions, start time) and its outcome;
// DescribeProducers shows the producer's open transaction on the partition.
func TestTxnDescribeAndList(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	id := topicName(t, "txn")
	cl := txnProducer(t, b.Addr(), id, topic)
	ctx := testCtx(t, opTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, b.Addr())
	describe := func() kmsg.DescribeTransactionsResponseTransactionState {
		t.Helper()
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id, "no-such-id"}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.TransactionStates) != 2 || resp.TransactionStates[1].ErrorCode != kerr.TransactionalIDNotFound.Code {
			t.Fatalf("DescribeTransactions: %+v", resp.TransactionStates)
		}
		return resp.TransactionStates[0]
	}
	st := describe()
	if st.ErrorCode != 0 || st.State != "Ongoing" || st.StartTimestamp <= 0 || st.TimeoutMillis != 10000 ||
		len(st.Topics) != 1 || st.Topics[0].Topic != topic || len(st.Topics[0].Partitions) != 1 {
		t.Fatalf("open transaction described as %+v", st)
	}
	list := kmsg.NewPtrListTransactionsRequest()
	list.StateFilters = []string{"Ongoing", "Bogus"}
	lresp, err := list.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range lresp.TransactionStates {
		found = found || (s.TransactionalID == id && s.ProducerID == st.ProducerID && s.TransactionState == "Ongoing")
	}
	if !found || len(lresp.UnknownStateFilters) != 1 || lresp.UnknownStateFilters[0] != "Bogus" {
		t.Fatalf("ListTransactions: %+v", lresp)
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dpt)
	dresp, err := dp.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeProducers: %+v", dresp.Topics)
	}
	p0 := dresp.Topics[0].Partitions[0]
	if p0.ErrorCode != 0 || len(p0.ActiveProducers) != 1 || p0.ActiveProducers[0].ProducerID != st.ProducerID ||
		p0.ActiveProducers[0].CurrentTxnStartOffset != 0 || p0.ActiveProducers[0].LastSequence != 0 {
		t.Fatalf("DescribeProducers during the transaction: %+v", p0)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if st := describe(); st.State != "CompleteCommit" || len(st.Topics) != 0 || st.StartTimestamp != -1 {
		t.Fatalf("committed transaction described as %+v", st)
	}
}

// transactional sets the transactional attribute of a raw batch and
// recomputes its CRC.
func transactional(b []byte) []byte {
	b[22] |= 0x10 // attributes are bytes 21-22, big-endian
	binary.BigEndian.PutUint32(b[17:21], crcChecksum(b[21:]))
	return b
}

// TestTxnProtocolErrors pins the transaction APIs' error answers on the
// wire: the advertised versions (no KIP-890), the timeout bound, a
// transactional produce outside a transaction, an unknown partition, fencing
// codes by version, EndTxn without a transaction, and offset metadata over
// the limit refused by TxnOffsetCommit (it was staged, and made the commit
// fail forever, before the check).
func TestTxnProtocolErrors(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 2, nil)
	vs := apiVersions(t, b.Addr())
	for key, max := range map[kmsg.Key]int16{kmsg.AddPartitionsToTxn: 3, kmsg.AddOffsetsToTxn: 3, kmsg.EndTxn: 3, kmsg.TxnOffsetCommit: 3, kmsg.InitProducerID: 5} {
		if r, ok := vs[int16(key)]; !ok || r[1] != max {
			t.Errorf("%s advertised as %v, want max %d", kmsg.NameForKey(int16(key)), r, max)
		}
	}
	c := dialRaw(t, b.Addr())
	defer c.conn.Close()
	id := topicName(t, "txn")
	initTxn := func(timeout int32) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = timeout
		return c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	}
	if resp := initTxn(16 * 60 * 1000); resp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout of 16 minutes: %s, want INVALID_TRANSACTION_TIMEOUT", errName(resp.ErrorCode))
	}
	init := initTxn(60000)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %s", errName(init.ErrorCode))
	}
	pid, epoch := init.ProducerID, init.ProducerEpoch

	batch := transactional(rawBatch(pid, epoch, 0, time.Now().UnixMilli(), valueRecords("x")))
	if r := c.produceRaw(9, topic, 0, batch); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional produce outside a transaction: %s, want INVALID_TXN_STATE", errName(r.ErrorCode))
	}

	add := func(version int16, epoch int16, parts ...int32) *kmsg.AddPartitionsToTxnResponse {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = version
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	}
	if resp := add(3, epoch, 0, 9); resp.Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code ||
		resp.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AddPartitionsToTxn with an unknown partition: %+v", resp.Topics)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 3
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if resp := c.roundTrip(end).(*kmsg.EndTxnResponse); resp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn without a transaction: %s, want INVALID_TXN_STATE", errName(resp.ErrorCode))
	}
	if resp := add(3, epoch, 0); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %s", errName(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if r := c.produceRaw(9, topic, 0, batch); r.ErrorCode != 0 {
		t.Fatalf("transactional produce in the transaction: %s", errName(r.ErrorCode))
	}

	// Offset metadata over offset.metadata.max.bytes (4096) is refused when
	// staged, per partition, as Kafka does: the commit of a decided
	// transaction can then never fail on it.
	group := topicName(t, "group")
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.Version = 3
	addOffsets.TransactionalID, addOffsets.ProducerID, addOffsets.ProducerEpoch, addOffsets.Group = id, pid, epoch, group
	if resp := c.roundTrip(addOffsets).(*kmsg.AddOffsetsToTxnResponse); resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %s", errName(resp.ErrorCode))
	}
	stage := kmsg.NewPtrTxnOffsetCommitRequest()
	stage.Version = 3
	stage.TransactionalID, stage.Group, stage.ProducerID, stage.ProducerEpoch, stage.Generation = id, group, pid, epoch, -1
	st := kmsg.NewTxnOffsetCommitRequestTopic()
	st.Topic = topic
	big, small := strings.Repeat("m", 4097), "ok"
	for i, md := range []*string{&big, &small} {
		sp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = int32(i), 1, -1, md
		st.Partitions = append(st.Partitions, sp)
	}
	stage.Topics = append(stage.Topics, st)
	if resp := c.roundTrip(stage).(*kmsg.TxnOffsetCommitResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetMetadataTooLarge.Code ||
		resp.Topics[0].Partitions[1].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit with 4097 and 2 bytes of metadata: %s, %s; want OFFSET_METADATA_TOO_LARGE, none",
			errName(resp.Topics[0].Partitions[0].ErrorCode), errName(resp.Topics[0].Partitions[1].ErrorCode))
	}

	// A second InitProducerID fences the first epoch.
	if again := initTxn(60000); again.ErrorCode != 0 || again.ProducerID != pid || again.ProducerEpoch <= epoch {
		t.Fatalf("re-init: %+v", again)
	}
	if resp := add(1, epoch, 0); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("AddPartitionsToTxn v1 with a fenced epoch: %s, want INVALID_PRODUCER_EPOCH", errName(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if resp := add(3, epoch, 0); resp.Topics[0].Partitions[0].ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("AddPartitionsToTxn v3 with a fenced epoch: %s, want PRODUCER_FENCED", errName(resp.Topics[0].Partitions[0].ErrorCode))
	}
	next := transactional(rawBatch(pid, epoch, 1, time.Now().UnixMilli(), valueRecords("y")))
	if r := c.produceRaw(9, topic, 0, next); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie transactional produce: %s, want INVALID_PRODUCER_EPOCH", errName(r.ErrorCode))
	}
}

// TestTxnKcatReadCommitted: librdkafka (kcat) in read_committed mode reads
// a partition holding a committed, an aborted and a still open transaction:
// it sees only the committed records and its end of partition (-e) is the
// last stable offset, so it returns while the transaction is open.
func TestTxnKcatReadCommitted(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	cl := txnProducer(t, b.Addr(), topicName(t, "txn"), topic)
	produceTxn(t, cl, true, "c1", "c2")
	produceTxn(t, cl, false, "a1", "a2")
	produceTxn(t, cl, true, "c3")
	ctx := testCtx(t, opTimeout)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	read := func(isolation string) string {
		out := runKcat(t, "", "-C", "-b", b.Addr(), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
			"-X", "isolation.level="+isolation, "-f", "%s\n")
		return strings.Join(strings.Fields(out), ",")
	}
	if got := read("read_committed"); got != "c1,c2,c3" {
		t.Fatalf("kcat read_committed: %s, want c1,c2,c3", got)
	}
	if got := read("read_uncommitted"); got != "c1,c2,a1,a2,c3,open" {
		t.Fatalf("kcat read_uncommitted: %s, want c1,c2,a1,a2,c3,open", got)
	}
}

// TestTxnOffsetsCommitWithTransaction: offsets sent with TxnOffsetCommit
// are pending (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT,
// the committed offset is unchanged) until the transaction commits, then
// visible, also after a kill -9 and restart; an aborted transaction's
// offsets are dropped.
func TestTxnOffsetsCommitWithTransaction(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	group := topicName(t, "group")
	id := topicName(t, "txn")
	cl := txnProducer(t, b.Addr(), id, topic)
	raw := newClient(t, b.Addr())
	ctx := testCtx(t, opTimeout)

	// txn stages offset o for the group inside a transaction and ends it.
	txn := func(o int64, commit bool, check func()) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
		if resp, err := add.RequestWith(ctx, raw); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
		}
		commitReq := kmsg.NewPtrTxnOffsetCommitRequest()
		commitReq.TransactionalID, commitReq.Group, commitReq.ProducerID, commitReq.ProducerEpoch = id, group, pid, epoch
		commitReq.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, o
		rt.Partitions = append(rt.Partitions, rp)
		commitReq.Topics = append(commitReq.Topics, rt)
		resp, err := commitReq.RequestWith(ctx, raw)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
		}
		check()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("EndTransaction(commit=%v): %v", commit, err)
		}
	}
	fetch := func(requireStable bool) (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = group, requireStable
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Groups) > 0 { // v8+: batched groups
			p := resp.Groups[0].Topics[0].Partitions[0]
			return p.Offset, p.ErrorCode
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	txn(7, true, func() {
		if _, code := fetch(true); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("require_stable with a staged offset: %s, want UNSTABLE_OFFSET_COMMIT", errName(code))
		}
		if o, code := fetch(false); code != 0 || o != -1 {
			t.Fatalf("offset before the commit: %d %s, want -1", o, errName(code))
		}
	})
	if o, code := fetch(true); code != 0 || o != 7 {
		t.Fatalf("offset after the commit: %d %s, want 7", o, errName(code))
	}
	txn(9, false, func() {})
	if o, code := fetch(true); code != 0 || o != 7 {
		t.Fatalf("offset after an aborted transaction: %d %s, want 7", o, errName(code))
	}
	b.Kill()
	b.Start()
	if o, code := fetch(true); code != 0 || o != 7 {
		t.Fatalf("offset after restart: %d %s, want 7", o, errName(code))
	}
}

// TestTxnConnectFenceProducers emulates Kafka Connect's exactly-once source
// zombie fencing (KIP-618): a task's transaction is open, so a
// read_committed reader of the offsets topic cannot reach the end; the new
// leader fences the task's transactional ID the way Admin.fenceProducers
// does (InitProducerId with producer ID -1); the open transaction is
// aborted, the last stable offset reaches the end, the task's records stay
// invisible and the zombie task cannot commit.
func TestTxnConnectFenceProducers(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "offsets")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)
	taskID := topicName(t, "connect-task-0")
	task := txnProducer(t, b.Addr(), taskID, topic)
	produceTxn(t, task, true, "committed")
	ctx := testCtx(t, opTimeout)
	if err := task.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := task.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hwm := endOffsets(t, newAdmin(t, b.Addr()), topic)[0]
	if lso := committedEnds(t, b.Addr(), topic)[0]; lso >= hwm {
		t.Fatalf("last stable offset %d reaches the end %d with a transaction open", lso, hwm)
	}

	// Admin.fenceProducers: InitProducerId{txnID, pid -1, epoch -1}, retried on
	// CONCURRENT_TRANSACTIONS.
	admin := newClient(t, b.Addr())
	for attempt := 0; ; attempt++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &taskID
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == kerr.ConcurrentTransactions.Code && attempt < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("fencing InitProducerId: %s", errName(resp.ErrorCode))
		}
		break
	}
	end := endOffsets(t, newAdmin(t, b.Addr()), topic)[0]
	if lso := committedEnds(t, b.Addr(), topic)[0]; lso != end {
		t.Fatalf("after fencing: last stable offset %d, end %d", lso, end)
	}
	if got := strings.Join(readCommittedValues(t, b.Addr(), topic, 1), ","); got != "committed" {
		t.Fatalf("read_committed after fencing: %s, want committed", got)
	}
	if err := task.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced task committed")
	}
}
