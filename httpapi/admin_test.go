package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// adminEnv is the admin routes over a real store, served over TCP.
type adminEnv struct {
	*eventsEnv
	gc *groups.Coordinator
}

func newAdminEnv(t *testing.T) *adminEnv {
	t.Helper()
	db, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tm, err := topics.Open(db, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := groups.Open(db, tm, groups.Config{Logger: zerolog.Nop(), OffsetsTopicPartitions: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := txns.Open(db, tm, txns.Config{Logger: zerolog.Nop()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	env := &adminEnv{eventsEnv: &eventsEnv{t: t, db: db, tm: tm}, gc: gc}
	env.srv, env.base = startServer(t, Config{Logger: zerolog.Nop()}, func(s *Server) {
		s.RegisterAdmin(AdminConfig{Topics: tm, Groups: gc, Txns: tc, Version: "test", Started: time.Now()})
	})
	return env
}

func (env *adminEnv) json(method, path string, body any, status int, out any) apiAnswer {
	env.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			env.t.Fatal(err)
		}
	}
	got := env.call(method, path, "application/json", raw)
	if got.status != status {
		env.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got.status, status, got.body)
	}
	if out != nil {
		got.decode(env.t, out)
	}
	return got
}

// produce appends one batch of values to topic/partition, timestamps from
// ts on, and returns its base offset.
func (env *adminEnv) produce(topic string, partition int32, ts int64, values ...string) int64 {
	env.t.Helper()
	tp, _ := env.tm.Topic(topic)
	p, _ := tp.Partition(partition)
	recs := make([]topics.Record, len(values))
	for i, v := range values {
		recs[i] = topics.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v),
			Headers: []topics.RecordHeader{{Key: "h", Value: []byte("x")}}}
	}
	batch, err := topics.EncodeBatch(topics.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: ts, MaxTimestamp: ts + int64(len(values)) - 1}, recs)
	if err != nil {
		env.t.Fatal(err)
	}
	a := &topics.Append{Partition: p, Batch: batch}
	if err := env.tm.Append([]*topics.Append{a}, time.Now()).Wait(); err != nil || a.Err != nil {
		env.t.Fatalf("append: %v %v", err, a.Err)
	}
	return a.BaseOffset
}

// TestAdminTopics: create, list with pages, describe, alter and delete a
// topic over HTTP, and the 4xx answers of bad requests.
func TestAdminTopics(t *testing.T) {
	env := newAdminEnv(t)
	var created TopicDetail
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "orders", "partitions": 3, "configs": map[string]string{"retention.ms": "60000"}}, 201, &created)
	if created.Partitions != 3 || len(created.PartitionList) != 3 {
		t.Fatalf("created %+v", created)
	}
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "payments"}, 201, nil)
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "dry", "validate_only": true}, 200, nil)
	if _, ok := env.tm.Topic("dry"); ok {
		t.Fatal("validate_only created the topic")
	}
	for _, c := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"name": "orders"}, 409, "topic_exists"},
		{map[string]any{"name": "bad/name"}, 400, "invalid_name"},
		{map[string]any{"name": ""}, 400, "invalid_name"},
		{map[string]any{"name": "x", "configs": map[string]string{"retention.ms": "soon"}}, 400, "invalid_config"},
		{map[string]any{"name": "x", "partitions": -5}, 400, "invalid_partitions"},
		{map[string]any{"name": "x", "partition": 3}, 400, "unknown_field"},
	} {
		if got := env.json("POST", "/v1/admin/topics", c.body, c.status, nil); got.code(t) != c.code {
			t.Errorf("create %v: code %s, want %s", c.body, got.code(t), c.code)
		}
	}

	// A body without a Content-Type could come from another site's page.
	if got := env.call("POST", "/v1/admin/topics", "", []byte(`{"name":"csrf"}`)); got.status != 415 || got.code(t) != "unsupported_media_type" {
		t.Errorf("create without a Content-Type: %d %s", got.status, got.body)
	}
	if got := env.call("POST", "/v1/admin/topics", "text/plain", []byte(`{"name":"csrf"}`)); got.status != 415 {
		t.Errorf("create as text/plain: %d %s", got.status, got.body)
	}
	if _, ok := env.tm.Topic("csrf"); ok {
		t.Fatal("a request without a JSON Content-Type created a topic")
	}

	// Pages of one, internal topics left out by default.
	var page struct {
		Topics []TopicSummary `json:"topics"`
		Next   string         `json:"next"`
	}
	env.json("GET", "/v1/admin/topics?limit=1", nil, 200, &page)
	if len(page.Topics) != 1 || page.Topics[0].Name != "orders" || page.Next != "orders" {
		t.Fatalf("first page %+v", page)
	}
	page.Next = ""
	env.json("GET", "/v1/admin/topics?limit=1&after=orders", nil, 200, &page)
	if len(page.Topics) != 1 || page.Topics[0].Name != "payments" || page.Next != "" {
		t.Fatalf("second page %+v", page)
	}
	if got := env.json("GET", "/v1/admin/topics?limit=0", nil, 400, nil); got.code(t) != "out_of_range" {
		t.Errorf("limit=0: %s", got.body)
	}
	env.json("GET", "/v1/admin/topics?internal=true", nil, 200, &page)
	if len(page.Topics) != 3 || page.Topics[0].Name != "__consumer_offsets" {
		t.Errorf("with internal topics: %+v", page.Topics)
	}

	// Alter: set one config, return another to its default.
	var d TopicDetail
	env.json("PATCH", "/v1/admin/topics/orders/configs", map[string]any{"set": map[string]string{"cleanup.policy": "compact"}, "delete": []string{"retention.ms"}}, 200, &d)
	tp, _ := env.tm.Topic("orders")
	if tp.Config("cleanup.policy") != "compact" || tp.Configs()["retention.ms"] != "" {
		t.Errorf("configs after alter: %v", tp.Configs())
	}
	if got := env.json("PATCH", "/v1/admin/topics/orders/configs", map[string]any{"set": map[string]string{"no.such.config": "1"}}, 400, nil); got.code(t) != "invalid_config" {
		t.Errorf("unknown config: %s", got.body)
	}
	if got := env.json("PATCH", "/v1/admin/topics/orders/configs", map[string]any{}, 400, nil); got.code(t) != "invalid_body" {
		t.Errorf("empty alter: %s", got.body)
	}
	if got := env.json("PATCH", "/v1/admin/topics/nope/configs", map[string]any{"delete": []string{"retention.ms"}}, 404, nil); got.code(t) != "topic_not_found" {
		t.Errorf("alter of a missing topic: %s", got.body)
	}

	// Delete.
	env.json("DELETE", "/v1/admin/topics/payments", nil, 204, nil)
	if _, ok := env.tm.Topic("payments"); ok {
		t.Fatal("payments still exists")
	}
	if got := env.json("GET", "/v1/admin/topics/payments", nil, 404, nil); got.code(t) != "topic_not_found" {
		t.Errorf("describe after delete: %s", got.body)
	}
	if got := env.json("DELETE", "/v1/admin/topics/__consumer_offsets", nil, 409, nil); got.code(t) != "topic_owned" {
		t.Errorf("delete of an internal topic: %s", got.body)
	}
}

// TestAdminBrowseRecords: a page starts at the asked offset inside a
// batch, stops at the limit and says where the next one starts; a page
// by timestamp starts at the first record at or after it; reads at the
// end are empty (the follow poll); bad parameters are 4xx.
func TestAdminBrowseRecords(t *testing.T) {
	env := newAdminEnv(t)
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "logs", "partitions": 1}, 201, nil)
	env.produce("logs", 0, 1000, "a", "b", "c")         // offsets 0-2, times 1000-1002
	env.produce("logs", 0, 2000, `{"j":1}`, "\x00\xff") // offsets 3-4, times 2000-2001

	var p RecordsPage
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records?offset=1&limit=3", nil, 200, &p)
	if len(p.Records) != 3 || p.Records[0].Offset != 1 || p.Records[2].Offset != 3 || p.NextOffset != 4 || p.HighWatermark != 5 {
		t.Fatalf("page from 1: %+v", p)
	}
	if string(p.Records[0].Value) != "b" || string(p.Records[0].Key) != "k1" || p.Records[0].TimestampMs != 1001 ||
		len(p.Records[0].Headers) != 1 || string(p.Records[0].Headers[0].Value) != "x" {
		t.Errorf("record 1: %+v", p.Records[0])
	}
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records?offset=4", nil, 200, &p)
	if len(p.Records) != 1 || string(p.Records[0].Value) != "\x00\xff" || p.NextOffset != 5 {
		t.Errorf("page from 4: %+v", p)
	}
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records?timestamp=1500", nil, 200, &p)
	if len(p.Records) != 2 || p.Records[0].Offset != 3 {
		t.Errorf("page from time 1500: %+v", p)
	}
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records", nil, 200, &p)
	if len(p.Records) != 5 || p.Records[0].Offset != 0 {
		t.Errorf("page from the start: %+v", p)
	}
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records?offset=5", nil, 200, &p)
	if len(p.Records) != 0 || p.NextOffset != 5 {
		t.Errorf("page at the end: %+v", p)
	}
	env.json("GET", "/v1/admin/topics/logs/partitions/0/records?timestamp=9999", nil, 200, &p)
	if len(p.Records) != 0 || p.NextOffset != 5 {
		t.Errorf("page after the last time: %+v", p)
	}
	for _, c := range []struct {
		query  string
		status int
		code   string
	}{
		{"/0/records?offset=6", 400, "out_of_range"},
		{"/0/records?offset=-1", 400, "out_of_range"},
		{"/0/records?offset=x", 400, "out_of_range"},
		{"/0/records?limit=501", 400, "out_of_range"},
		{"/0/records?offset=1&timestamp=1", 400, "conflicting_fields"},
		{"/1/records", 404, "topic_not_found"},
		{"/x/records", 404, "topic_not_found"},
	} {
		if got := env.json("GET", "/v1/admin/topics/logs/partitions"+c.query, nil, c.status, nil); got.code(t) != c.code {
			t.Errorf("%s: %s", c.query, got.body)
		}
	}
}

// TestAdminGroupsResetOffsets: lag per partition, a dry run that changes
// nothing, an executed reset that moves the committed offsets, and the
// CLI's parameter rules.
func TestAdminGroupsResetOffsets(t *testing.T) {
	env := newAdminEnv(t)
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "events", "partitions": 2}, 201, nil)
	env.produce("events", 0, 1000, "a", "b", "c", "d")
	env.produce("events", 1, 1000, "e", "f")
	res := env.gc.Commit(groups.CommitRequest{Group: "billing", Generation: -1, Version: 8, Topics: []groups.CommitTopic{{Topic: "events", Partitions: []groups.CommitPartition{
		{Partition: 0, Offset: 3, LeaderEpoch: -1}, {Partition: 1, Offset: 2, LeaderEpoch: -1}}}}}, time.Now()).Wait(nil)
	for _, e := range res.Topics[0] {
		if e != nil {
			t.Fatal(e)
		}
	}

	var g GroupDetail
	env.json("GET", "/v1/admin/groups/billing", nil, 200, &g)
	if g.Lag != 1 || len(g.Offsets) != 2 || g.Offsets[0].Lag != 1 || g.Offsets[0].HighWatermark != 4 || g.Offsets[1].Lag != 0 {
		t.Fatalf("group: %+v", g)
	}
	var list struct {
		Groups []GroupSummary `json:"groups"`
	}
	env.json("GET", "/v1/admin/groups", nil, 200, &list)
	if len(list.Groups) != 1 || list.Groups[0].Lag != 1 {
		t.Fatalf("groups: %+v", list)
	}
	if got := env.json("GET", "/v1/admin/groups/nobody", nil, 404, nil); got.code(t) != "group_not_found" {
		t.Errorf("missing group: %s", got.body)
	}

	committed := func() map[int32]int64 {
		out := map[int32]int64{}
		for _, tp := range env.gc.FetchOffsets(groups.FetchOffsetsRequest{Group: "billing"}).Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p.Offset
			}
		}
		return out
	}
	var r struct {
		Executed bool          `json:"executed"`
		Offsets  []ResetOffset `json:"offsets"`
	}
	env.json("POST", "/v1/admin/groups/billing/reset-offsets", map[string]any{"all_topics": true, "to_earliest": true}, 200, &r)
	if r.Executed || len(r.Offsets) != 2 || r.Offsets[0].Current != 3 || r.Offsets[0].New != 0 {
		t.Fatalf("dry run: %+v", r)
	}
	if c := committed(); c[0] != 3 || c[1] != 2 {
		t.Fatalf("the dry run changed the offsets: %v", c)
	}
	env.json("POST", "/v1/admin/groups/billing/reset-offsets", map[string]any{"topics": []string{"events:0"}, "to_offset": 99, "execute": true}, 200, &r)
	if !r.Executed || len(r.Offsets) != 1 || r.Offsets[0].New != 4 {
		t.Fatalf("reset to 99 (clamped to the end 4): %+v", r)
	}
	if c := committed(); c[0] != 4 || c[1] != 2 {
		t.Fatalf("after the reset: %v", c)
	}
	env.json("POST", "/v1/admin/groups/billing/reset-offsets", map[string]any{"topics": []string{"events"}, "to_datetime": "1970-01-01T00:00:01.001Z", "execute": true}, 200, &r)
	if c := committed(); c[0] != 1 || c[1] != 1 {
		t.Fatalf("after the reset to a time: %v", c)
	}

	for _, c := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"all_topics": true}, 400, "conflicting_fields"},
		{map[string]any{"all_topics": true, "to_earliest": true, "to_latest": true}, 400, "conflicting_fields"},
		{map[string]any{"to_earliest": true}, 400, "conflicting_fields"},
		{map[string]any{"topics": []string{"events"}, "all_topics": true, "to_earliest": true}, 400, "conflicting_fields"},
		{map[string]any{"topics": []string{"events:x"}, "to_earliest": true}, 400, "invalid_body"},
		{map[string]any{"topics": []string{"events"}, "to_datetime": "yesterday"}, 400, "invalid_body"},
		{map[string]any{"topics": []string{"events"}, "to_offset": -1}, 400, "out_of_range"},
		{map[string]any{"topics": []string{"nope"}, "to_earliest": true}, 404, "topic_not_found"},
		{map[string]any{"topics": []string{"events:7"}, "to_earliest": true}, 404, "topic_not_found"},
		{map[string]any{"topics": []string{"events"}, "to_earliest": true, "force": true}, 400, "unknown_field"},
	} {
		if got := env.json("POST", "/v1/admin/groups/billing/reset-offsets", c.body, c.status, nil); got.code(t) != c.code {
			t.Errorf("%v: %s", c.body, got.body)
		}
	}
}

// TestAdminOverviewAndTransactions: the overview's counters follow the
// logs and the groups' lag; the transaction list answers.
func TestAdminOverviewAndTransactions(t *testing.T) {
	env := newAdminEnv(t)
	env.json("POST", "/v1/admin/topics", map[string]any{"name": "t", "partitions": 1}, 201, nil)
	var o Overview
	env.json("GET", "/v1/admin/overview", nil, 200, &o)
	if o.OffsetsTotal != 0 || o.Version != "test" || o.ClusterID == "" {
		t.Fatalf("overview: %+v", o)
	}
	env.produce("t", 0, 1, "a", "b", "c")
	env.json("GET", "/v1/admin/overview", nil, 200, &o)
	if o.OffsetsTotal != 3 || o.Records < 3 {
		t.Fatalf("overview after 3 records: %+v", o)
	}
	var txs struct {
		Transactions []TransactionInfo `json:"transactions"`
	}
	env.json("GET", "/v1/admin/transactions?state=Ongoing", nil, 200, &txs)
	if len(txs.Transactions) != 0 {
		t.Fatalf("transactions: %+v", txs)
	}
	if got := env.call(http.MethodGet, "/v1/admin/transactions?limit=5000", "", nil); got.status != 400 {
		t.Errorf("limit 5000: %d %s", got.status, got.body)
	}
}
