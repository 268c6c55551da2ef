package compattests

// Share groups on a native queue (KIP-932 on the queue's delivery engine,
// issue 10 part 3): franz-go share consumers (kgo.ShareGroup) and native
// HTTP receivers of one queue compete for its messages under one set of
// leases; a Kafka REJECT lands in the queue's DLQ with its reason; a
// lock that expires hands the message to the HTTP side; the queue's delay
// and priority decide what Kafka acquires; an acquisition survives kill -9.
// This broker only: Apache Kafka has no native queues.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareQueueLedger records who settled each message and every delivery.
type shareQueueLedger struct {
	mu         sync.Mutex
	settled    map[string][]string // value -> "kafka"/"http", once per settlement
	deliveries map[string][]int
	records    map[string]*kgo.Record // the Kafka records, by value
}

func newShareQueueLedger() *shareQueueLedger {
	return &shareQueueLedger{settled: map[string][]string{}, deliveries: map[string][]int{}, records: map[string]*kgo.Record{}}
}

func (l *shareQueueLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.settled)
}

// runKafkaQueueMember consumes the queue's topic with a kgo share
// consumer: "reject-*" values are REJECTed, "poison-*" RELEASEd, the rest
// ACCEPTed.
func runKafkaQueueMember(t *testing.T, ctx context.Context, addr, group, topic string, led *shareQueueLedger) {
	// At most 10 records per fetch, as an HTTP receive here: else the
	// members' fetches, woken at once by each send, take everything.
	cl := newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				led.mu.Lock()
				led.deliveries[v] = append(led.deliveries[v], int(r.DeliveryCount()))
				led.records[v] = r
				switch {
				case strings.HasPrefix(v, "reject-"):
					r.Ack(kgo.AckReject)
				case strings.HasPrefix(v, "poison-"):
					r.Ack(kgo.AckRelease)
				default:
					r.Ack(kgo.AckAccept)
					led.settled[v] = append(led.settled[v], "kafka")
				}
				led.mu.Unlock()
			})
			_ = cl.FlushAcks(ctx)
		}
	}()
}

// runHTTPQueueReceiver receives and acks over the native API until ctx
// ends. An ack that is not "acked" is a test failure: the lease it
// answers was held by someone else meanwhile.
func runHTTPQueueReceiver(t *testing.T, ctx context.Context, b *brokerProc, queue string, led *shareQueueLedger) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	post := func(path string, body any, out any) bool {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+b.HTTPAddr()+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		resp, err := queueHTTP.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("POST %s: %v", path, err)
			}
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("POST %s: status %d", path, resp.StatusCode)
			return false
		}
		return json.NewDecoder(resp.Body).Decode(out) == nil
	}
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var got struct{ Messages []qMsg }
			if !post("/v1/queues/"+queue+"/receive", map[string]any{"max_messages": 10, "wait_ms": 500}, &got) || len(got.Messages) == 0 {
				continue
			}
			var receipts []string
			for _, m := range got.Messages {
				receipts = append(receipts, m.Receipt)
			}
			var res struct {
				Results []struct {
					Status string
					Error  *struct{ Code string }
				}
			}
			if !post("/v1/queues/"+queue+"/ack", map[string]any{"receipts": receipts}, &res) {
				continue
			}
			led.mu.Lock()
			for i, m := range got.Messages {
				led.deliveries[m.Body] = append(led.deliveries[m.Body], m.Deliveries)
				if i < len(res.Results) && res.Results[i].Status == "acked" {
					led.settled[m.Body] = append(led.settled[m.Body], "http")
				} else {
					t.Errorf("HTTP ack of %s: %+v", m.Body, res.Results)
				}
			}
			led.mu.Unlock()
		}
	}()
	return &wg
}

// TestShareQueueWithHTTPReceivers: three kgo share consumers and two HTTP
// receivers on one queue; every message settled exactly once overall, each
// delivered once (never held by both sides), both sides served; the Kafka
// records are the queue's (key, headers); REJECT goes to the DLQ with the
// reason, and a message RELEASEd every time goes there at the queue's
// max_receives, visible over HTTP and as a Kafka topic.
func TestShareQueueWithHTTPReceivers(t *testing.T) {
	t.Parallel()
	b := shareBroker(t)
	queue := topicName(t, "")
	group := "share." + queue
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{"visibility_timeout_ms": 10000, "max_receives": 3}, 201)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpCtx, stopHTTP := context.WithCancel(ctx)
	led := newShareQueueLedger()
	for range 3 {
		runKafkaQueueMember(t, ctx, b.Addr(), group, queue, led)
	}
	var receivers []*sync.WaitGroup
	for range 2 {
		receivers = append(receivers, runHTTPQueueReceiver(t, httpCtx, b, queue, led))
	}
	values := numbered("m", 400)
	for i := 0; i < len(values); i += 40 {
		qSend(t, b, queue, values[i:i+40]...)
		time.Sleep(100 * time.Millisecond)
	}
	for deadline := time.Now().Add(groupWait); led.count() < len(values); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("settled %d of %d messages", led.count(), len(values))
		}
	}
	time.Sleep(4 * time.Second) // a lock and a bit: redeliveries that should not happen show up
	stopHTTP()
	for _, wg := range receivers {
		wg.Wait()
	}
	led.mu.Lock()
	sides := map[string]int{}
	for _, v := range values {
		if s := led.settled[v]; len(s) != 1 {
			t.Errorf("%s settled %v, want exactly once", v, s)
		} else {
			sides[s[0]]++
		}
		if d := led.deliveries[v]; fmt.Sprint(d) != "[1]" {
			t.Errorf("%s delivered with counts %v, want once", v, d)
		}
	}
	led.mu.Unlock()
	if got := shareQueueOffsets(t, b, group); got != "0:400/0" {
		t.Errorf("DescribeShareGroupOffsets of the drained queue: %s, want 0:400/0", got)
	}
	if sides["kafka"] == 0 || sides["http"] == 0 {
		t.Errorf("settled per side %v: both sides should have competed", sides)
	}
	t.Logf("settled per side: %v", sides)

	// Only Kafka consumes now: a keyed message with headers reads as a
	// plain record, and REJECTs go to the DLQ.
	qMust(t, b, "POST", "/v1/queues/"+queue+"/messages", map[string]any{"messages": []any{
		map[string]any{"body": "keyed", "key": "k-1", "headers": map[string]string{"h1": "v1"}},
		map[string]any{"body": "reject-1"}, map[string]any{"body": "reject-2"}, map[string]any{"body": "poison-1"},
	}}, 200)
	for deadline := time.Now().Add(groupWait); ; time.Sleep(100 * time.Millisecond) {
		led.mu.Lock()
		n := len(led.deliveries["keyed"]) + len(led.deliveries["reject-1"]) + len(led.deliveries["reject-2"]) + len(led.deliveries["poison-1"])
		r := led.records["keyed"]
		led.mu.Unlock()
		if n == 6 {
			if string(r.Key) != "k-1" || len(r.Headers) != 1 || r.Headers[0].Key != "h1" || string(r.Headers[0].Value) != "v1" || r.Topic != queue {
				t.Errorf("the Kafka record of a queue message: topic %s key %q headers %+v", r.Topic, r.Key, r.Headers)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kafka got %d of the 6 late deliveries", n)
		}
	}
	var dl struct {
		Messages []struct {
			Body       string
			DeadLetter struct {
				Reason, Detail string
				SourceQueue    string `json:"source_queue"`
			} `json:"dead_letter"`
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(dl.Messages) < 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DLQ holds %+v, want the 2 rejected and the poison", dl.Messages)
		}
		r := qMust(t, b, "GET", "/v1/queues/"+queue+"/dlq", nil, 200)
		if err := json.Unmarshal([]byte(r.Raw), &dl); err != nil {
			t.Fatal(err)
		}
	}
	reasons := map[string]string{}
	for _, m := range dl.Messages {
		reasons[m.Body] = m.DeadLetter.Reason
		if m.DeadLetter.SourceQueue != queue {
			t.Errorf("dead letter %+v: want source queue %s", m, queue)
		}
		if strings.HasPrefix(m.Body, "reject-") && !strings.Contains(m.DeadLetter.Detail, group) {
			t.Errorf("dead letter %+v: want the group in the detail", m)
		}
	}
	if fmt.Sprint(reasons) != "map[poison-1:max_receives reject-1:rejected reject-2:rejected]" {
		t.Errorf("DLQ reasons %v", reasons)
	}
	// The DLQ is a topic too: a plain Kafka consumer reads the reason.
	rs := readPartitions(t, b.Addr(), queue+".dlq", endOffsets(t, newAdmin(t, b.Addr()), queue+".dlq"))
	for _, r := range rs[0] {
		reason := ""
		for _, h := range r.Headers {
			if h.Key == "x-q-dlq-reason" {
				reason = string(h.Value)
			}
		}
		if reason != reasons[string(r.Value)] {
			t.Errorf("DLQ record %s over Kafka: reason header %q, over HTTP %q", r.Value, reason, reasons[string(r.Value)])
		}
	}
	if len(rs[0]) != 3 {
		t.Errorf("the DLQ topic holds %d records, want 3", len(rs[0]))
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, v := range []string{"reject-1", "reject-2"} {
		if d := led.deliveries[v]; fmt.Sprint(d) != "[1]" {
			t.Errorf("%s delivered %v, want once (a REJECT is final)", v, d)
		}
	}
	if d := led.deliveries["poison-1"]; fmt.Sprint(d) != "[1 2 3]" {
		t.Errorf("poison-1 delivered %v, want [1 2 3] (max_receives 3)", d)
	}
}

// TestShareQueueLockExpiryAndRestart: a raw member acquires 4 of 10
// messages; the broker is killed (kill -9) and restarted; the HTTP side
// gets only the other 6 while the lock lasts; the member, rejoining with
// its member ID, still accepts one of its four; the other three come to
// the HTTP side once the lock expires, at delivery 2, and the member's
// late acknowledgement is INVALID_RECORD_STATE.
func TestShareQueueLockExpiryAndRestart(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--group-share-record-lock-duration", "12s", "--group-share-auto-offset-reset", "earliest",
		"--group-consumer-heartbeat-interval", "500ms"))
	queue := topicName(t, "")
	group := "share." + queue
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{"expiry_backoff_ms": 0}, 201)
	values := numbered("r", 10)
	qSend(t, b, queue, values...)
	const member = "member-a-000000000001"
	m := newRawShareMember(t, b.Addr(), group, queue, member)
	resp, got := m.fetch([]int32{0}, nil, 4)
	if resp.ErrorCode != 0 || fmt.Sprint(got[0]) != fmt.Sprint([]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 3, DeliveryCount: 1}}) {
		t.Fatalf("acquired %s %+v, want offsets 0-3 at delivery 1", errName(resp.ErrorCode), got)
	}
	if p := resp.Topics[0].Partitions[0]; !bytes.Contains(p.Records, []byte("r-0003")) {
		t.Fatalf("the records of the acquired offsets are missing")
	}
	b.Kill()
	b.Start()
	rest := qReceive(t, b, queue, 100, 60000, 0)
	if len(rest) != 6 || rest[0].Body != "r-0004" {
		t.Fatalf("HTTP received %+v while the member's lock lasts, want r-0004..r-0009", rest)
	}
	var receipts []string
	for _, r := range rest {
		receipts = append(receipts, r.Receipt)
	}
	qMust(t, b, "POST", "/v1/queues/"+queue+"/ack", map[string]any{"receipts": receipts}, 200)

	m = newRawShareMember(t, b.Addr(), group, queue, member)
	m.fetch([]int32{0}, nil, 1) // opens the session; nothing is available
	accept := map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{0: {{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}
	resp, _ = m.fetch([]int32{0}, accept, 1)
	if code := ackCode(resp); code != 0 {
		t.Fatalf("accepting a record held across kill -9: %s", errName(code))
	}
	var again []qMsg
	for deadline := time.Now().Add(30 * time.Second); len(again) < 3 && time.Now().Before(deadline); {
		again = append(again, qReceive(t, b, queue, 100, 60000, 1000)...)
	}
	if len(again) != 3 {
		t.Fatalf("after the lock expired HTTP got %+v, want r-0001..r-0003", again)
	}
	for i, r := range again {
		if r.Body != values[i+1] || r.Deliveries != 2 {
			t.Errorf("redelivered %s at delivery %d, want %s at 2", r.Body, r.Deliveries, values[i+1])
		}
	}
	late := map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{0: {{FirstOffset: 1, LastOffset: 1, AcknowledgeTypes: []int8{1}}}}
	resp, _ = m.fetch([]int32{0}, late, 1)
	if code := ackCode(resp); code != kerr.InvalidRecordState.Code {
		t.Errorf("late ack of a record the HTTP side holds: %s, want INVALID_RECORD_STATE", errName(code))
	}
	st := qStats(t, b, queue)
	if st["inflight"].(float64) != 3 || st["available"].(float64) != 0 {
		t.Errorf("queue stats %v: want the 3 HTTP leases only", st)
	}
	// The group's view of the queue: the first message still in it and
	// the messages available or leased (by anyone).
	if got := shareQueueOffsets(t, b, group); got != "0:1/3" {
		t.Errorf("DescribeShareGroupOffsets of the queue: %s, want 0:1/3 (start offset 1, lag 3)", got)
	}
}

// shareQueueOffsets answers DescribeShareGroupOffsets of group as
// "partition:start/lag" per partition.
func shareQueueOffsets(t *testing.T, b *brokerProc, group string) string {
	t.Helper()
	return shareGroupOffsets(t, b.Addr(), group, "")
}

// shareGroupOffsets answers DescribeShareGroupOffsets of group as
// "partition:start/lag" per partition of topic ("": every topic), sorted.
func shareGroupOffsets(t *testing.T, addr, group, topic string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(testCtx(t, opTimeout), newClient(t, addr))
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
	}
	var out []string
	for _, rt := range resp.Groups[0].Topics {
		if topic != "" && rt.Topic != topic {
			continue
		}
		for _, p := range rt.Partitions {
			out = append(out, fmt.Sprintf("%d:%d/%d", p.Partition, p.StartOffset, p.Lag))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func ackCode(resp *kmsg.ShareFetchResponse) int16 {
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.AcknowledgeErrorCode != 0 {
				return p.AcknowledgeErrorCode
			}
		}
	}
	return 0
}

// TestShareQueueDelayPriority: Kafka acquisition follows the queue:
// highest priority first, a delayed message only once due.
func TestShareQueueDelayPriority(t *testing.T) {
	t.Parallel()
	b := shareBroker(t)
	queue := topicName(t, "")
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{"priority_levels": 3}, 201)
	qMust(t, b, "POST", "/v1/queues/"+queue+"/messages", map[string]any{"messages": []any{
		map[string]any{"body": "low"},
		map[string]any{"body": "delayed", "priority": 2, "delay_ms": 4000},
		map[string]any{"body": "high", "priority": 2},
		map[string]any{"body": "mid", "priority": 1},
	}}, 200)
	sent := time.Now()
	m := newRawShareMember(t, b.Addr(), "share."+queue, queue, "member-p-000000000001")
	// Each fetch accepts what the previous one acquired: nothing comes
	// back when its lock (3s) expires.
	var order []string
	var acks map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	for _, want := range []string{"high", "mid", "low"} {
		resp, got := m.fetch([]int32{0}, acks, 1)
		if code := ackCode(resp); code != 0 || len(got[0]) != 1 || !bytes.Contains(resp.Topics[0].Partitions[0].Records, []byte(want)) {
			t.Fatalf("fetch %d: %s %+v, want %s", len(order), errName(code), got, want)
		}
		off := got[0][0].FirstOffset
		order = append(order, fmt.Sprint(off))
		acks = map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{0: {{FirstOffset: off, LastOffset: off, AcknowledgeTypes: []int8{1}}}}
	}
	if fmt.Sprint(order) != "[2 3 0]" {
		t.Errorf("acquired offsets %v, want [2 3 0] (high, mid, low)", order)
	}
	resp, got := m.fetch([]int32{0}, acks, 1)
	if code := ackCode(resp); code != 0 || len(got[0]) != 0 && time.Since(sent) < 4*time.Second {
		t.Fatalf("acquired %+v (ack %s) before the delayed message was due", got, errName(code))
	}
	// The raw member does not heartbeat: it is fenced after 6s, so the
	// delay stays below that.
	for deadline := sent.Add(6 * time.Second); len(got[0]) == 0 && time.Now().Before(deadline); {
		_, got = m.fetch([]int32{0}, nil, 1)
	}
	if len(got[0]) != 1 || got[0][0].FirstOffset != 1 || time.Since(sent) < 4*time.Second {
		t.Errorf("the delayed message: acquired %+v after %v", got, time.Since(sent))
	}
}
