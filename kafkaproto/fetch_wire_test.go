package kafkaproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomFetchResponse builds a Fetch response with what the broker sets:
// several topics, partitions with and without records (nil, empty, small,
// some above writeVectorMin), errors, aborted transactions (nil, empty,
// some) and a throttle time (KIP-219) or none.
func randomFetchResponse(rng *rand.Rand, version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	if rng.IntN(3) == 0 {
		resp.ThrottleMillis = rng.Int32()
	}
	resp.ErrorCode = int16(rng.IntN(3))
	resp.SessionID = rng.Int32()
	for range rng.IntN(4) {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = string(randomBytes(rng, rng.IntN(300)))
		for i := range rt.TopicID {
			rt.TopicID[i] = byte(rng.IntN(256))
		}
		for range rng.IntN(6) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = rng.Int32()
			rp.ErrorCode = int16(rng.IntN(100))
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
			switch rng.IntN(3) {
			case 0:
			case 1:
				rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for range 1 + rng.IntN(3) {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = rng.Int64(), rng.Int64()
					rp.AbortedTransactions = append(rp.AbortedTransactions, at)
				}
			}
			switch rng.IntN(5) {
			case 0:
			case 1:
				rp.RecordBatches = []byte{}
			case 2:
				rp.RecordBatches = randomBytes(rng, writeVectorMin+rng.IntN(200<<10))
			default:
				rp.RecordBatches = randomBytes(rng, 1+rng.IntN(300))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// kmsgFetchFrame is the frame the writer wrote before fetchWire: size,
// correlation ID, header tags from v12, kmsg's encoding.
func kmsgFetchFrame(corr int32, resp *kmsg.FetchResponse) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readFrame reads one size-prefixed frame, nil on error.
func readFrame(r io.Reader) []byte {
	b := make([]byte, 4)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil
	}
	b = append(b, make([]byte, binary.BigEndian.Uint32(b))...)
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil
	}
	return b
}

// tcpPair returns the two ends of a real TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// TestFetchWireBytes writes randomized Fetch responses of every served
// version through writeFetchReply, over TCP (writev for large ones) and over
// a pipe (the buffered path TLS takes), and compares the bytes read with
// kmsg's encoding of the same response.
func TestFetchWireBytes(t *testing.T) {
	s, _ := startTestServer(t)
	reg := registry[int16(kmsg.Fetch)]
	tcpServer, tcpClient := tcpPair(t)
	pipeServer, pipeClient := net.Pipe()
	t.Cleanup(func() { pipeServer.Close(); pipeClient.Close() })
	for _, tc := range []struct {
		name           string
		server, client net.Conn
	}{{"tcp", tcpServer, tcpClient}, {"pipe", pipeServer, pipeClient}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{s: s, nc: tc.server, replies: make(chan queued, 1)}
			bw := bufio.NewWriterSize(tc.server, 64<<10)
			rng := rand.New(rand.NewPCG(1, 2))
			var buf []byte
			writes := 0
			for version := reg.minVersion; version <= reg.maxVersion; version++ {
				for i := range 40 {
					resp := randomFetchResponse(rng, version)
					if !plainFetchResponse(resp) {
						t.Fatalf("v%d: a response with no tagged field is not plain", version)
					}
					corr := int32(i)
					want := kmsgFetchFrame(corr, resp)
					released := false
					q := queued{corr: corr, version: version, key: int16(kmsg.Fetch), reply: reply{resp: resp, release: func() { released = true }}}
					got := make(chan []byte, 1)
					go func() { got <- readFrame(tc.client) }()
					broken := false
					buf = c.writeFetchReply(bw, buf, &broken, q)
					writes++
					if broken {
						t.Fatalf("v%d: write failed", version)
					}
					if err := bw.Flush(); err != nil {
						t.Fatal(err)
					}
					if b := <-got; !bytes.Equal(b, want) {
						t.Fatalf("v%d response %d: %d bytes written differ from kmsg's %d", version, i, len(b), len(want))
					}
					if !released {
						t.Fatalf("v%d: release did not run", version)
					}
					if len(c.fw.bufs) != 0 || len(c.fw.cuts) != 0 {
						t.Fatalf("v%d: the writer keeps references to record buffers", version)
					}
				}
			}
			if writes != 17*40 {
				t.Fatalf("wrote %d responses, want %d", writes, 17*40)
			}
		})
	}
}

// TestFetchWirePlain: a response with a tagged field this encoder does not
// write goes to kmsg's encoder.
func TestFetchWirePlain(t *testing.T) {
	for _, set := range []func(r *kmsg.FetchResponse){
		func(r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].DivergingEpoch.Epoch = 3 },
		func(r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].CurrentLeader.LeaderID = 1 },
		func(r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].SnapshotID.EndOffset = 7 },
		func(r *kmsg.FetchResponse) { r.Brokers = append(r.Brokers, kmsg.NewFetchResponseBroker()) },
		func(r *kmsg.FetchResponse) { r.UnknownTags.Set(9, []byte{1}) },
		func(r *kmsg.FetchResponse) { r.Topics[0].UnknownTags.Set(9, []byte{1}) },
	} {
		r := kmsg.NewPtrFetchResponse()
		rt := kmsg.NewFetchResponseTopic()
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchResponseTopicPartition())
		r.Topics = append(r.Topics, rt)
		if !plainFetchResponse(r) {
			t.Fatal("a default response is not plain")
		}
		set(r)
		if plainFetchResponse(r) {
			t.Fatal("a response with a tagged field is plain")
		}
	}
}

// TestFetchWireAllocs: encoding a 1,000-partition response into reused
// buffers allocates nothing; kmsg's encoding copied every record byte.
func TestFetchWireAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rt := kmsg.NewFetchResponseTopic()
	for i := range 1000 {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(i)
		rp.RecordBatches = make([]byte, 16<<10)
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	var w fetchWire
	var meta []byte
	encode := func() {
		var n int
		meta, n = w.appendFetchMeta(meta[:0], resp)
		if n != 1000*16<<10 || len(w.vectors(meta)) != 2001 {
			t.Fatalf("records %d, pieces %d", n, len(w.bufs))
		}
		w.reset()
	}
	encode()
	// Counted 2026-12-01: 0 allocs.
	if a := testing.AllocsPerRun(20, encode); a > 0 {
		t.Fatalf("%v allocs per 1,000-partition response, want 0", a)
	}
}
