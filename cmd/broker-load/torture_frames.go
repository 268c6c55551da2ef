package main

// The frames phase: many connections send hostile Kafka frames (huge
// claimed sizes with a few bytes, negative sizes, truncated bodies, valid
// headers with garbage bodies, random keys and versions, real requests
// with flipped bytes, random bytes) while the broker's RSS is sampled from
// /proc/PID/status and a well-behaved franz-go client keeps producing.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	framesProbeTopic = "torture-probe"
	framesTopic      = "torture-frames"
	// framesHoldMax bounds how long a hostile connection stays open.
	framesHoldMax = 3 * time.Second
)

var frameKinds = []string{
	"huge-size", "bad-size", "truncated", "garbage-body", "random-key-version",
	"mutated-request", "random-bytes", "valid-request", "pipelined",
}

func runFramesPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	b, err := env.startPhaseBroker(ctx, "frames", "")
	if err != nil {
		return err
	}
	p.broker = b
	probe, err := newFramesProbe(ctx, b)
	if err != nil {
		return err
	}
	defer probe.Close()
	probeOnce := func() error {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return probe.ProduceSync(pctx, &kgo.Record{Value: []byte("probe")}).FirstErr()
	}
	if err := probeOnce(); err != nil {
		return fmt.Errorf("probe before the storm: %w", err)
	}

	// Idle RSS: the highest of a second of samples after a short rest.
	pid := b.pid()
	sleepCtx(ctx, 2*time.Second)
	idle := startRSSSampler(pid, 50*time.Millisecond)
	sleepCtx(ctx, time.Second)
	_, idleKiB, _ := idle.stop()

	templates := frameTemplates()
	sampler := startRSSSampler(pid, 25*time.Millisecond)
	stormCtx, stopStorm := context.WithTimeout(ctx, d)
	defer stopStorm()
	var storm frameStorm
	var wg sync.WaitGroup
	for w := range env.cfg.frameConns {
		seed := env.rng.Uint64()
		wg.Go(func() { storm.hammer(stormCtx, b.kafkaAddr, w, seed, templates) })
	}
	// The well-behaved client produces once a second during the storm.
	for stormCtx.Err() == nil {
		if err := probeOnce(); err != nil {
			storm.probesFailed++
			storm.probeErr = err
		} else {
			storm.probesOK++
		}
		sleepCtx(stormCtx, time.Second)
	}
	wg.Wait()
	aliveAfterStorm := b.alive()
	sleepCtx(ctx, 3*time.Second) // let the broker drop what the storm left
	samples, peakKiB, _ := sampler.stop()
	endKiB, _ := procStatusKiB(pid, "VmRSS")
	hwmKiB, _ := procStatusKiB(pid, "VmHWM")
	peakKiB = max(peakKiB, hwmKiB)
	afterErr := probeOnce()

	storm.report(p)
	kibToMiB := func(kib int64) float64 { return float64(kib) / 1024 }
	p.RSS = &RSSReport{Samples: samples, IdleMiB: kibToMiB(idleKiB), PeakMiB: kibToMiB(peakKiB), EndMiB: kibToMiB(endKiB), HWMMiB: kibToMiB(hwmKiB),
		LimitMiB: float64(env.cfg.rssLimit) / (1 << 20)}
	p.check("broker alive through the storm", aliveAfterStorm && b.alive(), "exit: %v", b.exitErr())
	p.check("a normal client works after the storm", afterErr == nil, "produce after the storm: %v", afterErr)
	p.check("peak RSS under --rss-limit", peakKiB*1024 <= env.cfg.rssLimit, "peak %.0f MiB (idle %.0f MiB), limit %.0f MiB",
		kibToMiB(peakKiB), kibToMiB(idleKiB), p.RSS.LimitMiB)
	p.check("RSS under --rss-limit 3 s after the storm", endKiB*1024 <= env.cfg.rssLimit, "end %.0f MiB, limit %.0f MiB", kibToMiB(endKiB), p.RSS.LimitMiB)
	return nil
}

// newFramesProbe creates the phase's topics and the well-behaved client
// that produces to the probe topic.
func newFramesProbe(ctx context.Context, b *brokerProcess) (*kgo.Client, error) {
	adm, admClient, err := newTortureAdmin(b.kafkaAddr)
	if err != nil {
		return nil, err
	}
	for _, t := range []string{framesProbeTopic, framesTopic} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, t); err != nil {
			admClient.Close()
			return nil, fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	admClient.Close()
	return kgo.NewClient(kgo.SeedBrokers(b.kafkaAddr), kgo.DefaultProduceTopic(framesProbeTopic),
		kgo.RecordDeliveryTimeout(10*time.Second))
}

// frameStorm counts what the hostile connections did, and the probes of
// the well-behaved client during the storm.
type frameStorm struct {
	sent      [9]atomic.Int64 // by frame kind
	answered  atomic.Int64    // the broker wrote something back
	closedBy  atomic.Int64    // the broker closed the connection first
	dialFails atomic.Int64
	bytesOut  atomic.Int64

	probesOK, probesFailed int64
	probeErr               error // the last probe's
}

// hammer is one hostile connection loop (worker w): until ctx ends, it
// dials addr, sends a random hostile frame (hostileFrame) and reads until
// the broker closes or the frame's hold time is over.
func (s *frameStorm) hammer(ctx context.Context, addr string, w int, seed uint64, templates []frameTemplate) {
	rng := newRand(seed)
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		kind := rng.IntN(len(frameKinds))
		data, hold := hostileFrame(rng, kind, templates, int32(w*1_000_000+n))
		s.sent[kind].Add(1)
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			s.dialFails.Add(1)
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		_ = c.SetDeadline(time.Now().Add(framesHoldMax + time.Second))
		if k, err := c.Write(data); err == nil || k > 0 {
			s.bytesOut.Add(int64(k))
		}
		// Read until the broker closes or the hold time is over:
		// a connection that claimed a huge frame stays open,
		// half-sent, for up to framesHoldMax.
		_ = c.SetReadDeadline(time.Now().Add(hold))
		k, err := io.Copy(io.Discard, io.LimitReader(c, 16<<20))
		if k > 0 {
			s.answered.Add(1)
		}
		if err == nil {
			s.closedBy.Add(1) // EOF before our deadline
		}
		c.Close()
	}
}

// report adds the storm's counts to p.
func (s *frameStorm) report(p *PhaseReport) {
	var total int64
	for i, k := range frameKinds {
		n := s.sent[i].Load()
		total += n
		p.count(k, n)
	}
	p.count("connections", total)
	p.count("answered", s.answered.Load())
	p.count("closed by the broker", s.closedBy.Load())
	p.count("dial failures", s.dialFails.Load())
	p.count("MiB sent", s.bytesOut.Load()>>20)
	p.count("probes ok during the storm", s.probesOK)
	p.count("probes failed during the storm", s.probesFailed)
	if s.probeErr != nil {
		p.note("last probe error during the storm: %v", s.probeErr)
	}
}

// frameTemplate is one valid request, encoded with its size prefix.
type frameTemplate struct {
	name  string
	frame []byte
}

// frameTemplates encodes one valid request of each of a set of APIs at a
// version the broker serves (Kafka 2.x-3.x clients use these).
func frameTemplates() []frameTemplate {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("torture"))
	var out []frameTemplate
	add := func(req kmsg.Request, version int16) {
		req.SetVersion(version)
		out = append(out, frameTemplate{kmsg.NameForKey(req.Key()), f.AppendRequest(nil, req, 1)})
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	produce.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = framesTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = tortureBatch([]string{"a", "bb", "ccc"})
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	add(produce, 9)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis = 100
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = framesTopic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	add(fetch, 11)

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(framesTopic)
	meta.Topics = append(meta.Topics, mt)
	add(meta, 9)

	add(kmsg.NewPtrApiVersionsRequest(), 3)

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = framesTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	add(lo, 5)

	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic = "torture-created"
	ctt.NumPartitions = 1
	ctt.ReplicationFactor = 1
	ct.Topics = append(ct.Topics, ctt)
	ct.ValidateOnly = true
	add(ct, 5)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"torture-absent"}
	add(dt, 4)

	add(kmsg.NewPtrInitProducerIDRequest(), 4)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "torture-group"
	add(fc, 3)

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = "torture-group"
	jg.SessionTimeoutMillis = 6000
	jg.RebalanceTimeoutMillis = 6000
	jg.ProtocolType = "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jp.Metadata = []byte{0, 1, 0, 0, 0, 0}
	jg.Protocols = append(jg.Protocols, jp)
	add(jg, 5)

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "torture-group"
	oc.Generation = -1
	oct := kmsg.NewOffsetCommitRequestTopic()
	oct.Topic = framesTopic
	ocp := kmsg.NewOffsetCommitRequestTopicPartition()
	ocp.Offset = 1
	oct.Partitions = append(oct.Partitions, ocp)
	oc.Topics = append(oc.Topics, oct)
	add(oc, 8)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType = kmsg.ConfigResourceTypeTopic
	dcr.ResourceName = framesTopic
	dc.Resources = append(dc.Resources, dcr)
	add(dc, 4)

	add(kmsg.NewPtrListGroupsRequest(), 4)
	add(kmsg.NewPtrDescribeClusterRequest(), 0)
	return out
}

// tortureBatch is one uncompressed v2 record batch with a valid CRC.
func tortureBatch(values []string) []byte {
	var body []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		body = append(body, r.AppendTo(nil)...)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(values)) - 1,
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: body}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// hostileFrame builds the bytes of one hostile connection of the given
// kind and how long to keep the connection open for the broker's answer.
func hostileFrame(rng *rand.Rand, kind int, templates []frameTemplate, corr int32) ([]byte, time.Duration) {
	short := time.Duration(50+rng.IntN(250)) * time.Millisecond
	long := time.Duration(500+rng.IntN(int(framesHoldMax/time.Millisecond)-500)) * time.Millisecond
	header := func(key, version int16) []byte {
		var h []byte
		h = binary.BigEndian.AppendUint16(h, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, uint32(corr))
		h = binary.BigEndian.AppendUint16(h, 7)
		h = append(h, "torture"...)
		if rng.IntN(2) == 0 {
			h = append(h, 0) // empty tagged fields of a flexible header
		}
		return h
	}
	randomBytes := func(n int) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
		return out
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	tmpl := templates[rng.IntN(len(templates))].frame
	switch frameKinds[kind] {
	case "huge-size":
		// A claimed size the broker may accept (up to max-request-bytes,
		// 100 MiB) or not, then a header and a few bytes, and the
		// connection held open: the broker must not allocate the claim.
		sizes := []uint32{100<<20 - 1, 100 << 20, 0x7fffffff, uint32(1<<20 + rng.IntN(99<<20)), uint32(64<<20 + rng.IntN(36<<20))}
		size := sizes[rng.IntN(len(sizes))]
		out := binary.BigEndian.AppendUint32(nil, size)
		out = append(out, header(int16(rng.IntN(4)), int16(rng.IntN(10)))...)
		return append(out, randomBytes(rng.IntN(1024))...), long
	case "bad-size":
		sizes := []uint32{0, 1, 2, 7, 0xffffffff, 0x80000000, 0x80000001, uint32(rng.Uint32() | 0x80000000)}
		out := binary.BigEndian.AppendUint32(nil, sizes[rng.IntN(len(sizes))])
		return append(out, header(18, 0)...), short
	case "truncated":
		// A valid request whose size is right but whose body stops early.
		cut := 4 + rng.IntN(len(tmpl)-4)
		return append([]byte(nil), tmpl[:cut]...), long
	case "garbage-body":
		body := append(header(int16(rng.IntN(20)), int16(rng.IntN(12))), randomBytes(rng.IntN(4096))...)
		return frame(body), short
	case "random-key-version":
		body := append(header(int16(rng.IntN(200)-50), int16(rng.IntN(40)-5)), randomBytes(rng.IntN(512))...)
		return frame(body), short
	case "mutated-request":
		out := append([]byte(nil), tmpl...)
		flips := 1 + rng.IntN(8)
		for range flips {
			i := 4 + rng.IntN(len(out)-4)
			if rng.IntN(8) == 0 {
				i = rng.IntN(4) // now and then the size itself
			}
			out[i] ^= byte(1 + rng.IntN(255))
		}
		return out, short
	case "random-bytes":
		return randomBytes(1 + rng.IntN(64<<10)), short
	case "valid-request":
		return append([]byte(nil), tmpl...), short
	default: // pipelined: many valid requests, the answers never read
		var out []byte
		for range 1 + rng.IntN(200) {
			out = append(out, templates[rng.IntN(len(templates))].frame...)
		}
		return out, time.Millisecond
	}
}
