package compattests

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdempotentRawProduce drives the idempotent producer protocol by hand:
// InitProducerID, then ProduceRequests with chosen producer id, epoch and
// sequence. Each subtest has its own topic and producer id.
func TestIdempotentRawProduce(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	iv := pickVersion(t, vs, kmsg.InitProducerID, 4, 0)
	ts := time.Now().Add(-time.Minute).UnixMilli()

	setup := func(t *testing.T) (string, *rawConn, int64, int16) {
		topic := topicName(t, "")
		createTopic(t, adm, topic, 1, nil)
		c := dialRaw(t, b.Addr())
		pid, epoch := c.initProducerID(iv)
		return topic, c, pid, epoch
	}
	expect := func(t *testing.T, what string, p kmsg.ProduceResponseTopicPartition, code int16, base int64) {
		t.Helper()
		if p.ErrorCode != code {
			t.Fatalf("%s: error %s, want %s", what, errName(p.ErrorCode), errName(code))
		}
		if code == 0 && p.BaseOffset != base {
			t.Fatalf("%s: base offset %d, want %d", what, p.BaseOffset, base)
		}
	}
	readValues := func(t *testing.T, topic string, want ...string) {
		t.Helper()
		ends := endOffsets(t, adm, topic)
		if ends[0] != int64(len(want)) {
			t.Errorf("end offset %d, want %d", ends[0], len(want))
		}
		rs := readPartitions(t, b.Addr(), topic, ends)[0]
		checkContiguous(t, topic, 0, rs)
		var got []string
		for _, r := range rs {
			got = append(got, string(r.Value))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("log holds %v, want %v", got, want)
		}
	}

	t.Run("duplicate", func(t *testing.T) {
		topic, c, pid, epoch := setup(t)
		a := rawBatch(pid, epoch, 0, ts, valueRecords("a0", "a1", "a2"))
		expect(t, "first send of A", c.produceRaw(pv, topic, 0, a), 0, 0)
		// The same request again, on a new connection, as a client that
		// lost the response would resend it.
		c2 := dialRaw(t, b.Addr())
		expect(t, "resend of A", c2.produceRaw(pv, topic, 0, a), 0, 0)
		bb := rawBatch(pid, epoch, 3, ts, valueRecords("b0", "b1"))
		expect(t, "B after A", c2.produceRaw(pv, topic, 0, bb), 0, 3)
		expect(t, "resend of B", c.produceRaw(pv, topic, 0, bb), 0, 3)
		// A is one of the last five batches: still a duplicate, not a gap.
		expect(t, "resend of A after B", c.produceRaw(pv, topic, 0, a), 0, 0)
		readValues(t, topic, "a0", "a1", "a2", "b0", "b1")
	})

	t.Run("sequence-gap", func(t *testing.T) {
		topic, c, pid, epoch := setup(t)
		expect(t, "seq 0", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch, 0, ts, valueRecords("x0", "x1"))), 0, 0)
		expect(t, "seq 5 (expected 2)", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch, 5, ts, valueRecords("gap"))),
			kerr.OutOfOrderSequenceNumber.Code, 0)
		expect(t, "seq 2", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch, 2, ts, valueRecords("x2"))), 0, 2)
		readValues(t, topic, "x0", "x1", "x2")
	})

	t.Run("stale-epoch", func(t *testing.T) {
		topic, c, pid, epoch := setup(t)
		expect(t, "epoch e seq 0", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch, 0, ts, valueRecords("e0"))), 0, 0)
		// A non-transactional producer bumps its epoch itself and restarts
		// its sequence at 0 (KIP-360); the broker accepts epoch+1.
		expect(t, "epoch e+1 seq 0", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch+1, 0, ts, valueRecords("e1"))), 0, 1)
		// The old epoch is now fenced. Kafka 2.7+ answers
		// INVALID_PRODUCER_EPOCH (ProducerAppendInfo.checkProducerEpoch).
		p := c.produceRaw(pv, topic, 0, rawBatch(pid, epoch, 1, ts, valueRecords("stale")))
		if p.ErrorCode != kerr.InvalidProducerEpoch.Code && p.ErrorCode != kerr.ProducerFenced.Code {
			t.Fatalf("stale epoch %d after %d: error %s, want INVALID_PRODUCER_EPOCH", epoch, epoch+1, errName(p.ErrorCode))
		}
		expect(t, "epoch e+1 seq 1", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch+1, 1, ts, valueRecords("e1b"))), 0, 2)
		// A new epoch must start at sequence 0.
		expect(t, "epoch e+2 seq 7", c.produceRaw(pv, topic, 0, rawBatch(pid, epoch+2, 7, ts, valueRecords("bad-start"))),
			kerr.OutOfOrderSequenceNumber.Code, 0)
		readValues(t, topic, "e0", "e1", "e1b")
	})
}

// TestIdempotentKgoInjectedRetries: a franz-go idempotent producer whose
// connections lose some Produce responses after the broker has answered
// them. The client retries those batches with the same sequence numbers; the
// log must hold every record exactly once at its acked offset.
func TestIdempotentKgoInjectedRetries(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 2, nil)

	inj := &dropInjector{every: 3, max: 5}
	var d net.Dialer
	prod := newClient(t, b.Addr(),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(20),
		kgo.ProducerLinger(0),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return &dropConn{Conn: c, inj: inj, drop: make(map[int32]bool)}, nil
		}),
	)
	ctx := testCtx(t, 2*opTimeout)
	var sent []*kgo.Record
	for chunk := 0; chunk < 20; chunk++ {
		var rs []*kgo.Record
		for i := 0; i < 10; i++ {
			n := chunk*10 + i
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", n%4)), Value: []byte(fmt.Sprintf("v%03d", n))})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("chunk %d: %v (responses dropped so far: %d)", chunk, err, inj.dropped())
		}
		sent = append(sent, rs...)
	}
	if got := inj.dropped(); got != inj.max {
		t.Fatalf("dropped %d produce responses, want %d: the test did not exercise retries", got, inj.max)
	}

	ends := endOffsets(t, adm, topic)
	got := readPartitions(t, b.Addr(), topic, ends)
	acked := make(map[int32]map[int64]string)
	for _, r := range sent {
		if acked[r.Partition] == nil {
			acked[r.Partition] = make(map[int64]string)
		}
		acked[r.Partition][r.Offset] = string(r.Value)
	}
	total := 0
	seen := make(map[string]bool)
	for p, rs := range got {
		checkContiguous(t, topic, p, rs)
		total += len(rs)
		for _, r := range rs {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("%s/%d@%d: value %s appears twice (a retried batch was appended again)", topic, p, r.Offset, v)
			}
			seen[v] = true
			if want, ok := acked[p][r.Offset]; !ok || want != v {
				t.Errorf("%s/%d@%d: value %s, acked value there %q", topic, p, r.Offset, v, want)
			}
		}
	}
	if total != len(sent) {
		t.Errorf("log holds %d records, produced %d", total, len(sent))
	}
}

// dropInjector picks which Produce responses to lose: every n-th Produce
// request, up to max in all.
type dropInjector struct {
	mu       sync.Mutex
	every    int
	max      int
	produces int
	drops    int
}

func (d *dropInjector) decide() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.produces++
	if d.drops < d.max && d.produces%d.every == 2%d.every {
		d.drops++
		return true
	}
	return false
}

func (d *dropInjector) dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drops
}

// dropConn passes requests through and, for chosen Produce requests, reads
// the broker's whole response and then breaks the connection instead of
// delivering it: the batch is committed but the client never hears so.
type dropConn struct {
	net.Conn
	inj *dropInjector

	wmu  sync.Mutex
	wbuf []byte
	drop map[int32]bool // correlation ids whose response is lost

	rbuf []byte // only touched by the (single) reader
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 12 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		key := int16(binary.BigEndian.Uint16(c.wbuf[4:]))
		corr := int32(binary.BigEndian.Uint32(c.wbuf[8:]))
		if key == int16(kmsg.Produce) && c.inj.decide() {
			c.drop[corr] = true
		}
		c.wbuf = c.wbuf[4+size:]
	}
	c.wmu.Unlock()
	return c.Conn.Write(p)
}

func (c *dropConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		var size [4]byte
		if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.Conn, body); err != nil {
			return 0, err
		}
		if len(body) >= 4 {
			corr := int32(binary.BigEndian.Uint32(body))
			c.wmu.Lock()
			lose := c.drop[corr]
			c.wmu.Unlock()
			if lose {
				c.Conn.Close()
				return 0, io.ErrUnexpectedEOF
			}
		}
		c.rbuf = append(size[:], body...)
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}
