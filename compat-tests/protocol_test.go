package compattests

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsValidation: CreateTopics rejects bad names, partition
// counts, replication factors and configs per topic, honours validateOnly
// and the broker default for -1 partitions (--default-partitions).
func TestCreateTopicsValidation(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--default-partitions", "3"))
	vs := apiVersions(t, b.Addr())
	cv := pickVersion(t, vs, kmsg.CreateTopics, 7, 4)
	c := dialRaw(t, b.Addr())

	create := func(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = cv
		req.TimeoutMillis = 30000
		req.ValidateOnly = validateOnly
		req.Topics = topics
		return c.roundTrip(req).(*kmsg.CreateTopicsResponse)
	}
	topic := func(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = partitions
		rt.ReplicationFactor = rf
		for i := 0; i+1 < len(configs); i += 2 {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name = configs[i]
			rc.Value = kmsg.StringPtr(configs[i+1])
			rt.Configs = append(rt.Configs, rc)
		}
		return rt
	}
	one := func(what string, resp *kmsg.CreateTopicsResponse, want int16) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		if len(resp.Topics) != 1 {
			t.Fatalf("%s: %d topics in response, want 1", what, len(resp.Topics))
		}
		if got := resp.Topics[0].ErrorCode; got != want {
			msg := ""
			if m := resp.Topics[0].ErrorMessage; m != nil {
				msg = " (" + *m + ")"
			}
			t.Errorf("%s: %s%s, want %s", what, errName(got), msg, errName(want))
		}
		return resp.Topics[0]
	}
	exists := func(name string) bool {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = pickVersion(t, vs, kmsg.Metadata, 12, 4)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = false
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
	}

	base := topicName(t, "")
	for _, bad := range []struct {
		what string
		rt   kmsg.CreateTopicsRequestTopic
		want int16
	}{
		{"empty name", topic("", 1, 1), kerr.InvalidTopicException.Code},
		{"name '.'", topic(".", 1, 1), kerr.InvalidTopicException.Code},
		{"name '..'", topic("..", 1, 1), kerr.InvalidTopicException.Code},
		{"name with '/'", topic(base+"/x", 1, 1), kerr.InvalidTopicException.Code},
		{"name with space", topic(base+" x", 1, 1), kerr.InvalidTopicException.Code},
		{"name of 250 chars", topic(strings.Repeat("a", 250), 1, 1), kerr.InvalidTopicException.Code},
		{"0 partitions", topic(base+".p0", 0, 1), kerr.InvalidPartitions.Code},
		{"-2 partitions", topic(base+".pm2", -2, 1), kerr.InvalidPartitions.Code},
		{"replication factor 3 on one broker", topic(base+".rf3", 1, 3), kerr.InvalidReplicationFactor.Code},
		{"replication factor 0", topic(base+".rf0", 1, 0), kerr.InvalidReplicationFactor.Code},
		{"retention.ms=abc", topic(base+".cfg1", 1, 1, "retention.ms", "abc"), kerr.InvalidConfig.Code},
		{"unknown config key", topic(base+".cfg2", 1, 1, "no.such.config", "1"), kerr.InvalidConfig.Code},
		{"cleanup.policy=bogus", topic(base+".cfg3", 1, 1, "cleanup.policy", "bogus"), kerr.InvalidConfig.Code},
	} {
		one(bad.what, create(false, bad.rt), bad.want)
		if bad.rt.Topic != "" && bad.rt.Topic != "." && bad.rt.Topic != ".." && exists(bad.rt.Topic) {
			t.Errorf("%s: topic %q was created anyway", bad.what, bad.rt.Topic)
		}
	}

	// A 249-character name is the longest legal one.
	long := (base + strings.Repeat("x", 249))[:249]
	one("name of 249 chars", create(false, topic(long, 1, 1)), 0)

	// validateOnly checks and creates nothing.
	vo := base + ".validate-only"
	one("validateOnly", create(true, topic(vo, 2, 1)), 0)
	if exists(vo) {
		t.Errorf("validateOnly created %s", vo)
	}
	one("validateOnly with a bad config", create(true, topic(vo, 2, 1, "retention.ms", "abc")), kerr.InvalidConfig.Code)

	// -1 partitions and replication factor mean the broker defaults.
	def := base + ".defaults"
	rt := one("-1 partitions, -1 replication factor", create(false, topic(def, -1, -1)), 0)
	if rt.NumPartitions != 3 || rt.ReplicationFactor != 1 {
		t.Errorf("defaults: response says %d partitions, replication factor %d; want 3 (--default-partitions) and 1", rt.NumPartitions, rt.ReplicationFactor)
	}
	ends := endOffsets(t, newAdmin(t, b.Addr()), def)
	if len(ends) != 3 {
		t.Errorf("defaults: topic has %d partitions, want 3", len(ends))
	}

	// The same name twice in one request is INVALID_REQUEST, nothing created.
	dup := base + ".dup"
	resp := create(false, topic(dup, 1, 1), topic(dup, 2, 1))
	if len(resp.Topics) == 0 {
		t.Errorf("duplicate names: empty response")
	}
	for _, st := range resp.Topics {
		if st.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("duplicate names in one request: %s for %s, want INVALID_REQUEST", errName(st.ErrorCode), st.Topic)
		}
	}
	if exists(dup) {
		t.Errorf("duplicate names in one request: %s was created", dup)
	}

	// Metadata auto-creates (allowed by default) with the default partition
	// count, only when the request allows it and the name is legal.
	auto := base + ".auto"
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = pickVersion(t, vs, kmsg.Metadata, 12, 4)
	mreq.AllowAutoTopicCreation = false
	for _, name := range []string{auto, base + "/bad"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, rt)
	}
	c.roundTrip(mreq)
	if exists(auto) {
		t.Errorf("Metadata with AllowAutoTopicCreation=false created %s", auto)
	}
	mreq.AllowAutoTopicCreation = true
	mresp := c.roundTrip(mreq).(*kmsg.MetadataResponse)
	for _, mt := range mresp.Topics {
		if deref(mt.Topic) == base+"/bad" && mt.ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("Metadata auto-create of an illegal name: %s, want INVALID_TOPIC_EXCEPTION", errName(mt.ErrorCode))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !exists(auto) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(endOffsets(t, newAdmin(t, b.Addr()), auto)); n != 3 {
		t.Errorf("auto-created %s has %d partitions, want 3 (--default-partitions)", auto, n)
	}

	// Names differing only in '.' versus '_' collide (Kafka metric names).
	dotted := base + ".col.a"
	one("create "+dotted, create(false, topic(dotted, 1, 1)), 0)
	one("colliding name", create(false, topic(strings.ReplaceAll(dotted, ".", "_"), 1, 1)), kerr.InvalidTopicException.Code)
}

// TestProduceValidation: a bad batch or a bad target is a per-partition
// error code in the Produce response, the connection stays open and nothing
// is appended (STYLE rule 2).
func TestProduceValidation(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	small := topicName(t, "small")
	createTopic(t, adm, topic, 1, nil)
	maxBytes := "1000"
	createTopic(t, adm, small, 1, map[string]*string{"max.message.bytes": &maxBytes})
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	c := dialRaw(t, b.Addr())
	ts := time.Now().UnixMilli()
	good := func(v string) []byte { return rawBatch(-1, -1, -1, ts, valueRecords(v)) }

	if p := c.produceRaw(pv, topic, 0, good("ok-0")); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}

	badCRC := good("bad-crc")
	badCRC[len(badCRC)-1] ^= 0xff
	lastDelta := good("bad-delta")
	binary.BigEndian.PutUint32(lastDelta[23:27], 5) // LastOffsetDelta 5 with 1 record
	binary.BigEndian.PutUint32(lastDelta[17:21], crcOf(lastDelta))
	control := good("control")
	binary.BigEndian.PutUint16(control[21:23], 0x20) // control bit
	binary.BigEndian.PutUint32(control[17:21], crcOf(control))
	codec7 := good("codec7")
	binary.BigEndian.PutUint16(codec7[21:23], 0x07)
	binary.BigEndian.PutUint32(codec7[17:21], crcOf(codec7))
	magic1 := good("magic1")
	magic1[16] = 1
	truncated := good("truncated")
	truncated = truncated[:len(truncated)-3]

	for _, c2 := range []struct {
		what  string
		topic string
		part  int32
		batch []byte
		want  []int16 // any of these; nil = any error
	}{
		{"CRC mismatch", topic, 0, badCRC, []int16{kerr.CorruptMessage.Code}},
		{"LastOffsetDelta disagrees with record count", topic, 0, lastDelta, []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
		{"control batch from a client", topic, 0, control, []int16{kerr.InvalidRecord.Code, kerr.CorruptMessage.Code}},
		{"compression codec 7", topic, 0, codec7, []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code, kerr.UnsupportedCompressionType.Code}},
		{"magic 1 in a v3+ Produce", topic, 0, magic1, []int16{kerr.InvalidRecord.Code, kerr.CorruptMessage.Code, kerr.UnsupportedForMessageFormat.Code}},
		{"batch shorter than its length field", topic, 0, truncated, []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
		{"partition 99", topic, 99, good("p99"), []int16{kerr.UnknownTopicOrPartition.Code}},
		{"partition -1", topic, -1, good("pm1"), []int16{kerr.UnknownTopicOrPartition.Code}},
		{"batch over max.message.bytes", small, 0, rawBatch(-1, -1, -1, ts, []rawRecord{{value: make([]byte, 2000)}}), []int16{kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code}},
	} {
		p := c.produceRaw(pv, c2.topic, c2.part, c2.batch)
		ok := p.ErrorCode != 0
		if c2.want != nil {
			ok = false
			for _, w := range c2.want {
				ok = ok || p.ErrorCode == w
			}
		}
		if !ok {
			var names []string
			for _, w := range c2.want {
				names = append(names, errName(w))
			}
			t.Errorf("%s: %s at offset %d; want %s", c2.what, errName(p.ErrorCode), p.BaseOffset, strings.Join(names, " or "))
		}
	}

	// acks other than -1, 0, 1 are INVALID_REQUIRED_ACKS.
	req := kmsg.NewPtrProduceRequest()
	req.Version = pv
	req.Acks = 2
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = good("acks2")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Errorf("acks=2: response %+v; want INVALID_REQUIRED_ACKS", resp.Topics)
	}

	// acks=1 works like acks=-1 on one broker.
	req.Acks = 1
	rp.Records = good("acks1")
	req.Topics[0].Partitions[0] = rp
	resp = c.roundTrip(req).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Errorf("acks=1: %s at %d, want NONE at 1", errName(p.ErrorCode), p.BaseOffset)
	}

	// Only the two good batches are in the log, and the connection still works.
	if p := c.produceRaw(pv, topic, 0, good("ok-2")); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Errorf("good batch after the bad ones: %s at %d, want offset 2", errName(p.ErrorCode), p.BaseOffset)
	}
	ends := endOffsets(t, adm, topic)
	rs := readPartitions(t, b.Addr(), topic, ends)[0]
	if values(rs) != `0:"ok-0" 1:"acks1" 2:"ok-2"` {
		t.Errorf("log holds %s; want only the three good batches", values(rs))
	}
	if e := endOffsets(t, adm, small); e[0] != 0 {
		t.Errorf("%s: end offset %d after an oversized batch, want 0", small, e[0])
	}
}

func crcOf(batch []byte) uint32 {
	return crcChecksum(batch[21:])
}

// parseBatches splits raw fetched bytes into complete batches; a trailing
// partial batch is allowed (Kafka may send one) and ignored.
func parseBatches(t testing.TB, raw []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(raw) >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
		if size < 12+49 || size > len(raw) {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw[:size]); err != nil {
			t.Fatalf("fetched batch does not parse: %v", err)
		}
		if uint32(rb.CRC) != crcChecksum(raw[21:size]) {
			t.Fatalf("fetched batch at %d has a bad CRC", rb.FirstOffset)
		}
		out = append(out, rb)
		raw = raw[size:]
	}
	return out
}

// TestFetchEdgeCases: Fetch in the middle of a batch returns that whole
// batch, a first batch larger than every byte limit is still returned whole
// (KIP-74), fetching at the high watermark is empty, past it is
// OFFSET_OUT_OF_RANGE, unknown partitions and topic IDs are reported per
// partition, and v13+ fetches by topic ID.
func TestFetchEdgeCases(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	c := dialRaw(t, b.Addr())
	ts := time.Now().UnixMilli()
	for i := 0; i < 3; i++ {
		var vals []string
		for j := 0; j < 5; j++ {
			vals = append(vals, fmt.Sprintf("b%d-r%d-%s", i, j, strings.Repeat("x", 200)))
		}
		if p := c.produceRaw(pv, topic, 0, rawBatch(-1, -1, -1, ts, valueRecords(vals...))); p.ErrorCode != 0 || p.BaseOffset != int64(5*i) {
			t.Fatalf("batch %d: %s at %d", i, errName(p.ErrorCode), p.BaseOffset)
		}
	}

	// Topic ID from Metadata, for v13+.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = pickVersion(t, vs, kmsg.Metadata, 12, 10)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp := c.roundTrip(mreq).(*kmsg.MetadataResponse)
	topicID := mresp.Topics[0].TopicID

	fetch := func(version int16, name string, id [16]byte, partition int32, offset int64, partMax, reqMax int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		req.ReplicaID = -1
		req.MaxWaitMillis = 10
		req.MinBytes = 0
		req.MaxBytes = reqMax
		req.SessionEpoch = -1 // no session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		rt.TopicID = id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = partMax
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("Fetch v%d: top-level error %s", version, errName(resp.ErrorCode))
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("Fetch v%d: want one topic with one partition, got %+v", version, resp.Topics)
		}
		return resp.Topics[0].Partitions[0]
	}

	// A full fetch naming no partitions has nothing to wait for: Kafka
	// answers it at once (KafkaApis.handleFetchRequest, "interesting" is
	// empty), whatever MaxWaitMillis says.
	{
		req := kmsg.NewPtrFetchRequest()
		req.Version = pickVersion(t, vs, kmsg.Fetch, 12, 4)
		req.ReplicaID = -1
		req.MaxWaitMillis = 600000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		empty := dialRaw(t, b.Addr())
		corr := empty.send(req)
		_ = empty.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(empty.conn, size[:]); err != nil {
			t.Errorf("Fetch v%d with no partitions and MaxWaitMillis 600000: no answer within 10 s (%v); want an immediate empty response", req.Version, err)
		} else {
			body := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(empty.conn, body); err != nil {
				t.Fatalf("read: %v", err)
			}
			resp := req.ResponseKind()
			resp.SetVersion(req.Version)
			decodeResponse(t, corr, body, resp)
		}
	}

	for _, v := range []int16{4, 11, 12, vs[int16(kmsg.Fetch)][1]} {
		if v > vs[int16(kmsg.Fetch)][1] || v < vs[int16(kmsg.Fetch)][0] {
			continue
		}
		var zero [16]byte
		name, id := topic, zero
		if v >= 13 {
			name, id = "", topicID
		}
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			p := fetch(v, name, id, 0, 7, 1<<20, 1<<20)
			if p.ErrorCode != 0 || p.HighWatermark != 15 {
				t.Fatalf("fetch at 7: %s hwm %d; want NONE hwm 15", errName(p.ErrorCode), p.HighWatermark)
			}
			if v >= 5 && p.LogStartOffset != 0 {
				t.Errorf("fetch at 7: log start offset %d, want 0", p.LogStartOffset)
			}
			bs := parseBatches(t, p.RecordBatches)
			if len(bs) == 0 || bs[0].FirstOffset != 5 {
				t.Fatalf("fetch at offset 7: first batch starts at %v; want the whole batch 5-9", firstOffsets(bs))
			}
			if len(bs) != 2 || bs[1].FirstOffset != 10 {
				t.Errorf("fetch at 7 with room: batches %v, want [5 10]", firstOffsets(bs))
			}

			// KIP-74: limits far below the first batch still return it whole.
			p = fetch(v, name, id, 0, 0, 10, 10)
			bs = parseBatches(t, p.RecordBatches)
			if p.ErrorCode != 0 || len(bs) == 0 || bs[0].FirstOffset != 0 || bs[0].NumRecords != 5 {
				t.Errorf("fetch with 10-byte limits: %s, batches %v (%d bytes); want the whole first batch", errName(p.ErrorCode), firstOffsets(bs), len(p.RecordBatches))
			}

			p = fetch(v, name, id, 0, 15, 1<<20, 1<<20)
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 15 {
				t.Errorf("fetch at the high watermark: %s, %d bytes; want NONE and no records", errName(p.ErrorCode), len(p.RecordBatches))
			}
			p = fetch(v, name, id, 0, 16, 1<<20, 1<<20)
			if p.ErrorCode != kerr.OffsetOutOfRange.Code {
				t.Errorf("fetch past the high watermark: %s, want OFFSET_OUT_OF_RANGE", errName(p.ErrorCode))
			}
			p = fetch(v, name, id, 0, -5, 1<<20, 1<<20)
			if p.ErrorCode != kerr.OffsetOutOfRange.Code {
				t.Errorf("fetch at offset -5: %s, want OFFSET_OUT_OF_RANGE", errName(p.ErrorCode))
			}
			p = fetch(v, name, id, 7, 0, 1<<20, 1<<20)
			if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("fetch of partition 7: %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(p.ErrorCode))
			}
			if v >= 13 {
				p = fetch(v, "", [16]byte{1, 2, 3}, 0, 0, 1<<20, 1<<20)
				if p.ErrorCode != kerr.UnknownTopicID.Code {
					t.Errorf("fetch of an unknown topic ID: %s, want UNKNOWN_TOPIC_ID", errName(p.ErrorCode))
				}
			} else {
				p = fetch(v, topic+".missing", zero, 0, 0, 1<<20, 1<<20)
				if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("fetch of an unknown topic: %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(p.ErrorCode))
				}
			}
		})
	}
}

func firstOffsets(bs []kmsg.RecordBatch) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.FirstOffset)
	}
	return out
}

// TestPipelinedRequestsInOrder: many requests written at once on one
// connection (more than the broker's in-flight limit) are answered in
// request order, acks=0 produces get no response, and produces are appended
// in request order, as Kafka processes a connection's requests one by one.
func TestPipelinedRequestsInOrder(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	mv := pickVersion(t, vs, kmsg.Metadata, 12, 1)
	lv := pickVersion(t, vs, kmsg.ListOffsets, 8, 1)
	fv := pickVersion(t, vs, kmsg.Fetch, 12, 4)
	c := dialRaw(t, b.Addr())
	ts := time.Now().UnixMilli()

	type sent struct {
		corr    int32
		req     kmsg.Request
		produce int // index of the record for a Produce, else -1
	}
	var all []sent
	var wire []byte
	produced := 0
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("compat-pipeline"))
	const n = 300
	for i := 0; i < n; i++ {
		var req kmsg.Request
		idx := -1
		switch i % 6 {
		case 0, 3:
			p := kmsg.NewPtrProduceRequest()
			p.Version = pv
			p.Acks = -1
			if i%12 == 3 {
				p.Acks = 0
			}
			p.TimeoutMillis = 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = rawBatch(-1, -1, -1, ts, valueRecords(fmt.Sprintf("pipe-%d", produced)))
			rt.Partitions = append(rt.Partitions, rp)
			p.Topics = append(p.Topics, rt)
			req, idx = p, produced
			produced++
		case 1:
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 0
			req = r
		case 2:
			r := kmsg.NewPtrMetadataRequest()
			r.Version = mv
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			r.Topics = append(r.Topics, rt)
			req = r
		case 4:
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = lv
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			req = r
		case 5:
			r := kmsg.NewPtrFetchRequest()
			r.Version = fv
			r.ReplicaID = -1
			r.MaxWaitMillis = 20
			r.MinBytes = 1
			r.MaxBytes = 1 << 20
			r.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset = 0
			rp.PartitionMaxBytes = 1 << 20
			rp.CurrentLeaderEpoch = -1
			rp.LogStartOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			req = r
		}
		corr := int32(1000 + i)
		// AppendRequest writes the size at dst[0:4], so build each frame alone.
		wire = append(wire, formatter.AppendRequest(nil, req, corr)...)
		all = append(all, sent{corr: corr, req: req, produce: idx})
	}
	c.writeAll(wire)

	for _, s := range all {
		if p, ok := s.req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			continue // no response
		}
		body, err := c.readFrame()
		if err != nil {
			t.Fatalf("waiting for the response to correlation id %d (%s): %v", s.corr, kmsg.NameForKey(s.req.Key()), err)
		}
		resp := s.req.ResponseKind()
		resp.SetVersion(s.req.GetVersion())
		got := int32(binary.BigEndian.Uint32(body))
		if got != s.corr {
			t.Fatalf("response out of order: got correlation id %d, want %d (%s)", got, s.corr, kmsg.NameForKey(s.req.Key()))
		}
		decodeResponse(t, s.corr, body, resp)
		if pr, ok := resp.(*kmsg.ProduceResponse); ok {
			p := pr.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != int64(s.produce) {
				t.Errorf("pipelined produce #%d: %s at offset %d; want offset %d (request order)", s.produce, errName(p.ErrorCode), p.BaseOffset, s.produce)
			}
		}
	}
	ends := endOffsets(t, adm, topic)
	if ends[0] != int64(produced) {
		t.Fatalf("end offset %d, want %d", ends[0], produced)
	}
	rs := readPartitions(t, b.Addr(), topic, ends)[0]
	for i, r := range rs {
		if want := fmt.Sprintf("pipe-%d", i); string(r.Value) != want {
			t.Fatalf("offset %d holds %q, want %q: produces not appended in request order", r.Offset, r.Value, want)
		}
	}
}
