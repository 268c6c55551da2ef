package compattests

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHostileFrames: garbage on one connection (negative, zero, tiny and
// huge frame sizes, unknown API key, unsupported version, truncated body,
// random bytes) makes the broker close that connection and nothing else: a
// franz-go client and a raw connection opened before keep working, the
// process stays alive and still shuts down cleanly.
func TestHostileFrames(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	bystander := dialRaw(t, b.Addr())
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)

	produced := 0
	stillServes := func(after string) {
		t.Helper()
		b.Alive()
		ctx := testCtx(t, opTimeout)
		r := &kgo.Record{Value: []byte(after)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("after %s: existing client cannot produce: %v", after, err)
		}
		if r.Offset != int64(produced) {
			t.Fatalf("after %s: record at offset %d, want %d", after, r.Offset, produced)
		}
		produced++
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		if resp := bystander.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("after %s: bystander ApiVersions: %s", after, errName(resp.ErrorCode))
		}
	}
	stillServes("setup")

	header := func(key, version int16, corr int32, flexible bool) []byte {
		var h []byte
		h = binary.BigEndian.AppendUint16(h, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, uint32(corr))
		h = binary.BigEndian.AppendUint16(h, 0xffff) // null client id
		if flexible {
			h = append(h, 0) // no tagged fields
		}
		return h
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}

	// A valid Produce request, then cut in half with a consistent size.
	preq := kmsg.NewPtrProduceRequest()
	preq.Version = pv
	preq.Acks = -1
	preq.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = rawBatch(-1, -1, -1, 0, valueRecords("truncated", "body"))
	rt.Partitions = append(rt.Partitions, rp)
	preq.Topics = append(preq.Topics, rt)
	full := kmsg.NewRequestFormatter().AppendRequest(nil, preq, 7)
	half := full[4 : 4+(len(full)-4)/2]

	huge := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
	huge = append(huge, header(3, 9, 1, true)...)
	huge = append(huge, make([]byte, 1024)...)

	cases := []struct {
		name string
		data []byte
	}{
		{"negative size -1", append([]byte{0xff, 0xff, 0xff, 0xff}, header(18, 0, 1, false)...)},
		{"negative size MinInt32", append([]byte{0x80, 0, 0, 0}, header(18, 0, 1, false)...)},
		{"negative size -2^31+1", append([]byte{0x80, 0, 0, 1}, header(18, 0, 1, false)...)},
		{"huge size 0x7fffffff", huge},
		{"size 1 GiB", append([]byte{0x40, 0, 0, 0}, header(0, pv, 1, false)...)},
		{"zero size", []byte{0, 0, 0, 0}},
		{"size shorter than a header", frame([]byte{0, 18, 0})},
		{"unknown api key 12345", frame(header(12345, 0, 1, false))},
		{"unknown api key -1", frame(header(-1, 0, 1, false))},
		{"Metadata v200", frame(append(header(3, 200, 1, true), 0, 0))},
		{"Produce with truncated body", frame(half)},
		{"Produce with client id longer than frame", frame(append(header(0, pv, 1, false)[:8], 0x7f, 0xff, 'x'))},
	}
	for _, c := range cases {
		rc := dialRaw(t, b.Addr())
		rc.writeAll(c.data)
		rc.expectClosed(c.name)
		rc.conn.Close()
		stillServes(c.name)
	}

	// Random bytes, then end of input: the broker must end the connection
	// (reply or not) and survive.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		junk := make([]byte, 1+rng.Intn(64<<10))
		rng.Read(junk)
		rc := dialRaw(t, b.Addr())
		rc.writeAll(junk)
		_ = rc.conn.(*net.TCPConn).CloseWrite()
		rc.expectClosed(fmt.Sprintf("random bytes #%d (%d bytes)", i, len(junk)))
		rc.conn.Close()
	}
	stillServes("random bytes")

	// Well-sized frames of random bodies under real API keys and versions.
	keys := []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.ApiVersions,
		kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.InitProducerID, kmsg.DescribeConfigs, kmsg.FindCoordinator}
	for i := 0; i < 40; i++ {
		key := keys[i%len(keys)]
		r, ok := vs[int16(key)]
		if !ok {
			continue
		}
		version := r[0] + int16(rng.Intn(int(r[1]-r[0])+1))
		flexible := false
		if req := kmsg.RequestForKey(int16(key)); req != nil {
			req.SetVersion(version)
			flexible = req.IsFlexible()
		}
		body := make([]byte, rng.Intn(512))
		rng.Read(body)
		rc := dialRaw(t, b.Addr())
		rc.writeAll(frame(append(header(int16(key), version, int32(i), flexible), body...)))
		_ = rc.conn.(*net.TCPConn).CloseWrite()
		rc.expectClosed(fmt.Sprintf("random %s v%d body (%d bytes)", kmsg.NameForKey(int16(key)), version, len(body)))
		rc.conn.Close()
		if key == kmsg.CreateTopics || key == kmsg.DeleteTopics {
			b.Alive()
		}
	}
	stillServes("random bodies")

	// The partition holds exactly what the well-behaved client produced.
	ends := endOffsets(t, adm, topic)
	if ends[0] != int64(produced) {
		t.Errorf("end offset %d, want %d: a hostile frame appended data", ends[0], produced)
	}
	b.Stop()
}
