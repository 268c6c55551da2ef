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
	"os"
	"sort"
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
	Consumed      int64   `json:"consumed"`
	Errors        int64   `json:"errors"`
}

func main() {
	url := flag.String("url", "nats://127.0.0.1:4222", "NATS server")
	label := flag.String("case", "", "label copied into the result")
	messages := flag.Int("messages", 20000, "messages to send and then consume")
	size := flag.Int("size", 1024, "body bytes")
	producers := flag.Int("producers", 4, "publishing connections")
	consumers := flag.Int("consumers", 4, "pull subscribers")
	batch := flag.Int("batch", 10, "messages per publish round trip and per fetch")
	ackSync := flag.Bool("ack-sync", false, "wait for the server to confirm each ack")
	jsonOut := flag.Bool("json", false, "print one JSON line")
	flag.Parse()

	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "queue-jetstream: %v\n", err)
		os.Exit(1)
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4096))
	if err != nil {
		fail(err)
	}
	_ = js.DeleteStream("BENCHQ")
	if _, err := js.AddStream(&nats.StreamConfig{Name: "BENCHQ", Subjects: []string{"benchq"}, Retention: nats.WorkQueuePolicy, Storage: nats.FileStorage}); err != nil {
		fail(err)
	}
	if _, err := js.AddConsumer("BENCHQ", &nats.ConsumerConfig{Durable: "workers", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 100000}); err != nil {
		fail(err)
	}
	res := result{Target: "jetstream", Case: *label, Batch: *batch, Messages: *messages, Size: *size, Producers: *producers, Consumers: *consumers}
	body := make([]byte, *size)
	for i := range body {
		body[i] = 'q'
	}
	var errs atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := 0; p < *producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc, err := nats.Connect(*url)
			if err != nil {
				errs.Add(1)
				return
			}
			defer pc.Close()
			pjs, _ := pc.JetStream(nats.PublishAsyncMaxPending(4096))
			for {
				n := next.Add(int64(*batch))
				first := n - int64(*batch)
				if first >= int64(*messages) {
					return
				}
				k := int(min(n, int64(*messages)) - first)
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
		}()
	}
	wg.Wait()
	res.SendPerSec = float64(*messages) / time.Since(start).Seconds()

	var consumed, finished atomic.Int64
	var latMu sync.Mutex
	var lat []time.Duration
	start = time.Now()
	for c := 0; c < *consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := nats.Connect(*url)
			if err != nil {
				errs.Add(1)
				return
			}
			defer cc.Close()
			cjs, _ := cc.JetStream()
			sub, err := cjs.PullSubscribe("benchq", "workers", nats.Bind("BENCHQ", "workers"))
			if err != nil {
				errs.Add(1)
				return
			}
			idle := 0
			for consumed.Load() < int64(*messages) && idle < 5 {
				t0 := time.Now()
				msgs, err := sub.Fetch(*batch, nats.MaxWait(time.Second))
				took := time.Since(t0)
				if len(msgs) == 0 {
					idle++
					continue
				}
				_ = err
				idle = 0
				for _, m := range msgs {
					if *ackSync {
						err = m.AckSync()
					} else {
						err = m.Ack()
					}
					if err != nil {
						errs.Add(1)
					}
				}
				latMu.Lock()
				lat = append(lat, took)
				latMu.Unlock()
				if consumed.Add(int64(len(msgs))) >= int64(*messages) {
					finished.CompareAndSwap(0, time.Since(start).Nanoseconds())
				}
			}
		}()
	}
	wg.Wait()
	// The phase ends with the last ack, not with the other consumers'
	// fetches waiting on the then empty stream.
	elapsed := time.Duration(finished.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	res.ConsumePerSec = float64(consumed.Load()) / elapsed.Seconds()
	res.Consumed = consumed.Load()
	res.Errors = errs.Load()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	res.ReceiveP50Ms, res.ReceiveP99Ms = q(0.50), q(0.99)
	if *jsonOut {
		_ = json.NewEncoder(os.Stdout).Encode(res)
	} else {
		fmt.Printf("jetstream batch=%d: send %.0f msg/s, receive+ack %.0f msg/s, receive p50 %.2f ms p99 %.2f ms (%d consumed, %d errors)\n",
			res.Batch, res.SendPerSec, res.ConsumePerSec, res.ReceiveP50Ms, res.ReceiveP99Ms, res.Consumed, res.Errors)
	}
	if res.Consumed < int64(*messages) || res.Errors > 0 {
		os.Exit(1)
	}
}
