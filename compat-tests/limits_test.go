package compattests

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rssBytes reads VmRSS of pid from /proc.
func rssBytes(t testing.TB, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read broker RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// lyingRSSHeadroom bounds how much the broker's RSS may grow over its idle
// RSS while 64 connections each claim a 100 MiB frame and send 4 KiB.
// What they really cost is about 64 x 64 KiB of body buffers plus their
// bufio buffers (~12 MiB); the rest is room for the client traffic and the
// garbage collector. Before the fix the claims cost 6.4 GiB of allocations.
const lyingRSSHeadroom = 256 << 20

// TestLyingFrameSizesBoundedMemory pins issue 17 (part 1): a connection
// sending a 4-byte frame size of 100 MiB followed by 4 KiB made the broker
// allocate the whole claimed size before the bytes arrived; 64 such
// connections, closed and reopened, raised its RSS from 59 MiB to 3.2 GiB.
// Here 64 connections claim 100 MiB and send 4 KiB, wait 2s and close,
// three times; the broker's RSS (VmRSS) stays within idle + 256 MiB, and a
// franz-go producer and consumer keep working meanwhile, every produce
// acknowledged and every record consumed.
func TestLyingFrameSizesBoundedMemory(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	producer := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	consumer := newClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	// Warm up both clients, then take the idle RSS.
	if err := producer.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		t.Fatalf("warm-up produce: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	pid := b.PID()
	idle := rssBytes(t, pid)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var produced, consumed atomic.Int64
	produced.Store(1)
	var maxGap atomic.Int64 // longest time between two acknowledged produces, ns
	var produceErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		last := time.Now()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := producer.ProduceSync(pctx, &kgo.Record{Value: make([]byte, 1024)}).FirstErr()
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					produceErr.Store(err)
				}
				return
			}
			produced.Add(1)
			if gap := time.Since(last); int64(gap) > maxGap.Load() {
				maxGap.Store(int64(gap))
			}
			last = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			fs.EachRecord(func(*kgo.Record) { consumed.Add(1) })
		}
	}()
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if r := rssBytes(t, pid); r > peak.Load() {
				peak.Store(r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	claim := append(binary.BigEndian.AppendUint32(nil, 100<<20), make([]byte, 4096)...)
	for round := 1; round <= 3; round++ {
		before := produced.Load()
		var liars []net.Conn
		for range 64 {
			c, err := net.DialTimeout("tcp", b.Addr(), 10*time.Second)
			if err != nil {
				t.Fatalf("round %d: dial: %v", round, err)
			}
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(claim); err != nil {
				t.Fatalf("round %d: write: %v", round, err)
			}
			liars = append(liars, c)
		}
		time.Sleep(2 * time.Second)
		if produced.Load() == before {
			t.Errorf("round %d: no produce was acknowledged during the 2s the lying connections were open", round)
		}
		for _, c := range liars {
			c.Close()
		}
		b.Alive()
	}
	time.Sleep(time.Second) // let the broker notice the closes; the sampler keeps going
	stop()
	wg.Wait()
	<-sampled
	if err, _ := produceErr.Load().(error); err != nil {
		t.Fatalf("the franz-go producer failed while lying connections were open: %v", err)
	}
	t.Logf("broker RSS: idle %d MiB, peak %d MiB; %d records produced, longest gap between acks %v",
		idle>>20, peak.Load()>>20, produced.Load(), time.Duration(maxGap.Load()).Round(time.Millisecond))
	if peak.Load() > idle+lyingRSSHeadroom {
		t.Errorf("broker RSS peaked at %d MiB, over idle %d MiB + %d MiB: claimed frame sizes were allocated", peak.Load()>>20, idle>>20, lyingRSSHeadroom>>20)
	}
	if gap := time.Duration(maxGap.Load()); gap > 5*time.Second {
		t.Errorf("the producer waited %v for an acknowledgement: lying connections stalled honest clients", gap)
	}

	// Every acknowledged record can be consumed.
	want := produced.Load()
	deadline := time.Now().Add(opTimeout)
	cctx := testCtx(t, opTimeout)
	for consumed.Load() < want && time.Now().Before(deadline) {
		fs := consumer.PollFetches(cctx)
		fs.EachRecord(func(*kgo.Record) { consumed.Add(1) })
	}
	if got := consumed.Load(); got != want {
		t.Errorf("consumed %d records, want the %d produced", got, want)
	}
	b.Stop()
}

// closedAfter waits up to limit for the broker to close c and returns how
// long that took; it fails the test if c stays open. Bytes the broker
// sends first are read and ignored.
func closedAfter(t *testing.T, c net.Conn, start time.Time, limit time.Duration, what string) time.Duration {
	t.Helper()
	_ = c.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%s: still open %v after start, want closed", what, limit)
			}
			return time.Since(start)
		}
	}
}

// TestStalledAndIdleConnectionsClosed pins issue 17 (part 2): a connection
// that stopped halfway through a frame, or never sent anything, stayed open
// forever. With --request-read-timeout 2s and --connections-max-idle 4s: a
// partial frame is closed about 2s after its first byte and a silent
// connection about 4s after it opened, while a connection that keeps sending
// requests, and one whose long-polling fetch (6s) outlasts the idle timeout,
// are not closed.
func TestStalledAndIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--request-read-timeout", "2s", "--connections-max-idle", "4s"))
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	vs := apiVersions(t, b.Addr())
	fv := pickVersion(t, vs, kmsg.Fetch, 12, 4)

	apiVersionsReq := func() kmsg.Request {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		return req
	}
	// The four cases run in parallel subtests (each may call t.Fatal).
	cases := map[string]func(t *testing.T){}
	run := func(name string, f func(t *testing.T)) { cases[name] = f }

	// A frame cut after 7 bytes: closed by request-read-timeout.
	run("partial frame", func(t *testing.T) {
		c := dialRaw(t, b.Addr())
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, apiVersionsReq(), 1)
		start := time.Now()
		c.writeAll(frame[:7])
		d := closedAfter(t, c.conn, start, 12*time.Second, "partial frame")
		if d < 1500*time.Millisecond || d > 6*time.Second {
			t.Errorf("partial frame closed after %v, want about 2s (request-read-timeout)", d)
		}
	})
	// A connection that sends nothing: closed by connections-max-idle.
	run("silent", func(t *testing.T) {
		c := dialRaw(t, b.Addr())
		d := closedAfter(t, c.conn, time.Now(), 14*time.Second, "silent connection")
		if d < 3500*time.Millisecond || d > 9*time.Second {
			t.Errorf("silent connection closed after %v, want about 4s (connections-max-idle)", d)
		}
	})
	// Requests every second for 10s (2.5 x the idle timeout): kept open.
	run("busy", func(t *testing.T) {
		c := dialRaw(t, b.Addr())
		for i := range 10 {
			resp := c.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != 0 {
				t.Errorf("busy connection, request %d: %s", i, errName(resp.ErrorCode))
			}
			time.Sleep(time.Second)
		}
	})
	// A long poll of 6s on an empty partition outlasts the idle timeout:
	// answered, not closed; then idle, the connection is closed.
	run("long poll", func(t *testing.T) {
		c := dialRaw(t, b.Addr())
		req := kmsg.NewPtrFetchRequest()
		req.Version = fv
		req.ReplicaID = -1
		req.MaxWaitMillis = 6000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		if d := time.Since(start); d < 5*time.Second {
			t.Errorf("long poll answered after %v, want about 6s", d)
		}
		if resp.ErrorCode != 0 {
			t.Errorf("long poll: %s", errName(resp.ErrorCode))
		}
		d := closedAfter(t, c.conn, time.Now(), 14*time.Second, "connection idle after its long poll")
		if d < 3500*time.Millisecond {
			t.Errorf("connection closed %v after its long poll was answered, want about 4s", d)
		}
	})
	t.Run("connections", func(t *testing.T) {
		for name, f := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f(t)
			})
		}
	})

	metrics := httpGet(t, "http://"+b.HTTPAddr()+"/metrics")
	for _, want := range []string{`broker_kafka_connection_timeouts_total{reason="request_read"}`, `broker_kafka_connection_timeouts_total{reason="idle"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	b.Stop()
}

// TestMaxConnectionsPerIP: with --max-connections-per-ip 1 and an override
// of 4 for 127.0.0.1 (max-connections-per-ip-overrides), a fifth
// connection from 127.0.0.1 is closed unanswered, counted in
// broker_kafka_connections_refused_total and logged; once one of the four
// closes, a new connection is accepted again.
func TestMaxConnectionsPerIP(t *testing.T) {
	t.Parallel()
	// The override (Kafka max.connections.per.ip.overrides) is what
	// admits four from 127.0.0.1: the default allows one.
	b := startBroker(t, withArgs("--max-connections-per-ip", "1", "--max-connections-per-ip-overrides", "192.0.2.1:7,127.0.0.1:4"))
	time.Sleep(300 * time.Millisecond) // the harness's readiness probe has closed
	req := func() kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = 0
		return r
	}
	var conns []*rawConn
	for range 4 {
		c := dialRaw(t, b.Addr())
		c.roundTrip(req())
		conns = append(conns, c)
	}
	fifth := dialRaw(t, b.Addr())
	fifth.send(req())
	_ = fifth.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.ReadFull(fifth.conn, make([]byte, 4)); err == nil {
		t.Fatalf("fifth connection from one address was answered (%d bytes); want it refused", n)
	} else {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("fifth connection from one address neither answered nor closed within 10s; want it closed")
		}
	}
	for _, c := range conns {
		c.roundTrip(req()) // the four admitted ones still work
	}
	conns[0].conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, werr := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req(), 1))
		_, rerr := io.ReadFull(c, make([]byte, 4))
		c.Close()
		if werr == nil && rerr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection accepted within 10s after one of the four closed: %v %v", werr, rerr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	metrics := httpGet(t, "http://"+b.HTTPAddr()+"/metrics")
	if !strings.Contains(metrics, `broker_kafka_connections_refused_total{reason="max_connections_per_ip"}`) {
		t.Errorf("/metrics lacks the refused connection")
	}
	if !strings.Contains(b.Log(), "connection refused: too many connections") {
		t.Errorf("the refusal was not logged")
	}
	b.Stop()
}

// TestRequestMemoryBackPressure: with --queued-max-request-bytes equal to
// --max-request-bytes (1MiB), a connection that sent 64 KiB + 4 KiB of a
// 1 MiB frame holds the whole budget: another connection's request is not
// read until it closes, then it is answered. A request as large as
// max-request-bytes still gets its memory.
func TestRequestMemoryBackPressure(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--max-request-bytes", "1MiB", "--message-max-bytes", "512KiB", "--queued-max-request-bytes", "1MiB"))
	holder := dialRaw(t, b.Addr())
	holder.writeAll(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 68<<10)...))
	time.Sleep(300 * time.Millisecond)

	waiter := dialRaw(t, b.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	waiter.send(req)
	_ = waiter.conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := io.ReadFull(waiter.conn, make([]byte, 4)); err == nil {
		t.Fatal("a request was answered while another connection held the whole request memory")
	}
	holder.conn.Close()
	if _, err := waiter.readFrame(); err != nil {
		t.Fatalf("request not answered after the holder closed: %v", err)
	}

	// A request of almost max-request-bytes (an ApiVersions v3 with a
	// client software name of about 1 MiB) gets its memory and is
	// answered, and gives the memory back: a small request is answered
	// afterwards.
	large := kmsg.NewPtrApiVersionsRequest()
	large.Version = 3
	large.ClientSoftwareVersion = "1"
	large.ClientSoftwareName = strings.Repeat("a", 1<<20-64)
	if n := len(kmsg.NewRequestFormatter(kmsg.FormatterClientID("compat-tests-raw")).AppendRequest(nil, large, 1)) - 4; n > 1<<20 || n < 1<<20-128 {
		t.Fatalf("large request is %d bytes, want just under 1MiB", n)
	}
	dialRaw(t, b.Addr()).roundTrip(large)
	dialRaw(t, b.Addr()).roundTrip(req)
	b.Stop()
}
