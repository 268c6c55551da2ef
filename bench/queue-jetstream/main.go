// Command queue-jetstream is the NATS JetStream side of the queue benchmark
// (bench/queue-run.sh): the same phases and the same result line as
// `broker-load queue`, against a work-queue stream with file storage. It is
// a separate module so that the main module does not depend on nats.go.
//
// Phase 1 publishes --messages bodies of --size bytes from --producers
// connections, --batch per round trip (async publishes, then wait for every
// PubAck); phase 2 drains them with --consumers pull subscribers of one
// durable consumer: Fetch(--batch), then ack each message (AckSync with
// --ack-sync, else the fire-and-forget Ack).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Target        string  `json:"target"`
	Case          string  `json:"case"`
	Batch         int     `json:"batch"`
	Messages      int     `json:"messages"`
	Size          int     `json:"size"`
	Producers     int     `json:"producers"`
	Consumers     int     `json:"consumers"`
	SendPerSec    float64 `json:"send_msgs_per_sec"`
	ConsumePerSec float64 `json:"receive_ack_msgs_per_sec"`
	ReceiveP50Ms  float64 `json:"receive_p50_ms"`
	ReceiveP99Ms  float64 `json:"receive_p99_ms"`
	// The server's CPU time per message of each phase (--server-pid).
	SendCPUPerMsgUs    float64 `json:"send_server_cpu_us_per_msg,omitempty"`
	ReceiveCPUPerMsgUs float64 `json:"receive_server_cpu_us_per_msg,omitempty"`
	Consumed           int64   `json:"consumed"`
	Errors             int64   `json:"errors"`
}

// serverCPU is utime+stime of pid in seconds (/proc/PID/stat fields 14
// and 15, USER_HZ 100, counted after the ')' ending comm); 0 when pid is
// 0 or /proc cannot tell.
func serverCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(fields[11], 64)
	k, _ := strconv.ParseFloat(fields[12], 64)
	return (u + k) / 100
}

// perMessageUs is the CPU since from per message, in microseconds.
func perMessageUs(pid int, from float64, messages int64) float64 {
	if pid == 0 || messages == 0 {
		return 0
	}
	return math.Round((serverCPU(pid)-from)*1e7/float64(messages)) / 10
}

func main() {
	o := parseFlags()
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "queue-jetstream: %v\n", err)
		os.Exit(1)
	}
	nc, err := nats.Connect(o.url)
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	if err := createStream(nc); err != nil {
		fail(err)
	}
	res := result{Target: "jetstream", Case: o.label, Batch: o.batch, Messages: o.messages, Size: o.size, Producers: o.producers, Consumers: o.consumers}
	var errs atomic.Int64
	cpu := serverCPU(o.serverPID)
	res.SendPerSec = publishAll(o, &errs)
	res.SendCPUPerMsgUs = perMessageUs(o.serverPID, cpu, int64(o.messages))
	var lat []time.Duration
	cpu = serverCPU(o.serverPID)
	res.ConsumePerSec, res.Consumed, lat = consumeAll(o, &errs)
	res.ReceiveCPUPerMsgUs = perMessageUs(o.serverPID, cpu, res.Consumed)
	res.Errors = errs.Load()
	res.ReceiveP50Ms, res.ReceiveP99Ms = quantileMs(lat, 0.50), quantileMs(lat, 0.99)
	if o.jsonOut {
		_ = json.NewEncoder(os.Stdout).Encode(res)
	} else {
		fmt.Printf("jetstream batch=%d: send %.0f msg/s, receive+ack %.0f msg/s, receive p50 %.2f ms p99 %.2f ms (%d consumed, %d errors)\n",
			res.Batch, res.SendPerSec, res.ConsumePerSec, res.ReceiveP50Ms, res.ReceiveP99Ms, res.Consumed, res.Errors)
	}
	if res.Consumed < int64(o.messages) || res.Errors > 0 {
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	url, label                           string
	messages, size, producers, consumers int
	batch, serverPID                     int
	ackSync, jsonOut                     bool
}

func parseFlags() options {
	url := flag.String("url", "nats://127.0.0.1:4222", "NATS server")
	label := flag.String("case", "", "label copied into the result")
	messages := flag.Int("messages", 20000, "messages to send and then consume")
	size := flag.Int("size", 1024, "body bytes")
	producers := flag.Int("producers", 4, "publishing connections")
	consumers := flag.Int("consumers", 4, "pull subscribers")
	batch := flag.Int("batch", 10, "messages per publish round trip and per fetch")
	ackSync := flag.Bool("ack-sync", false, "wait for the server to confirm each ack")
	jsonOut := flag.Bool("json", false, "print one JSON line")
	serverPID := flag.Int("server-pid", 0, "if set, report the server process's CPU time per message of each phase")
	flag.Parse()
	return options{url: *url, label: *label, messages: *messages, size: *size, producers: *producers,
		consumers: *consumers, batch: *batch, serverPID: *serverPID, ackSync: *ackSync, jsonOut: *jsonOut}
}

// createStream (re)creates the work-queue stream BENCHQ on file storage
// and its durable consumer "workers".
func createStream(nc *nats.Conn) error {
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	_ = js.DeleteStream("BENCHQ")
	if _, err := js.AddStream(&nats.StreamConfig{Name: "BENCHQ", Subjects: []string{"benchq"}, Retention: nats.WorkQueuePolicy, Storage: nats.FileStorage}); err != nil {
		return err
	}
	_, err = js.AddConsumer("BENCHQ", &nats.ConsumerConfig{Durable: "workers", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 100000})
	return err
}

// publishAll is phase 1: o.producers connections publish o.messages
// bodies, o.batch per round trip. It returns the messages per second.
func publishAll(o options, errs *atomic.Int64) float64 {
	body := make([]byte, o.size)
	for i := range body {
		body[i] = 'q'
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := 0; p < o.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publish(o, body, &next, errs)
		}()
	}
	wg.Wait()
	return float64(o.messages) / time.Since(start).Seconds()
}

// publish is one producer: it takes the next o.batch messages (next counts
// those taken) and publishes them asynchronously, then waits for every
// PubAck, until all o.messages are taken.
func publish(o options, body []byte, next, errs *atomic.Int64) {
	pc, err := nats.Connect(o.url)
	if err != nil {
		errs.Add(1)
		return
	}
	defer pc.Close()
	pjs, _ := pc.JetStream(nats.PublishAsyncMaxPending(4096))
	for {
		n := next.Add(int64(o.batch))
		first := n - int64(o.batch)
		if first >= int64(o.messages) {
			return
		}
		k := int(min(n, int64(o.messages)) - first)
		if k == 1 {
			if _, err := pjs.Publish("benchq", body); err != nil {
				errs.Add(1)
			}
			continue
		}
		futures := make([]nats.PubAckFuture, 0, k)
		for i := 0; i < k; i++ {
			f, err := pjs.PublishAsync("benchq", body)
			if err != nil {
				errs.Add(1)
				continue
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case <-f.Err():
				errs.Add(1)
			}
		}
	}
}

// drain is the state the consumers of phase 2 share.
type drain struct {
	o                  options
	start              time.Time
	consumed, finished atomic.Int64 // finished: ns from start to the last ack
	errs               *atomic.Int64
	latMu              sync.Mutex
	lat                []time.Duration // of each non-empty fetch
}

// consumeAll is phase 2: o.consumers pull subscribers drain the stream. It
// returns the messages per second (up to the last ack, not to the other
// consumers' fetches waiting on the then empty stream), the messages
// consumed and the fetch latencies, sorted.
func consumeAll(o options, errs *atomic.Int64) (perSec float64, consumed int64, lat []time.Duration) {
	d := &drain{o: o, errs: errs, start: time.Now()}
	var wg sync.WaitGroup
	for c := 0; c < o.consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.consume()
		}()
	}
	wg.Wait()
	elapsed := time.Duration(d.finished.Load())
	if elapsed == 0 {
		elapsed = time.Since(d.start)
	}
	sort.Slice(d.lat, func(i, j int) bool { return d.lat[i] < d.lat[j] })
	return float64(d.consumed.Load()) / elapsed.Seconds(), d.consumed.Load(), d.lat
}

// consume is one pull subscriber: Fetch(o.batch), then ack each message,
// until every message is consumed or five fetches in a row come back empty.
func (d *drain) consume() {
	o := d.o
	cc, err := nats.Connect(o.url)
	if err != nil {
		d.errs.Add(1)
		return
	}
	defer cc.Close()
	cjs, _ := cc.JetStream()
	sub, err := cjs.PullSubscribe("benchq", "workers", nats.Bind("BENCHQ", "workers"))
	if err != nil {
		d.errs.Add(1)
		return
	}
	idle := 0
	for d.consumed.Load() < int64(o.messages) && idle < 5 {
		t0 := time.Now()
		msgs, err := sub.Fetch(o.batch, nats.MaxWait(time.Second))
		took := time.Since(t0)
		if len(msgs) == 0 {
			idle++
			continue
		}
		_ = err
		idle = 0
		for _, m := range msgs {
			if o.ackSync {
				err = m.AckSync()
			} else {
				err = m.Ack()
			}
			if err != nil {
				d.errs.Add(1)
			}
		}
		d.latMu.Lock()
		d.lat = append(d.lat, took)
		d.latMu.Unlock()
		if d.consumed.Add(int64(len(msgs))) >= int64(o.messages) {
			d.finished.CompareAndSwap(0, time.Since(d.start).Nanoseconds())
		}
	}
}

// quantileMs is the p quantile of the sorted lat, in milliseconds.
func quantileMs(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
}
