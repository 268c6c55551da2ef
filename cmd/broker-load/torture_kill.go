package main

// The kill phase: idempotent acks=all producers and native queue senders
// and receivers run while the broker is killed with SIGKILL at random
// moments and restarted on the same data directory. At the end every
// partition is read back and the queue drained, and torture_check.go
// judges what the clients were told against what the broker holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	killTopic      = "torture-kill"
	killPartitions = 4
	killProducers  = 2
	killQueue      = "torture-q"
	killSenders    = 2
	killReceivers  = 2
	// killProgressWait bounds how long a restarted broker may take to
	// acknowledge its first record and queue send.
	killProgressWait = 20 * time.Second
)

// killLedger collects every acknowledgement of the kill phase.
type killLedger struct {
	mu          sync.Mutex
	acked       []loggedRecord
	ackedKeys   map[int32]map[int64]bool
	doubleAck   []string
	produceErrs map[string]int
	queue       *queueLedger
	ackStatuses map[string]int
	httpErrs    map[string]int
	kafkaAcks   atomic.Int64
	sendAcks    atomic.Int64
	receiveAcks atomic.Int64
}

func (l *killLedger) recordProduce(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.produceErrs[err.Error()]++
		return
	}
	m := l.ackedKeys[r.Partition]
	if m == nil {
		m = map[int64]bool{}
		l.ackedKeys[r.Partition] = m
	}
	if m[r.Offset] {
		l.doubleAck = append(l.doubleAck, fmt.Sprintf("offset %d/%d acknowledged twice (second: %s)", r.Partition, r.Offset, r.Value))
		return
	}
	m[r.Offset] = true
	l.acked = append(l.acked, loggedRecord{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	l.kafkaAcks.Add(1)
}

func (l *killLedger) httpErr(what string, err error) {
	l.mu.Lock()
	l.httpErrs[what+": "+err.Error()]++
	l.mu.Unlock()
}

func runKillPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	b, err := env.startPhaseBroker(ctx, "kill", "")
	if err != nil {
		return err
	}
	p.broker = b
	k := &killPhase{env: env, p: p, b: b,
		hc:   &http.Client{Timeout: 10 * time.Second},
		base: "http://" + b.httpAddr + "/v1/queues/" + killQueue,
		l: &killLedger{ackedKeys: map[int32]map[int64]bool{}, produceErrs: map[string]int{}, queue: newQueueLedger(),
			ackStatuses: map[string]int{}, httpErrs: map[string]int{}},
	}
	if err := k.createTargets(ctx); err != nil {
		return err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	clients, err := k.startLoad(loadCtx, &wg)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if err != nil {
		return err
	}

	kills, restartMax, stalls, loopErr := k.loop(ctx, d)
	env.logf("kill: %d kills; stopping the load", kills)
	stopLoad()
	wg.Wait()
	if loopErr != nil {
		return loopErr
	}
	flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for _, cl := range clients {
		_ = cl.Flush(flushCtx) // records of the canceled context fail: outcome unknown
	}
	cancel()

	p.count("kills", int64(kills))
	p.count("max restart ms", restartMax.Milliseconds())
	p.check("kill -9 cycles", kills > 0, "%d kills, restarts took at most %v", kills, restartMax.Round(time.Millisecond))
	p.check("progress after every restart", stalls == 0, "%d restarts with nothing acknowledged within %v", stalls, killProgressWait)
	if err := k.checkLog(ctx); err != nil {
		return err
	}
	return k.checkQueue(ctx)
}

// killPhase is one run of the kill phase: its broker, the queue's URL
// (base) and the HTTP client for it, and the ledger of what the clients
// were told.
type killPhase struct {
	env  *tortureEnv
	p    *PhaseReport
	b    *brokerProcess
	hc   *http.Client
	base string
	l    *killLedger
}

// createTargets creates the phase's topic and queue.
func (k *killPhase) createTargets(ctx context.Context) error {
	b, hc, base := k.b, k.hc, k.base
	adm, admClient, err := newTortureAdmin(b.kafkaAddr)
	if err != nil {
		return err
	}
	if _, err := adm.CreateTopic(ctx, killPartitions, 1, nil, killTopic); err != nil {
		admClient.Close()
		return fmt.Errorf("create topic: %w", err)
	}
	admClient.Close()
	if st, _, err := httpJSON(ctx, hc, "PUT", base, map[string]any{"visibility_timeout_ms": 3000, "max_receives": 20}); err != nil || st != 201 {
		return fmt.Errorf("create queue: status %d, %v", st, err)
	}
	return nil
}

// startLoad starts the load of the phase until loadCtx ends: the
// idempotent producers, the queue senders and receivers, each a goroutine
// counted in wg, their outcomes in the ledger. It returns the producers'
// clients (those created before an error too), for the caller to flush
// and close.
func (k *killPhase) startLoad(loadCtx context.Context, wg *sync.WaitGroup) ([]*kgo.Client, error) {
	env, b, l := k.env, k.b, k.l
	var clients []*kgo.Client
	for i := range killProducers {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.kafkaAddr),
			kgo.DefaultProduceTopic(killTopic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MaxBufferedRecords(500),
			kgo.ProducerLinger(2*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		)
		if err != nil {
			return clients, err
		}
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// About 500 records a second per producer: batches are in
			// flight at every kill, and reading the log back stays cheap.
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for seq := 0; seq < 10_000_000; seq++ {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
				r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", seq%64), Value: []byte(tortureValue(i, seq))}
				cl.Produce(loadCtx, r, l.recordProduce)
			}
		}()
	}
	sendSeq := new(atomic.Int64)
	for i := range killSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.queueSendLoop(loadCtx, i, sendSeq)
		}()
	}
	for range killReceivers {
		seed := env.rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.queueReceiveLoop(loadCtx, seed)
		}()
	}
	return clients, nil
}

// loop kills the broker with SIGKILL at random moments for d and
// restarts it, each time once it acknowledged something of each kind (a
// restart that does not within killProgressWait is a stall). It returns
// the kills, the longest restart, the stalls, and why it stopped early.
func (k *killPhase) loop(ctx context.Context, d time.Duration) (kills int, restartMax time.Duration, stalls int, err error) {
	env, p, b, l := k.env, k.p, k.b, k.l
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && kills < 100_000 {
		// Wait until this broker acknowledged something of each kind, so
		// that every kill lands on a working broker under load.
		k0, s0 := l.kafkaAcks.Load(), l.sendAcks.Load()
		progressBy := time.Now().Add(killProgressWait)
		for (l.kafkaAcks.Load() == k0 || l.sendAcks.Load() == s0) && time.Now().Before(progressBy) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if l.kafkaAcks.Load() == k0 || l.sendAcks.Load() == s0 {
			stalls++
			p.note("after restart %d: nothing acknowledged within %v (kafka acks %d, queue sends %d)", kills, killProgressWait, l.kafkaAcks.Load()-k0, l.sendAcks.Load()-s0)
		}
		wait := env.cfg.killMin + time.Duration(env.rng.Int64N(int64(env.cfg.killMax-env.cfg.killMin)+1))
		if time.Now().Add(wait).After(deadline) {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		if !b.alive() {
			return kills, restartMax, stalls, fmt.Errorf("the broker exited on its own before kill %d: %v", kills+1, b.exitErr())
		}
		b.kill()
		kills++
		t0 := time.Now()
		if err := b.start(ctx); err != nil {
			return kills, restartMax, stalls, fmt.Errorf("restart after kill %d: %w", kills, err)
		}
		restartMax = max(restartMax, time.Since(t0))
	}
	return kills, restartMax, stalls, nil
}

// checkLog reads the topic back and checks it against the records
// acknowledged (checkLog).
func (k *killPhase) checkLog(ctx context.Context) error {
	p, b, l := k.p, k.b, k.l
	ends, logRecs, err := readTopicBack(ctx, b.kafkaAddr, killTopic)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	l.mu.Lock()
	acked := append([]loggedRecord(nil), l.acked...)
	doubleAck := append([]string(nil), l.doubleAck...)
	produceErrs := 0
	for _, n := range l.produceErrs {
		produceErrs += n
	}
	for _, k := range topKinds(l.produceErrs, 3) {
		p.note("produce error (outcome unknown): %s", k)
	}
	for _, k := range topKinds(l.httpErrs, 5) {
		p.note("queue HTTP error: %s", k)
	}
	l.mu.Unlock()
	lc := checkLog(acked, logRecs, ends)
	p.count("records acknowledged", int64(lc.Acked))
	p.count("records read back", int64(lc.Read))
	p.count("produce errors (outcome unknown)", int64(produceErrs))
	p.check("no acknowledged record lost", lc.Lost == 0, "%d of %d lost", lc.Lost, lc.Acked)
	p.check("no duplicate record", lc.Duplicates == 0 && len(doubleAck) == 0, "%d duplicates in the log, %d offsets acknowledged twice", lc.Duplicates, len(doubleAck))
	p.check("no gap in offsets", lc.Gaps == 0, "%d partitions with a gap", lc.Gaps)
	p.check("per-partition order", lc.Disordered == 0, "%d records out of their producer's order", lc.Disordered)
	p.check("no foreign record", lc.Foreign == 0, "%d records not written by this run", lc.Foreign)
	for _, s := range append(lc.Details, doubleAck...) {
		p.note("kafka: %s", s)
	}
	return nil
}

// checkQueue drains the queue, then checks what is left in it and its DLQ
// against the sends and acks acknowledged (checkQueue).
func (k *killPhase) checkQueue(ctx context.Context) error {
	p, b, hc, l := k.p, k.b, k.hc, k.l
	remaining, drained, err := drainQueue(ctx, hc, "http://"+b.httpAddr, killQueue, l)
	if err != nil {
		return fmt.Errorf("queue drain: %w", err)
	}
	l.mu.Lock()
	qc := checkQueue(l.queue, remaining)
	unknownSends, unknownAcks := len(l.queue.SentUnknown), len(l.queue.AckUnknown)
	statuses := fmt.Sprint(l.ackStatuses)
	httpErrs := 0
	for _, n := range l.httpErrs {
		httpErrs += n
	}
	l.mu.Unlock()
	p.count("queue sends acknowledged", int64(qc.SentAcked))
	p.count("queue sends unknown", int64(unknownSends))
	p.count("queue acks", int64(qc.Acked))
	p.count("queue acks unknown", int64(unknownAcks))
	p.count("drained at the end", int64(drained))
	p.count("left in queue or DLQ", int64(qc.Remaining))
	p.count("queue HTTP errors", int64(httpErrs))
	p.check("no acknowledged send lost", qc.Lost == 0, "%d of %d acknowledged sends neither acked nor in the queue or DLQ", qc.Lost, qc.SentAcked)
	p.check("no message acked twice", qc.AckedTwice == 0, "%d", qc.AckedTwice)
	p.check("nothing acked left in the queue", qc.AckedAndLeft == 0, "%d", qc.AckedAndLeft)
	p.check("no foreign message", qc.Foreign == 0, "%d", qc.Foreign)
	p.note("queue ack statuses: %s", statuses)
	for _, s := range qc.Details {
		p.note("queue: %s", s)
	}
	return nil
}

// queueSendLoop sends batches of 5 unique bodies until ctx ends.
func (k *killPhase) queueSendLoop(ctx context.Context, id int, seq *atomic.Int64) {
	hc, base, l := k.hc, k.base, k.l
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		bodies := make([]string, 5)
		msgs := make([]map[string]string, len(bodies))
		for i := range bodies {
			bodies[i] = fmt.Sprintf("q%d-%09d", id, seq.Add(1))
			msgs[i] = map[string]string{"body": bodies[i]}
		}
		st, raw, err := httpJSON(ctx, hc, "POST", base+"/messages", map[string]any{"messages": msgs})
		var res struct {
			Results []struct {
				Index int             `json:"index"`
				Error json.RawMessage `json:"error"`
			} `json:"results"`
		}
		switch {
		case err == nil && st == 200 && json.Unmarshal(raw, &res) == nil && len(res.Results) == len(bodies):
			l.mu.Lock()
			for i, r := range res.Results {
				if len(r.Error) == 0 || string(r.Error) == "null" {
					l.queue.SentAcked[bodies[i]] = true
					l.sendAcks.Add(1)
				}
			}
			l.mu.Unlock()
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		case err == nil && st >= 400 && st < 500:
			// Refused: nothing stored.
			l.httpErr("send", fmt.Errorf("status %d: %.200s", st, raw))
		default:
			if err == nil {
				err = fmt.Errorf("status %d: %.200s", st, raw)
			}
			l.mu.Lock()
			for _, body := range bodies {
				l.queue.SentUnknown[body] = true
			}
			l.mu.Unlock()
			l.httpErr("send", shortErr(err))
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

type receivedMessage struct {
	Receipt string  `json:"receipt"`
	Body    *string `json:"body"`
}

// queueReceiveLoop receives up to 10 messages and acks them, leaving one
// unacked now and then so that leases expire and messages come back.
func (k *killPhase) queueReceiveLoop(ctx context.Context, seed uint64) {
	hc, base, l := k.hc, k.base, k.l
	rng := newRand(seed)
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		st, raw, err := httpJSON(ctx, hc, "POST", base+"/receive", map[string]any{"max_messages": 10, "wait_ms": 500, "visibility_timeout_ms": 3000})
		var res struct {
			Messages []receivedMessage `json:"messages"`
		}
		if err != nil || st != 200 || json.Unmarshal(raw, &res) != nil {
			if err == nil {
				err = fmt.Errorf("status %d: %.200s", st, raw)
			}
			if ctx.Err() == nil {
				l.httpErr("receive", shortErr(err))
			}
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		msgs := res.Messages
		if len(msgs) > 1 && rng.IntN(10) == 0 {
			msgs = msgs[:len(msgs)-1] // leave one to its lease
		}
		if len(msgs) == 0 {
			continue
		}
		// Acks go out even when ctx ends now: their outcome is recorded.
		ackMessages(context.WithoutCancel(ctx), hc, base, msgs, l)
	}
}

func ackMessages(ctx context.Context, hc *http.Client, base string, msgs []receivedMessage, l *killLedger) {
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	st, raw, err := httpJSON(ctx, hc, "POST", base+"/ack", map[string]any{"receipts": receipts})
	var res struct {
		Results []struct {
			Index  int    `json:"index"`
			Status string `json:"status"`
			Error  *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"results"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || st != 200 || json.Unmarshal(raw, &res) != nil || len(res.Results) != len(msgs) {
		for _, m := range msgs {
			if m.Body != nil {
				l.queue.AckUnknown[*m.Body] = true
			}
		}
		if err == nil {
			err = fmt.Errorf("status %d: %.200s", st, raw)
		}
		l.httpErrs["ack: "+shortErr(err).Error()]++
		return
	}
	for _, r := range res.Results {
		status := r.Status
		if r.Error != nil {
			status = r.Error.Code
		}
		l.ackStatuses[status]++
		if status == "acked" && r.Index >= 0 && r.Index < len(msgs) && msgs[r.Index].Body != nil {
			l.queue.Acked[*msgs[r.Index].Body]++
			l.receiveAcks.Add(1)
		}
	}
}

// drainQueue receives and acks until the queue is empty (leases of the
// run expire within seconds), then lists what is left in the queue and in
// its DLQ.
func drainQueue(ctx context.Context, hc *http.Client, httpBase, queue string, l *killLedger) (map[string]int, int, error) {
	base := httpBase + "/v1/queues/" + queue
	drained := 0
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, raw, err := httpJSON(ctx, hc, "POST", base+"/receive", map[string]any{"max_messages": 100, "wait_ms": 1000, "visibility_timeout_ms": 30000})
		var res struct {
			Messages []receivedMessage `json:"messages"`
		}
		if err != nil || st != 200 || json.Unmarshal(raw, &res) != nil {
			return nil, 0, fmt.Errorf("receive: status %d, %v: %.200s", st, err, raw)
		}
		if len(res.Messages) > 0 {
			drained += len(res.Messages)
			ackMessages(ctx, hc, base, res.Messages, l)
			continue
		}
		st, raw, err = httpJSON(ctx, hc, "GET", base+"/stats", nil)
		var stats struct {
			Available, Inflight, Delayed int64
		}
		if err != nil || st != 200 || json.Unmarshal(raw, &stats) != nil {
			return nil, 0, fmt.Errorf("stats: status %d, %v: %.200s", st, err, raw)
		}
		if stats.Available == 0 && stats.Inflight == 0 && stats.Delayed == 0 {
			break
		}
	}
	remaining := map[string]int{}
	for _, q := range []string{queue, queue + ".dlq"} {
		after := ""
		for range 10_000 {
			url := httpBase + "/v1/queues/" + q + "/messages?limit=1000"
			if after != "" {
				url += "&after=" + after
			}
			st, raw, err := httpJSON(ctx, hc, "GET", url, nil)
			if st == 404 && q != queue {
				break // no DLQ was created
			}
			var res struct {
				Messages []struct {
					Body  *string `json:"body"`
					State string  `json:"state"`
				} `json:"messages"`
				Next string `json:"next"`
			}
			if err != nil || st != 200 || json.Unmarshal(raw, &res) != nil {
				return nil, 0, fmt.Errorf("browse %s: status %d, %v: %.200s", q, st, err, raw)
			}
			for _, m := range res.Messages {
				if m.Body != nil && m.State != "acked" {
					remaining[*m.Body]++
				}
			}
			if res.Next == "" {
				break
			}
			after = res.Next
		}
	}
	return remaining, drained, nil
}

// readTopicBack reads every partition of topic from offset 0 up to the
// end offsets listed now.
func readTopicBack(ctx context.Context, addr, topic string) (map[int32]int64, map[int32][]loggedRecord, error) {
	adm, admClient, err := newTortureAdmin(addr)
	if err != nil {
		return nil, nil, err
	}
	defer admClient.Close()
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	ends := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	listed.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().At(0)
	})
	out := map[int32][]loggedRecord{}
	for p := range ends {
		out[p] = nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	// Read until every partition reached its end offset, or until nothing
	// new arrived for readBackIdle: then the checker reports what is
	// missing as lost records or gaps.
	const readBackIdle = 15 * time.Second
	done := func() bool {
		for p, end := range ends {
			if n := len(out[p]); n > 0 && out[p][n-1].Offset+1 >= end {
				continue
			} else if n == 0 && end == 0 {
				continue
			}
			return false
		}
		return true
	}
	lastProgress := time.Now()
	for !done() && time.Since(lastProgress) < readBackIdle {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[r.Partition] = append(out[r.Partition], loggedRecord{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				lastProgress = time.Now()
			}
		})
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
	}
	return ends, out, nil
}

func newTortureAdmin(addr string) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// httpJSON sends body as JSON (nil: no body) and returns status and body.
func httpJSON(ctx context.Context, hc *http.Client, method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode, raw, err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// shortErr drops the URL from a net/http error so that errors group by kind.
func shortErr(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// topKinds lists the n most frequent error texts with their counts.
func topKinds(m map[string]int, n int) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%d x %.200s", m[k], k))
	}
	return out
}
