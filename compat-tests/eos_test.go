package compattests

// Exactly-once end to end (issue 6): what Kafka Connect's exactly-once
// source support and Kafka Streams' exactly_once_v2 ask of the broker
// (shared/design/CONNECT-STREAMS.md §1.6, §2, §6), and transactions that
// survive a killed client instance or a killed broker. This file holds the
// raw-protocol helpers the exactly-once tests share.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions a Kafka 3.9 Java client sends for the transaction APIs.
const (
	eosFindCoordinatorVersion = 4 // batched keys (KIP-699)
	eosInitProducerIDVersion  = 4
	eosAddPartitionsVersion   = 3
	eosEndTxnVersion          = 3
	eosProduceVersion         = 9
	eosFetchVersion           = 12 // by topic name
	eosListOffsetsVersion     = 7
)

// Control record types in a marker's key.
const (
	eosControlAbort  = 0
	eosControlCommit = 1
)

// eosFindTxnCoordinators sends one batched FindCoordinator for the
// transactional IDs and fails unless each is answered without error by
// node 1 at the broker's address.
func eosFindTxnCoordinators(t testing.TB, c *rawConn, addr string, ids ...string) {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = eosFindCoordinatorVersion
	req.CoordinatorType = 1 // TRANSACTION
	req.CoordinatorKeys = ids
	resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != len(ids) {
		t.Fatalf("FindCoordinator %v: %d coordinators in the answer, want %d", ids, len(resp.Coordinators), len(ids))
	}
	for i, co := range resp.Coordinators {
		if co.Key != ids[i] || co.ErrorCode != 0 || co.NodeID != 1 || fmt.Sprintf("%s:%d", co.Host, co.Port) != addr {
			t.Fatalf("FindCoordinator for %s: %+v, want node 1 at %s without error", ids[i], co, addr)
		}
	}
}

// eosInitProducerID sends InitProducerId for a transactional ID and, as
// the Java client and Admin.fenceProducers do, retries while the answer is
// CONCURRENT_TRANSACTIONS (an open transaction is being aborted). Any other
// answer is returned.
func eosInitProducerID(t testing.TB, c *rawConn, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = eosInitProducerIDVersion
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = timeoutMs
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId %s: CONCURRENT_TRANSACTIONS for %v", id, opTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eosInitOK is eosInitProducerID for a call that must succeed.
func eosInitOK(t testing.TB, c *rawConn, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16) {
	t.Helper()
	resp := eosInitProducerID(t, c, id, timeoutMs, pid, epoch)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		t.Fatalf("InitProducerId %s (pid %d, epoch %d): %s, pid %d, epoch %d", id, pid, epoch, errName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// eosAddPartitions sends AddPartitionsToTxn for partitions of one topic
// and returns the error code, failing if the partitions disagree.
func eosAddPartitions(t testing.TB, c *rawConn, id string, pid int64, epoch int16, topic string, partitions ...int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = eosAddPartitionsVersion
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(partitions) {
		t.Fatalf("AddPartitionsToTxn %s %s%v: answer %+v", id, topic, partitions, resp.Topics)
	}
	code := resp.Topics[0].Partitions[0].ErrorCode
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != code {
			t.Fatalf("AddPartitionsToTxn %s %s%v: partitions answered differently: %+v", id, topic, partitions, resp.Topics[0].Partitions)
		}
	}
	return code
}

// eosEndTxn sends EndTxn and returns its error code.
func eosEndTxn(t testing.TB, c *rawConn, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = eosEndTxnVersion
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return c.roundTrip(req).(*kmsg.EndTxnResponse).ErrorCode
}

// eosProduce appends one batch of keyed records to topic/partition
// (acks=all). pid < 0 sends a plain batch; otherwise the batch is
// transactional, from pid at epoch, starting at sequence seq.
func eosProduce(t testing.TB, c *rawConn, topic string, partition int32, pid int64, epoch int16, seq int32, kvs ...string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return eosProduceAt(t, c, topic, partition, pid, epoch, seq, time.Now(), kvs...)
}

// eosProduceAt is eosProduce with the records' timestamps from ts.
func eosProduceAt(t testing.TB, c *rawConn, topic string, partition int32, pid int64, epoch int16, seq int32, ts time.Time, kvs ...string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	recs := make([]rawRecord, 0, len(kvs)/2)
	for i := 0; i+1 < len(kvs); i += 2 {
		recs = append(recs, rawRecord{key: []byte(kvs[i]), value: []byte(kvs[i+1]), tsDelta: int64(i / 2)})
	}
	if pid < 0 {
		return c.produceRaw(eosProduceVersion, topic, partition, rawBatch(-1, -1, -1, ts.UnixMilli(), recs))
	}
	return c.produceRaw(eosProduceVersion, topic, partition, transactional(rawBatch(pid, epoch, seq, ts.UnixMilli(), recs)))
}

// eosListOffset answers ListOffsets for one partition: ts -1 latest, -2
// earliest; isolation 0 read_uncommitted (latest = high watermark), 1
// read_committed (latest = last stable offset).
func eosListOffset(t testing.TB, c *rawConn, topic string, partition int32, ts int64, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = eosListOffsetsVersion
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = partition, -1, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets %s/%d: answer %+v", topic, partition, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %s/%d ts %d isolation %d: %s", topic, partition, ts, isolation, errName(p.ErrorCode))
	}
	return p.Offset
}

// eosFetch sends one Fetch for topic/partition at offset. With maxWaitMs >
// 0 it long-polls for a byte; otherwise it is answered at once. An
// isolation-1 answer is checked: no batch at or past the last stable
// offset, which is never past the high watermark.
func eosFetch(t testing.TB, c *rawConn, topic string, partition int32, offset int64, isolation int8, maxWaitMs int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = eosFetchVersion
	req.ReplicaID, req.IsolationLevel, req.SessionEpoch = -1, isolation, -1
	req.MaxBytes, req.MaxWaitMillis = 4<<20, maxWaitMs
	if maxWaitMs > 0 {
		req.MinBytes = 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = partition, offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch %s/%d@%d: answer %+v", topic, partition, offset, resp)
	}
	fp := resp.Topics[0].Partitions[0]
	if isolation == 1 && fp.ErrorCode == 0 {
		eosCheckBelowLSO(t, topic, fp)
	}
	return fp
}

// eosCheckBelowLSO fails if a read_committed fetch answer holds a batch
// that reaches the last stable offset, or the last stable offset is past
// the high watermark.
func eosCheckBelowLSO(t testing.TB, topic string, fp kmsg.FetchResponseTopicPartition) {
	t.Helper()
	if fp.LastStableOffset > fp.HighWatermark || fp.LastStableOffset < 0 {
		t.Fatalf("%s/%d: read_committed fetch with last stable offset %d and high watermark %d", topic, fp.Partition, fp.LastStableOffset, fp.HighWatermark)
	}
	for _, b := range parseBatches(t, fp.RecordBatches) {
		if last := b.FirstOffset + int64(b.LastOffsetDelta); last >= fp.LastStableOffset {
			t.Fatalf("%s/%d: read_committed fetch returned a batch %d-%d at or past the last stable offset %d (high watermark %d)",
				topic, fp.Partition, b.FirstOffset, last, fp.LastStableOffset, fp.HighWatermark)
		}
	}
}

// eosMarker describes the control batch b: whether it is one, and then
// whether it commits.
func eosMarker(t testing.TB, b kmsg.RecordBatch) (control, commit bool) {
	t.Helper()
	if b.Attributes&0x20 == 0 {
		return false, false
	}
	recs := b.Records
	var r kmsg.Record
	if err := r.ReadFrom(recs); err != nil || len(r.Key) != 4 {
		t.Fatalf("control batch at %d: record %v, key %x", b.FirstOffset, err, r.Key)
	}
	return true, int16(binary.BigEndian.Uint16(r.Key[2:])) == eosControlCommit
}

// eosReader reads one partition the way a Java consumer does: Fetch at
// the position, the client dropping markers (and under read_committed
// aborted batches) but moving its position past them.
type eosReader struct {
	t         testing.TB
	c         *rawConn
	topic     string
	partition int32
	isolation int8
	pos       int64
	records   []*kgo.Record
	aborted   []kmsg.FetchResponseTopicPartitionAbortedTransaction
	last      kmsg.FetchResponseTopicPartition // the last fetch answer
}

// newEOSReader reads under read_committed.
func newEOSReader(t testing.TB, addr, topic string, partition int32, from int64) *eosReader {
	return &eosReader{t: t, c: dialRaw(t, addr), topic: topic, partition: partition, isolation: 1, pos: from}
}

// newEOSUncommittedReader reads under read_uncommitted.
func newEOSUncommittedReader(t testing.TB, addr, topic string, partition int32, from int64) *eosReader {
	return &eosReader{t: t, c: dialRaw(t, addr), topic: topic, partition: partition, isolation: 0, pos: from}
}

// fetch sends one Fetch at the position (long-polling up to maxWaitMs) and
// moves the position past what it returned. It reports whether the
// position moved.
func (r *eosReader) fetch(maxWaitMs int32) bool {
	r.t.Helper()
	fp := eosFetch(r.t, r.c, r.topic, r.partition, r.pos, r.isolation, maxWaitMs)
	if fp.ErrorCode != 0 {
		r.t.Fatalf("fetch %s/%d@%d isolation %d: %s", r.topic, r.partition, r.pos, r.isolation, errName(fp.ErrorCode))
	}
	r.last = fp
	r.aborted = append(r.aborted, fp.AbortedTransactions...)
	isolation := kgo.ReadCommitted()
	if r.isolation == 0 {
		isolation = kgo.ReadUncommitted()
	}
	got, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: r.pos, IsolationLevel: isolation, Topic: r.topic, Partition: r.partition,
	}, &fp, kgo.DefaultDecompressor(), nil)
	if got.Err != nil {
		r.t.Fatalf("fetch %s/%d@%d isolation %d: %v", r.topic, r.partition, r.pos, r.isolation, got.Err)
	}
	r.records = append(r.records, got.Records...)
	moved := next > r.pos
	r.pos = next
	return moved
}

// toEnd fetches until the position reaches end (a readToEnd against the
// high watermark listed under read_uncommitted) and fails if it does not
// within timeout.
func (r *eosReader) toEnd(end int64, timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for r.pos < end {
		if time.Now().After(deadline) {
			r.t.Fatalf("readToEnd %s/%d: position %d, end %d after %v (last stable offset %d, high watermark %d)",
				r.topic, r.partition, r.pos, end, timeout, r.last.LastStableOffset, r.last.HighWatermark)
		}
		r.fetch(500)
	}
}

// abortedBy reports whether the reader was told of an aborted transaction
// of pid starting at first.
func (r *eosReader) abortedBy(pid, first int64) bool {
	for _, a := range r.aborted {
		if a.ProducerID == pid && a.FirstOffset == first {
			return true
		}
	}
	return false
}

// eosKeyValues renders records as key=value for messages and comparisons.
func eosKeyValues(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Key) + "=" + string(r.Value)
	}
	return out
}

// eosFenced reports whether code is one of the answers Kafka gives a
// producer whose epoch was bumped: PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH.
func eosFenced(code int16) bool {
	return code == kerr.ProducerFenced.Code || code == kerr.InvalidProducerEpoch.Code
}

// eosSession is a read-process-write loop of kgo.GroupTransactSession: it
// copies each record of input to output as "out-<value>" (same key), at
// most maxRecords per transaction, committing the consumed offsets in the
// same transaction.
type eosSession struct {
	addr, group, txnID, input, output string
	txnTimeout                        time.Duration
	maxRecords                        int
	opts                              []kgo.Opt
	logf                              func(format string, args ...any)
	onCommit                          func() // after each committed transaction
}

// run loops until ctx ends, then closes the session (leaving the group).
func (s *eosSession) run(ctx context.Context) error {
	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(s.addr),
		kgo.ClientID("compat-tests-eos"),
		kgo.TransactionalID(s.txnID),
		kgo.TransactionTimeout(s.txnTimeout),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // franz-go always sends OffsetFetch with require_stable
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DefaultProduceTopic(s.output),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.RetryTimeout(30 * time.Second),
	}, s.opts...)...)
	if err != nil {
		return err
	}
	defer sess.Close()
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pollCtx, s.maxRecords)
		cancel()
		if fs.Empty() {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, &kgo.Record{Key: r.Key, Value: []byte("out-" + string(r.Value))})
		})
		endCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
		produceErr := sess.ProduceSync(endCtx, out...).FirstErr()
		committed, endErr := sess.End(endCtx, kgo.TransactionEndTry(produceErr == nil))
		cancel()
		switch {
		case endErr != nil:
			s.logf("session %s: End: %v (the next poll retries)", s.txnID, endErr)
		case committed && s.onCommit != nil:
			s.onCommit()
		}
	}
	return nil
}

// The helper process of TestTxnGroupTransactSessionKilledInstance: one
// session instance in its own OS process, so that it can be killed with
// SIGKILL. It reads commands from stdin ("hang": block the next End after
// its TxnOffsetCommit was answered, so that the transaction stays open
// with staged offsets) and reports on stdout ("eos-helper: committed",
// "eos-helper: staged"). It ends when stdin closes.
const eosHelperEnv = "COMPAT_EOS_HELPER"

// eosHangHook blocks the connection that reads a TxnOffsetCommit response
// once armed, after telling the parent: the transaction has its data and
// staged offsets, and no EndTxn will follow.
type eosHangHook struct{ armed *atomic.Bool }

func (h eosHangHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.TxnOffsetCommit) && err == nil && h.armed.Load() {
		fmt.Println("eos-helper: staged")
		select {}
	}
}

func TestHelperProcessTransactSession(t *testing.T) {
	if os.Getenv(eosHelperEnv) == "" {
		t.Skip("helper process of TestTxnGroupTransactSessionKilledInstance; runs only when started by it")
	}
	env := func(name string) string { return os.Getenv(eosHelperEnv + "_" + name) }
	var armed atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "hang" {
				armed.Store(true)
			}
		}
		cancel() // the parent is gone
	}()
	s := &eosSession{
		addr: env("ADDR"), group: env("GROUP"), txnID: env("TXN_ID"), input: env("IN"), output: env("OUT"),
		txnTimeout: 8 * time.Second, maxRecords: 20,
		opts:     []kgo.Opt{kgo.WithHooks(eosHangHook{&armed})},
		logf:     func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		onCommit: func() { fmt.Println("eos-helper: committed") },
	}
	if err := s.run(ctx); err != nil {
		t.Fatal(err)
	}
}

// eosHelper is the killable session instance, a child process.
type eosHelper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	log   bytes.Buffer // stderr
}

func (h *eosHelper) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(p)
}

// startEOSHelper re-executes the test binary to run
// TestHelperProcessTransactSession with the given settings.
func startEOSHelper(t *testing.T, settings map[string]string) *eosHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessTransactSession$", "-test.count=1")
	cmd.Env = append(os.Environ(), eosHelperEnv+"=1", "BROKER_BIN="+brokerBin)
	for k, v := range settings {
		cmd.Env = append(cmd.Env, eosHelperEnv+"_"+k+"="+v)
	}
	h := &eosHelper{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	cmd.Stderr = h
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper process: %v", err)
	}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "eos-helper: "); ok {
				select {
				case h.lines <- line:
				default: // nobody is waiting for more "committed" lines
				}
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			h.mu.Lock()
			t.Logf("helper process stderr:\n%s", h.log.String())
			h.mu.Unlock()
		}
	})
	return h
}

// waitLine waits for the helper to report line.
func (h *eosHelper) waitLine(t *testing.T, line string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case got := <-h.lines:
			if got == line {
				return
			}
		case <-h.done:
			t.Fatalf("helper process exited before reporting %q", line)
		case <-deadline:
			t.Fatalf("helper process did not report %q within %v", line, timeout)
		}
	}
}

// TestTxnGroupTransactSessionKilledInstance: three kgo.GroupTransactSession
// instances copy `in` to `out` (read-process-write, cooperative-sticky,
// read_committed, require_stable offsets); one of them is a separate OS
// process, killed with SIGKILL while its transaction is open with records
// written to `out` and offsets staged by TxnOffsetCommit. The broker keeps
// that transaction open (Ongoing; OffsetFetch require_stable answers
// UNSTABLE_OFFSET_COMMIT for its partitions) until its 8 s timeout, then
// aborts it; the survivors take the dead member's partitions after its 6 s
// session timeout and resume from the last committed offsets. At the end
// read_committed `out` holds every input record exactly once, although the
// killed instance's aborted copies are in the log (read_uncommitted, listed
// in AbortedTransactions), and the group's committed offsets on `in` are
// the high watermarks.
func TestTxnGroupTransactSessionKilledInstance(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--group-initial-rebalance-delay", "0s"))
	adm := newAdmin(t, b.Addr())
	input, output := topicName(t, "in"), topicName(t, "out")
	const partitions = 4
	createTopic(t, adm, input, partitions, nil)
	createTopic(t, adm, output, partitions, nil)
	group := topicName(t, "group")
	ctx := testCtx(t, 2*opTimeout)

	// The feeder appends numbered records round-robin until told to stop.
	var produced atomic.Int64
	feeder := newClient(t, b.Addr(), kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	feed := func(n int) {
		t.Helper()
		rs := make([]*kgo.Record, n)
		for i := range rs {
			v := fmt.Sprintf("%05d", produced.Add(1)-1)
			rs[i] = &kgo.Record{Key: []byte(v), Value: []byte(v)}
		}
		if err := feeder.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Errorf("feed: %v", err)
		}
	}
	feed(200)
	stopFeed, fed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopFeed:
				return
			case <-tick.C:
				feed(4)
			}
		}
	}()
	var stopFeedOnce sync.Once
	stopFeeding := func() { stopFeedOnce.Do(func() { close(stopFeed); <-fed }) }
	t.Cleanup(stopFeeding)

	// Two survivors in this process.
	sessCtx, stopSessions := context.WithCancel(context.Background())
	var sessions sync.WaitGroup
	sessionErrs := make(chan error, 2)
	for i := range 2 {
		s := &eosSession{
			addr: b.Addr(), group: group, txnID: topicName(t, fmt.Sprintf("survivor-%d", i)), input: input, output: output,
			txnTimeout: 10 * time.Second, maxRecords: 20, logf: t.Logf,
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			if err := s.run(sessCtx); err != nil {
				sessionErrs <- err
			}
		}()
	}
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { stopSessions(); sessions.Wait() }) }
	t.Cleanup(stopAll)

	// The third instance, in its own process.
	helperTxnID := topicName(t, "killed")
	helper := startEOSHelper(t, map[string]string{"ADDR": b.Addr(), "GROUP": group, "TXN_ID": helperTxnID, "IN": input, "OUT": output})
	helper.waitLine(t, "committed", 30*time.Second)
	waitGroup := func(members int, what string) {
		t.Helper()
		retWaitFor(t, 30*time.Second, what, func() (bool, string) {
			d, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return false, err.Error()
			}
			g := d[group]
			return g.State == "Stable" && len(g.Members) == members && len(g.AssignedPartitions()[input]) == partitions,
				fmt.Sprintf("%s, %d members, assigned %v", g.State, len(g.Members), g.AssignedPartitions())
		})
	}
	waitGroup(3, "three members sharing the input")
	for len(helper.lines) > 0 { // lines from before the group settled
		<-helper.lines
	}
	helper.waitLine(t, "committed", 30*time.Second) // a commit in the settled group

	// Freeze the helper inside a transaction, after its TxnOffsetCommit,
	// then kill it.
	if _, err := io.WriteString(helper.stdin, "hang\n"); err != nil {
		t.Fatal(err)
	}
	helper.waitLine(t, "staged", 30*time.Second)
	if err := helper.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-helper.done

	describe := func() kadm.DescribedTransaction {
		t.Helper()
		d, err := adm.DescribeTransactions(ctx, helperTxnID)
		if err != nil {
			t.Fatalf("DescribeTransactions: %v", err)
		}
		return d[helperTxnID]
	}
	open := describe()
	if open.State != "Ongoing" || len(open.Topics[output]) == 0 {
		t.Fatalf("the killed instance's transaction: %s with partitions %v; want Ongoing with partitions of %s", open.State, open.Topics, output)
	}
	raw := newClient(t, b.Addr())
	unstable := 0
	for p := range int32(partitions) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, group, true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = input, []int32{p}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code == kerr.UnstableOffsetCommit.Code {
			unstable++
		} else if code != 0 {
			t.Fatalf("OffsetFetch require_stable %s/%d: %s", input, p, errName(code))
		}
	}
	if unstable == 0 {
		t.Fatalf("OffsetFetch require_stable: no partition of %s is UNSTABLE_OFFSET_COMMIT while the killed instance's offsets are staged", input)
	}
	retWaitFor(t, 30*time.Second, "the broker to abort the killed instance's transaction", func() (bool, string) {
		d := describe()
		return d.State == "CompleteAbort" && d.ProducerEpoch > open.ProducerEpoch, fmt.Sprintf("%s epoch %d", d.State, d.ProducerEpoch)
	})
	waitGroup(2, "the survivors to own every partition")
	stopFeeding()
	feed(100) // work for the survivors alone
	n := int(produced.Load())

	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("out-%05d", i)
	}
	got := readCommittedValues(t, b.Addr(), output, n)
	if !slices.Equal(got, want) {
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
		t.Fatalf("read_committed %s: %d records for %d inputs; duplicated %v, missing %v", output, len(got), n, dup, missing)
	}

	// The killed instance's copies are in the log, aborted.
	ends := endOffsets(t, adm, output)
	copies := map[string]int{}
	for p, end := range ends {
		r := newEOSUncommittedReader(t, b.Addr(), output, p, 0)
		r.toEnd(end, 20*time.Second)
		for _, rec := range r.records {
			copies[string(rec.Value)]++
		}
	}
	twice := 0
	for _, c := range copies {
		if c > 1 {
			twice++
		}
	}
	if twice == 0 {
		t.Fatalf("read_uncommitted %s holds no record twice: the killed instance's aborted copies are missing", output)
	}
	listed := false
	for p, end := range ends {
		r := newEOSReader(t, b.Addr(), output, p, 0)
		r.toEnd(end, 20*time.Second)
		for _, a := range r.aborted {
			listed = listed || a.ProducerID == open.ProducerID
		}
	}
	if !listed {
		t.Fatalf("no read_committed fetch of %s listed the killed instance's producer %d in AbortedTransactions", output, open.ProducerID)
	}

	stopAll()
	close(sessionErrs)
	for err := range sessionErrs {
		t.Fatalf("survivor: %v", err)
	}
	inEnds := endOffsets(t, adm, input)
	retWaitFor(t, 10*time.Second, "committed offsets on the input at its end", func() (bool, string) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		state := ""
		ok := true
		for p, end := range inEnds {
			o, _ := offs.Lookup(input, p)
			state += fmt.Sprintf("%d:%d/%d ", p, o.At, end)
			ok = ok && o.Err == nil && o.At == end
		}
		return ok, state
	})
}
