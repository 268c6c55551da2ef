package main

// The queue mode: native-queue load against our broker's HTTP API or a
// Redis stream (consumer group), printing one result line per run. The
// JetStream side of the comparison lives in bench/queue-jetstream (its
// client, nats.go, stays out of this module) and prints the same line.
//
//	broker-load queue --target ours  --addr 127.0.0.1:8080 --batch 10
//	broker-load queue --target redis --addr 127.0.0.1:6379 --batch 1
//
// Phase 1 sends --messages messages of --size bytes from --producers
// clients, --batch per request; phase 2 drains them with --consumers
// clients, each receiving up to --batch and acking them: with --ack-mode
// next (ours only, the default) the acks ride on the consumer's next
// receive (one request and one fsync per batch), with separate in an ack
// request of their own. Reported: send and receive+ack messages per
// second, p50/p99 receive latency (one receive call).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

type queueConfig struct {
	target, addr, queue, label string
	messages, size             int
	producers, consumers       int
	batch                      int
	ackMode                    string
	timeout                    time.Duration
	jsonOut                    bool
	// serverPID, when set, is the server's process: its CPU per message
	// of each phase is reported.
	serverPID int
	// noKeepAlive opens a connection per HTTP request (ours only), to
	// measure what keep-alive saves.
	noKeepAlive bool
}

// QueueResult is one queue run; bench/queue-jetstream prints the same fields.
type QueueResult struct {
	Target        string  `json:"target"`
	Case          string  `json:"case"`
	Batch         int     `json:"batch"`
	AckMode       string  `json:"ack_mode,omitempty"`
	Messages      int     `json:"messages"`
	Size          int     `json:"size"`
	Producers     int     `json:"producers"`
	Consumers     int     `json:"consumers"`
	SendPerSec    float64 `json:"send_msgs_per_sec"`
	ConsumePerSec float64 `json:"receive_ack_msgs_per_sec"`
	ReceiveP50Ms  float64 `json:"receive_p50_ms"`
	ReceiveP99Ms  float64 `json:"receive_p99_ms"`
	// SendCPUPerMsgUs and ReceiveCPUPerMsgUs are the server's CPU time
	// (utime+stime of --server-pid) per message of each phase, in
	// microseconds: steadier than throughput on a shared machine.
	SendCPUPerMsgUs    float64 `json:"send_server_cpu_us_per_msg,omitempty"`
	ReceiveCPUPerMsgUs float64 `json:"receive_server_cpu_us_per_msg,omitempty"`
	Consumed           int64   `json:"consumed"`
	Errors             int64   `json:"errors"`
}

// queueDriver is one system under test.
type queueDriver interface {
	setup(ctx context.Context) error
	// send sends one batch of bodies.
	send(ctx context.Context, bodies [][]byte) error
	// receiveAck receives up to n messages, acks them, and returns how many
	// and the latency of the receive alone.
	receiveAck(ctx context.Context, consumer, n int) (int, time.Duration, error)
}

func runQueueMode(args []string) int {
	cfg := queueConfig{}
	fs := flag.NewFlagSet("broker-load queue", flag.ContinueOnError)
	fs.StringVar(&cfg.target, "target", "ours", "ours (HTTP API) or redis (streams)")
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "HTTP address of the broker, or Redis host:port")
	fs.StringVar(&cfg.queue, "queue", "bench-queue", "queue or stream name (recreated)")
	fs.StringVar(&cfg.label, "case", "", "label copied into the result")
	fs.IntVar(&cfg.messages, "messages", 20000, "messages to send and then consume")
	fs.IntVar(&cfg.size, "size", 1024, "body bytes")
	fs.IntVar(&cfg.producers, "producers", 4, "sending clients")
	fs.IntVar(&cfg.consumers, "consumers", 4, "receiving clients")
	fs.IntVar(&cfg.batch, "batch", 10, "messages per send, and max per receive")
	fs.StringVar(&cfg.ackMode, "ack-mode", "next", "ours: next (acks ride on the next receive) or separate (an ack request per batch)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "hard limit of the run")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the result as one JSON line")
	fs.IntVar(&cfg.serverPID, "server-pid", 0, "if set, report the server process's CPU time per message of each phase (utime+stime from /proc/PID/stat)")
	fs.BoolVar(&cfg.noKeepAlive, "no-keep-alive", false, "ours: a new connection per request (HTTP/1.1 keep-alive off), to measure what keep-alive saves")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.messages < 1 || cfg.producers < 1 || cfg.consumers < 1 || cfg.batch < 1 || cfg.batch > 1000 || cfg.size < 1 {
		fmt.Fprintln(os.Stderr, "broker-load queue: --messages, --producers, --consumers, --size must be positive and --batch 1..1000")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	if cfg.ackMode != "next" && cfg.ackMode != "separate" {
		fmt.Fprintf(os.Stderr, "broker-load queue: --ack-mode %q is not next or separate\n", cfg.ackMode)
		return 2
	}
	var d queueDriver
	switch cfg.target {
	case "ours":
		d = newHTTPQueueDriver(cfg)
	case "redis":
		d = &redisQueueDriver{cfg: cfg}
		cfg.ackMode = ""
	default:
		fmt.Fprintf(os.Stderr, "broker-load queue: --target %q is not ours or redis\n", cfg.target)
		return 2
	}
	res, err := runQueueLoad(ctx, cfg, d)
	if res != nil {
		if cfg.jsonOut {
			_ = json.NewEncoder(os.Stdout).Encode(res)
		} else {
			fmt.Printf("%s batch=%d: send %.0f msg/s, receive+ack %.0f msg/s, receive p50 %.2f ms p99 %.2f ms (%d consumed, %d errors)\n",
				res.Target, res.Batch, res.SendPerSec, res.ConsumePerSec, res.ReceiveP50Ms, res.ReceiveP99Ms, res.Consumed, res.Errors)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "broker-load queue: %v\n", err)
		return 1
	}
	return 0
}

// runQueueLoad runs the send phase then the receive+ack phase on d.
func runQueueLoad(ctx context.Context, cfg queueConfig, d queueDriver) (*QueueResult, error) {
	if err := d.setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	res := &QueueResult{Target: cfg.target, Case: cfg.label, Batch: cfg.batch, Messages: cfg.messages, Size: cfg.size, Producers: cfg.producers, Consumers: cfg.consumers, AckMode: cfg.ackMode}
	body := bytes.Repeat([]byte("q"), cfg.size)
	var errCount atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		errCount.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	// Phase 1: send.
	var next atomic.Int64
	cpu := startCPUMeter(cfg.serverPID)
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < cfg.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := next.Add(int64(cfg.batch))
				first := n - int64(cfg.batch)
				if first >= int64(cfg.messages) {
					return
				}
				k := int(min(n, int64(cfg.messages)) - first)
				bodies := make([][]byte, k)
				for i := range bodies {
					bodies[i] = body
				}
				if err := d.send(ctx, bodies); err != nil {
					fail(err)
					if errCount.Load() > 100 {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	res.SendPerSec = float64(cfg.messages) / time.Since(start).Seconds()
	res.SendCPUPerMsgUs = cpu.perMessageUs(cfg.messages)

	// Phase 2: receive and ack until everything is consumed.
	var consumed, finished atomic.Int64
	lat := newLockedHistogram()
	cpu = startCPUMeter(cfg.serverPID)
	start = time.Now()
	for c := 0; c < cfg.consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for ctx.Err() == nil && consumed.Load() < int64(cfg.messages) && idle < 5 {
				n, took, err := d.receiveAck(ctx, c, cfg.batch)
				if err != nil {
					fail(err)
					if errCount.Load() > 100 {
						return
					}
					continue
				}
				if n == 0 {
					idle++
					continue
				}
				idle = 0
				lat.RecordDuration(took)
				if consumed.Add(int64(n)) >= int64(cfg.messages) {
					finished.CompareAndSwap(0, time.Since(start).Nanoseconds())
				}
			}
		}()
	}
	wg.Wait()
	// The phase ends with the last ack, not with the other consumers' long
	// polls on the then empty queue.
	elapsed := time.Duration(finished.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res.Consumed = consumed.Load()
	res.ReceiveCPUPerMsgUs = cpu.perMessageUs(int(res.Consumed))
	res.ConsumePerSec = float64(res.Consumed) / elapsed.Seconds()
	h := lat.Snapshot()
	res.ReceiveP50Ms = float64(h.QuantileDuration(0.50).Microseconds()) / 1000
	res.ReceiveP99Ms = float64(h.QuantileDuration(0.99).Microseconds()) / 1000
	res.Errors = errCount.Load()
	if e, ok := firstErr.Load().(error); ok {
		return res, fmt.Errorf("%d errors, first: %w", res.Errors, e)
	}
	if res.Consumed < int64(cfg.messages) {
		return res, fmt.Errorf("consumed %d of %d messages", res.Consumed, cfg.messages)
	}
	return res, nil
}

// httpQueueDriver drives our native queue API. Its JSON goes through
// JSON v2 with typed values, and a send's body (every message is the same)
// is encoded once per batch size: the load tool shares the machine's cores
// with the broker, so its own encoding should cost about what a Redis
// client's RESP does.
type httpQueueDriver struct {
	cfg    queueConfig
	client *http.Client
	base   string
	// pending[c] holds consumer c's receipts not yet acked (ack mode next).
	pending [][]string
	// sendBodies[k] is the encoded send request of k messages.
	sendBodies sync.Map
}

func newHTTPQueueDriver(cfg queueConfig) *httpQueueDriver {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute, DisableKeepAlives: cfg.noKeepAlive}
	return &httpQueueDriver{cfg: cfg, client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		base: "http://" + cfg.addr + "/v1/queues/" + cfg.queue, pending: make([][]string, cfg.consumers)}
}

func (d *httpQueueDriver) do(ctx context.Context, method, url string, body any, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = jsonv2.Marshal(body); err != nil {
			return err
		}
	}
	return d.doRaw(ctx, method, url, raw, out)
}

// doRaw sends raw (nil: no body) and decodes the answer into out.
func (d *httpQueueDriver) doRaw(ctx context.Context, method, url string, raw []byte, out any) error {
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 && !(method == "DELETE" && resp.StatusCode == 404) {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(answer))
	}
	if out != nil {
		return jsonv2.Unmarshal(answer, out)
	}
	return nil
}

func (d *httpQueueDriver) setup(ctx context.Context) error {
	if err := d.do(ctx, "DELETE", d.base+"?force=true", nil, nil); err != nil {
		return err
	}
	return d.do(ctx, "PUT", d.base, map[string]any{"visibility_timeout_ms": 60000}, nil)
}

type sendMessage struct {
	Body string `json:"body"`
}

func (d *httpQueueDriver) send(ctx context.Context, bodies [][]byte) error {
	raw, ok := d.sendBodies.Load(len(bodies))
	if !ok {
		msgs := make([]sendMessage, len(bodies))
		for i, b := range bodies {
			msgs[i] = sendMessage{Body: string(b)}
		}
		enc, err := jsonv2.Marshal(struct {
			Messages []sendMessage `json:"messages"`
		}{msgs})
		if err != nil {
			return err
		}
		raw, _ = d.sendBodies.LoadOrStore(len(bodies), enc)
	}
	var res struct {
		Results []struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	}
	if err := d.doRaw(ctx, "POST", d.base+"/messages", raw.([]byte), &res); err != nil {
		return err
	}
	for _, r := range res.Results {
		if r.Error != nil {
			return fmt.Errorf("send: %s: %s", r.Error.Code, r.Error.Message)
		}
	}
	return nil
}

type itemResults []struct {
	Status string `json:"status"`
}

// acked counts the "acked" results; any other result is an error, since
// every receipt in the benchmark is acked once within its lease.
func (r itemResults) acked() (int, error) {
	for _, it := range r {
		if it.Status != "acked" {
			return 0, fmt.Errorf("ack: %+v", r)
		}
	}
	return len(r), nil
}

type receiveRequest struct {
	MaxMessages int      `json:"max_messages"`
	WaitMs      int      `json:"wait_ms"`
	Ack         []string `json:"ack,omitempty"`
}

// receiveAck counts the messages it acks. In ack mode next, a receive
// carries the receipts of the consumer's previous batch; a batch shorter
// than n (the queue is draining) is acked at once so nothing waits in a
// long poll.
func (d *httpQueueDriver) receiveAck(ctx context.Context, c int, n int) (int, time.Duration, error) {
	start := time.Now()
	req := receiveRequest{MaxMessages: n, WaitMs: 1000}
	pending := d.pending[c]
	if len(pending) > 0 {
		// No long poll while holding acks: on an empty queue the acks
		// should come back at once, not after the wait.
		req.Ack, req.WaitMs = pending, 0
	}
	var res struct {
		Messages []struct {
			Receipt string `json:"receipt"`
		} `json:"messages"`
		Acks itemResults `json:"acks"`
	}
	if err := d.do(ctx, "POST", d.base+"/receive", req, &res); err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	done, err := res.Acks.acked()
	if err != nil {
		return 0, took, err
	}
	if len(res.Acks) != len(pending) {
		return 0, took, fmt.Errorf("acked %d of %d receipts", len(res.Acks), len(pending))
	}
	d.pending[c] = nil
	receipts := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		receipts[i] = m.Receipt
	}
	if d.cfg.ackMode == "next" && len(receipts) == n {
		d.pending[c] = receipts
		return done, took, nil
	}
	if len(receipts) == 0 {
		return done, took, nil
	}
	var ack struct {
		Results itemResults `json:"results"`
	}
	if err := d.do(ctx, "POST", d.base+"/ack", map[string]any{"receipts": receipts}, &ack); err != nil {
		return done, took, err
	}
	k, err := ack.Results.acked()
	return done + k, took, err
}

// redisQueueDriver drives a Redis stream with a consumer group (XADD,
// XREADGROUP, XACK) over a minimal RESP client, one connection per client.
type redisQueueDriver struct {
	cfg   queueConfig
	mu    sync.Mutex
	conns []*respConn
}

type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func (d *redisQueueDriver) conn() (*respConn, error) {
	d.mu.Lock()
	if n := len(d.conns); n > 0 {
		c := d.conns[n-1]
		d.conns = d.conns[:n-1]
		d.mu.Unlock()
		return c, nil
	}
	d.mu.Unlock()
	c, err := net.DialTimeout("tcp", d.cfg.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReaderSize(c, 1<<16), w: bufio.NewWriterSize(c, 1<<16)}, nil
}

func (d *redisQueueDriver) put(c *respConn) {
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
}

func (c *respConn) write(args ...[]byte) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n", len(a))
		c.w.Write(a)
		c.w.WriteString("\r\n")
	}
}

func (c *respConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("resp: empty line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New("redis: " + line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := c.read()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("resp: unexpected %q", line)
}

func b(s string) []byte { return []byte(s) }

func (d *redisQueueDriver) cmd(args ...string) (any, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = b(a)
	}
	c.write(bs...)
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	v, err := c.read()
	d.put(c)
	return v, err
}

func (d *redisQueueDriver) setup(context.Context) error {
	if _, err := d.cmd("DEL", d.cfg.queue); err != nil {
		return err
	}
	_, err := d.cmd("XGROUP", "CREATE", d.cfg.queue, "workers", "$", "MKSTREAM")
	return err
}

func (d *redisQueueDriver) send(_ context.Context, bodies [][]byte) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	for _, body := range bodies { // pipelined: one round trip per batch
		c.write(b("XADD"), b(d.cfg.queue), b("*"), b("d"), body)
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	for range bodies {
		if _, err := c.read(); err != nil {
			return err
		}
	}
	d.put(c)
	return nil
}

func (d *redisQueueDriver) receiveAck(_ context.Context, consumer, n int) (int, time.Duration, error) {
	start := time.Now()
	v, err := d.cmd("XREADGROUP", "GROUP", "workers", "c"+strconv.Itoa(consumer), "COUNT", strconv.Itoa(n), "BLOCK", "1000", "STREAMS", d.cfg.queue, ">")
	took := time.Since(start)
	if err != nil || v == nil {
		return 0, took, err
	}
	streams, _ := v.([]any)
	var ids []string
	for _, s := range streams {
		pair, _ := s.([]any)
		if len(pair) != 2 {
			continue
		}
		entries, _ := pair[1].([]any)
		for _, e := range entries {
			if ent, ok := e.([]any); ok && len(ent) > 0 {
				ids = append(ids, ent[0].(string))
			}
		}
	}
	if len(ids) == 0 {
		return 0, took, nil
	}
	args := append([]string{"XACK", d.cfg.queue, "workers"}, ids...)
	if _, err := d.cmd(args...); err != nil {
		return 0, took, err
	}
	return len(ids), took, nil
}
