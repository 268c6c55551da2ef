package compattests

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const opTimeout = 60 * time.Second // upper bound for one client operation

// testCtx is a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var nonTopicChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// topicName is a unique, legal topic name derived from the test name.
func topicName(t testing.TB, suffix string) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := nonTopicChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 150 {
		name = name[:150]
	}
	if suffix != "" {
		name += "." + nonTopicChars.ReplaceAllString(suffix, "_")
	}
	return name + "." + hex.EncodeToString(r[:])
}

// newClient is a franz-go client seeded with the broker. It is closed when
// the test ends.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID("compat-tests"),
		kgo.RetryTimeout(30 * time.Second),
	}
	if os.Getenv("COMPAT_DEBUG") != "" {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin is a kadm client over a fresh franz-go client.
func newAdmin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// createTopic creates topic with partitions and configs and fails the test on
// any error.
func createTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	resps, err := adm.CreateTopics(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	r, ok := resps[topic]
	if !ok {
		t.Fatalf("CreateTopics %s: topic missing from response %v", topic, resps)
	}
	if r.Err != nil {
		t.Fatalf("CreateTopics %s: %v (%s)", topic, r.Err, r.ErrMessage)
	}
	return r
}

// endOffsets lists the high watermark of every partition of topic.
func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	l, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := make(map[int32]int64)
	for p, o := range l[topic] {
		if o.Err != nil {
			t.Fatalf("ListEndOffsets %s/%d: %v", topic, p, o.Err)
		}
		out[p] = o.Offset
	}
	return out
}

// readPartitions reads each partition of topic from the start until it has
// seen offset ends[p]-1 and returns the records by partition. It fails the
// test on fetch errors or if the records do not arrive in time.
func readPartitions(t testing.TB, addr, topic string, ends map[int32]int64, opts ...kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	out := make(map[int32][]*kgo.Record)
	want := make(map[int32]kgo.Offset)
	for p, end := range ends {
		out[p] = nil
		if end > 0 {
			want[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(want) == 0 {
		return out
	}
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, opts...)...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	done := func() bool {
		for p := range want {
			rs := out[p]
			if len(rs) == 0 || rs[len(rs)-1].Offset < ends[p]-1 {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			got := make(map[int32]int)
			for p, rs := range out {
				got[p] = len(rs)
			}
			t.Fatalf("reading %s: timed out; records so far per partition %v, want end offsets %v", topic, got, ends)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("reading %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

// checkContiguous fails unless rs has offsets 0, 1, 2, ... len(rs)-1.
func checkContiguous(t testing.TB, topic string, p int32, rs []*kgo.Record) {
	t.Helper()
	for i, r := range rs {
		if r.Offset != int64(i) {
			t.Fatalf("%s/%d: record #%d has offset %d; want contiguous offsets from 0", topic, p, i, r.Offset)
		}
	}
}

// ---------------------------------------------------------------------------
// Raw protocol access, for requests a client library would never send.

// rawConn speaks the Kafka wire protocol directly.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

// writeFrame sends one request built by kmsg at the version set in req.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("compat-tests-raw")).AppendRequest(nil, req, c.corr)
	c.writeAll(buf)
	return c.corr
}

func (c *rawConn) writeAll(b []byte) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one size-prefixed response frame.
func (c *rawConn) readFrame() ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(opTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame size %d out of range", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return nil, err
	}
	return body, nil
}

// roundTrip sends req and decodes the response at the request's version.
// ApiVersions responses have a non-flexible header at every version.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("%s v%d: read response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	decodeResponse(c.t, corr, body, resp)
	return resp
}

func decodeResponse(t testing.TB, corr int32, body []byte, resp kmsg.Response) {
	t.Helper()
	r := kbin.Reader{Src: body}
	if got := r.Int32(); got != corr {
		t.Fatalf("%s: response correlation id %d, want %d", kmsg.NameForKey(resp.Key()), got, corr)
	}
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		t.Fatalf("%s v%d: response header: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		t.Fatalf("%s v%d: decode response body (%d bytes): %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), len(r.Src), err)
	}
}

// expectClosed asserts that the broker closes the connection (EOF or reset)
// rather than leaving it open. Bytes the broker sends first are ignored.
func (c *rawConn) expectClosed(what string) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	_ = c.conn.SetReadDeadline(deadline)
	buf := make([]byte, 4096)
	for {
		_, err := c.conn.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("%s: broker kept the connection open (no close within 15s)", what)
		}
		return // EOF, reset: closed
	}
}

// apiVersions asks the broker for its API ranges over a fresh raw conn.
func apiVersions(t testing.TB, addr string) map[int16][2]int16 {
	t.Helper()
	c := dialRaw(t, addr)
	defer c.conn.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v0: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := make(map[int16][2]int16)
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// pickVersion returns min(want, broker max) for key, failing if the broker
// does not serve at least minWant.
func pickVersion(t testing.TB, vs map[int16][2]int16, key kmsg.Key, want, minWant int16) int16 {
	t.Helper()
	r, ok := vs[int16(key)]
	if !ok {
		t.Fatalf("broker does not advertise %s", kmsg.NameForKey(int16(key)))
	}
	v := want
	if r[1] < v {
		v = r[1]
	}
	if v < minWant || v < r[0] {
		t.Fatalf("broker advertises %s v%d-v%d; test needs v%d+", kmsg.NameForKey(int16(key)), r[0], r[1], minWant)
	}
	return v
}

// ---------------------------------------------------------------------------
// Hand-built record batches.

var crc32c = crc32.MakeTable(crc32.Castagnoli)

type rawRecord struct {
	key, value []byte
	headers    []kmsg.Header
	tsDelta    int64
}

// rawBatch builds the wire bytes of one uncompressed v2 record batch.
func rawBatch(pid int64, epoch int16, firstSeq int32, firstTimestamp int64, recs []rawRecord) []byte {
	return rawBatchGzip(pid, epoch, firstSeq, firstTimestamp, recs, false)
}

// rawBatchGzip builds one v2 record batch, its records gzipped if gz.
func rawBatchGzip(pid int64, epoch int16, firstSeq int32, firstTimestamp int64, recs []rawRecord, gz bool) []byte {
	var body []byte
	maxTS := firstTimestamp
	for i, rr := range recs {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: rr.tsDelta,
			Key:              rr.key,
			Value:            rr.value,
			Headers:          rr.headers,
		}
		// Length counts the bytes after its own varint: encode once to
		// measure (Length 0 is one byte), then for real.
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		body = append(body, r.AppendTo(nil)...)
		if firstTimestamp+rr.tsDelta > maxTS {
			maxTS = firstTimestamp + rr.tsDelta
		}
	}
	var attrs int16
	if gz {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(body)
		_ = w.Close()
		body = buf.Bytes()
		attrs = 1
	}
	rb := kmsg.RecordBatch{
		Attributes:           attrs,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(recs)) - 1,
		FirstTimestamp:       firstTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        firstSeq,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32c))
	return raw
}

// valueRecords makes one record per value, keyed "k-<value>".
func valueRecords(values ...string) []rawRecord {
	out := make([]rawRecord, len(values))
	for i, v := range values {
		out[i] = rawRecord{key: []byte("k-" + v), value: []byte(v), tsDelta: int64(i)}
	}
	return out
}

// produceRaw sends one batch to topic/partition at the given Produce version
// (acks=all) and returns the partition response.
func (c *rawConn) produceRaw(version int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("Produce v%d: want one topic with one partition in response, got %+v", version, resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// initProducerID asks for a fresh idempotent producer id.
func (c *rawConn) initProducerID(version int16) (int64, int16) {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionTimeoutMillis = 60000
	resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		c.t.Fatalf("InitProducerID v%d: %v", version, kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		c.t.Fatalf("InitProducerID v%d: producer id %d epoch %d; want non-negative", version, resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// errName renders a Kafka error code for messages.
func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("code %d", code)
}

// values renders record values for messages.
func values(rs []*kgo.Record) string {
	var sb strings.Builder
	for i, r := range rs {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%d:%q", r.Offset, r.Value)
	}
	return sb.String()
}

// crcChecksum is the CRC-32C that RecordBatch uses.
func crcChecksum(b []byte) uint32 { return crc32.Checksum(b, crc32c) }

// coordinatorNotReady reports the error codes a client retries while a
// coordinator is being elected or loaded (Apache Kafka right after start).
func coordinatorNotReady(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code || code == kerr.CoordinatorLoadInProgress.Code
}
