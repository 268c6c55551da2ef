package compattests

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDiskFreeMinRefusesNewData pins the fix for a broker that crashed
// when its disk filled up (Pebble panics on a failed WAL write): with a
// disk-free-min larger than the free space of the data directory's
// filesystem the broker starts in the low state and refuses new data
// (Kafka Produce KAFKA_STORAGE_ERROR with a message from v8, franz-go
// retries it and finally reports it; HTTP queue sends and event appends
// 507 storage_full) without storing any of it, while reads, receives,
// acks, offset commits, DeleteRecords and the /metrics gauge keep working.
// Restarted with an ordinary limit it accepts writes again, and nothing
// refused was stored.
func TestDiskFreeMinRefusesNewData(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--disk-free-min", "1MiB"))
	ctx := testCtx(t, 2*time.Minute)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "disk")
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b.Addr())
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	qMust(t, b, "PUT", "/v1/queues/dq", map[string]any{}, 201)
	qSend(t, b, "dq", "m1", "m2")
	esMust(t, b, "POST", "/v1/stores/ds/streams/s/events", esAppendBody("no_stream", map[string]any{"type": "T", "data": map[string]any{"n": 1}}), 201)

	// Restart with a limit far above what the filesystem has free.
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.DataDir(), &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // Bsize is uint32 on Darwin
	limit := 2*free + 1<<30
	b.args = []string{"--disk-free-min", strconv.FormatInt(limit, 10)}
	b.Restart()
	if log := b.logSinceStart(); !strings.Contains(log, "below disk-free-min") {
		t.Fatalf("the broker did not log that it refuses new data:\n%s", log)
	}

	// Kafka: raw Produce v9 (message) and v7 (none).
	rc := dialRaw(t, b.Addr())
	batch := rawBatch(-1, -1, -1, time.Now().UnixMilli(), valueRecords("refused"))
	p := rc.produceRaw(9, topic, 0, batch)
	if p.ErrorCode != kerr.KafkaStorageError.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "disk-free-min") || !strings.Contains(*p.ErrorMessage, " free") {
		t.Fatalf("Produce v9 while low: %s %v, want KAFKA_STORAGE_ERROR with the free space and the limit", errName(p.ErrorCode), p.ErrorMessage)
	}
	p = rc.produceRaw(7, topic, 0, rawBatch(-1, -1, -1, time.Now().UnixMilli(), valueRecords("refused")))
	if p.ErrorCode != kerr.KafkaStorageError.Code || p.ErrorMessage != nil {
		t.Fatalf("Produce v7 while low: %s %v", errName(p.ErrorCode), p.ErrorMessage)
	}
	// franz-go retries the retriable code, then gives up with it.
	retrying := newClient(t, b.Addr(), kgo.RecordRetries(2))
	err := retrying.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("kgo produce while low: %v, want KAFKA_STORAGE_ERROR", err)
	}
	// Reads and offset commits work; DeleteRecords too.
	ends := endOffsets(t, adm, topic)
	if ends[0] != 3 {
		t.Fatalf("end offset %d while low, want 3 (nothing refused was stored)", ends[0])
	}
	if got := values(readPartitions(t, b.Addr(), topic, ends)[0]); got != `0:"a" 1:"b" 2:"c"` {
		t.Fatalf("read while low: %s", got)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "disk-group", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("offset commit while low: %v %v", err, resp.Error())
	}
	if fetched, err := adm.FetchOffsets(ctx, "disk-group"); err != nil || fetched[topic][0].At != 2 {
		t.Fatalf("committed offset while low: %+v %v", fetched, err)
	}
	toDelete := kadm.Offsets{}
	toDelete.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1})
	if resp, err := adm.DeleteRecords(ctx, toDelete); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords while low: %v %v", err, resp.Error())
	}

	// HTTP: sends and appends refused with 507 storage_full; receive and
	// ack work, stream reads work.
	r := qCall(t, b, "POST", "/v1/queues/dq/messages", map[string]any{"messages": []any{map[string]any{"body": "refused"}}})
	if r.Status != 507 || r.Body["code"] != "storage_full" || !strings.Contains(r.Raw, "disk-free-min") {
		t.Fatalf("queue send while low: %d %s", r.Status, r.Raw)
	}
	ar := esMust(t, b, "POST", "/v1/stores/ds/streams/s/events", esAppendBody(0, map[string]any{"type": "T", "data": map[string]any{"n": 2}}), 507)
	if ar.Body["code"] != "storage_full" {
		t.Fatalf("event append while low: %s", ar.Raw)
	}
	msgs := qReceive(t, b, "dq", 10, 0, 0)
	if len(msgs) != 2 {
		t.Fatalf("receive while low: %+v", msgs)
	}
	if r := qMust(t, b, "POST", "/v1/queues/dq/ack", map[string]any{"receipts": []string{msgs[0].Receipt}}, 200); !strings.Contains(r.Raw, `"acked"`) {
		t.Fatalf("ack while low: %s", r.Raw)
	}
	if all := esReadAll(t, b, "ds"); len(all) != 1 {
		t.Fatalf("store read while low: %+v", all)
	}
	metrics := httpGet(t, "http://"+b.HTTPAddr()+"/metrics")
	for _, want := range []string{"broker_disk_low 1", "broker_disk_free_min_bytes " + strconv.FormatFloat(float64(limit), 'g', -1, 64), "broker_disk_free_bytes "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// An ordinary limit again: writes work, and nothing refused was stored.
	b.args = []string{"--disk-free-min", "1MiB"}
	b.Restart()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("d")}).FirstErr(); err != nil {
		t.Fatalf("produce after the restart: %v", err)
	}
	ends = endOffsets(t, adm, topic)
	if got := values(readPartitions(t, b.Addr(), topic, ends)[0]); got != `1:"b" 2:"c" 3:"d"` {
		t.Fatalf("log after the restart: %s, want b,c,d (a deleted, nothing refused stored)", got)
	}
	qSend(t, b, "dq", "m3")
	// m2 is still leased (the lease survived the restarts), m3 is new.
	if s := qStats(t, b, "dq"); s["available"] != float64(1) || s["inflight"] != float64(1) {
		t.Fatalf("queue after the restart: %v", s)
	}
	esMust(t, b, "POST", "/v1/stores/ds/streams/s/events", esAppendBody(0, map[string]any{"type": "T", "data": map[string]any{"n": 2}}), 201)
	if !strings.Contains(httpGet(t, "http://"+b.HTTPAddr()+"/metrics"), "broker_disk_low 0") {
		t.Error("/metrics: broker_disk_low is not 0 after the restart")
	}
}
