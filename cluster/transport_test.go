package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func hello(from, to, incarnation uint64) []byte {
	b := append([]byte(nil), helloMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, from)
	b = binary.BigEndian.AppendUint64(b, to)
	return binary.BigEndian.AppendUint64(b, incarnation)
}

func frame(m *raftpb.Message) []byte {
	body, _ := proto.Marshal(m)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func frameV2(group uint64, m *raftpb.Message) []byte {
	body, _ := proto.Marshal(m)
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	return append(binary.BigEndian.AppendUint64(b, group), body...)
}

// TestTransportClosesOnlyTheBadConnection: bytes that are not the
// inter-broker protocol (another service's, a peer that lies about who
// it is, oversized or undecodable frames, messages Raft keeps local)
// close the connection that carried them, and the cluster keeps
// committing.
func TestTransportClosesOnlyTheBadConnection(t *testing.T) {
	c := newTestCluster(t, 3, NodeConfig{}, newRecorder)
	c.nodes[1].node.Campaign()
	c.waitLeader()
	target := c.addrs[2]
	cases := map[string][]byte{
		"not the protocol":  []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n........"),
		"wrong node":        hello(1, 3, 0),
		"unknown peer":      hello(9, 2, 0),
		"oversized frame":   append(hello(1, 2, 0), 0xff, 0xff, 0xff, 0xff),
		"empty frame":       append(hello(1, 2, 0), 0, 0, 0, 0),
		"undecodable frame": append(hello(1, 2, 0), 0, 0, 0, 3, 0xff, 0xff, 0xff),
		"forged sender": append(hello(1, 2, 0), frame(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(),
			From: new(uint64(3)), To: new(uint64(2)), Term: new(uint64(1))})...),
		"local message": append(hello(1, 2, 0), frame(&raftpb.Message{Type: raftpb.MsgHup.Enum(),
			From: new(uint64(1)), To: new(uint64(2))})...),
	}
	for name, payload := range cases {
		conn, err := net.Dial("tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(payload); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: the connection was not closed: %v", name, err)
		}
		_ = conn.Close()
	}
	if _, err := c.propose(2, []byte("still-working")); err != nil {
		t.Fatal(err)
	}
	c.waitSame([]string{"still-working"})
}

// FuzzTransportRead: the receiving side of a connection never panics on
// any bytes, and what it accepts is a message from the hello's sender to
// this node.
func FuzzTransportRead(f *testing.F) {
	f.Add(hello(1, 2, 5), frame(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2))}))
	f.Add(hello(1, 2, 0), []byte{0, 0, 0, 1, 0})
	f.Add([]byte("garbage"), []byte{0xff})
	v2 := append(helloMagicV2[:], hello(1, 2, 5)[8:]...)
	f.Add(v2, frameV2(7, &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2))}))
	beats := binary.BigEndian.AppendUint32(nil, 12+2*heartbeatSize)
	beats = binary.BigEndian.AppendUint64(beats, heartbeatsGroup)
	beats = binary.BigEndian.AppendUint32(beats, 2)
	beats = appendBeat(beats, 3, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Term: new(uint64(2)), Commit: new(uint64(9))})
	beats = appendBeat(beats, 4, &raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), Term: new(uint64(2))})
	f.Add(v2, beats)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	tr, err := NewTransport(TransportConfig{ID: 2, Listener: l, Peers: map[uint64]string{1: "x", 3: "y"}, MaxFrameBytes: 1 << 16, Logger: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	tr.receiver.Store(&receiverBox{nopReceiver{}})
	f.Fuzz(func(t *testing.T, head, body []byte) {
		client, server := net.Pipe()
		defer server.Close()
		go func() {
			_, _ = client.Write(head)
			_, _ = client.Write(body) // in two halves
			_ = client.Close()
		}()
		r := bufio.NewReader(server)
		from, v2, err := tr.readHello(server, r)
		if err != nil {
			_, _ = io.Copy(io.Discard, server)
			return
		}
		for {
			var m *raftpb.Message
			var err error
			if v2 {
				err = tr.readFrame(r, from, func(group uint64, got *raftpb.Message) error {
					if group == heartbeatsGroup {
						t.Fatalf("delivered a message of the reserved group %d", group)
					}
					m = got
					return nil
				})
			} else {
				m, err = tr.readMessage(r, from)
			}
			if err != nil {
				_, _ = io.Copy(io.Discard, server)
				return
			}
			if m != nil && (m.GetFrom() != from || m.GetTo() != 2) {
				t.Fatalf("accepted %v over the stream of %d", m, from)
			}
		}
	})
}

type nopReceiver struct{}

func (nopReceiver) Step(*raftpb.Message)                       {}
func (nopReceiver) ReportUnreachable(uint64)                   {}
func (nopReceiver) ReportSnapshot(uint64, raft.SnapshotStatus) {}
func (nopReceiver) PeerLostState(uint64)                       {}

// TestCoalescedHeartbeatsRoundTrip: the heartbeats and responses of many
// groups, coalesced into one frame, are read back as the messages Raft
// sent, each with its group; messages with a context are not coalesced.
func TestCoalescedHeartbeatsRoundTrip(t *testing.T) {
	tr, err := NewTransport(TransportConfig{ID: 2, Listener: nopListener{}, Peers: map[uint64]string{1: "x"}, GroupFrames: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	sent := map[uint64]*raftpb.Message{
		5:   {Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3)), Commit: new(uint64(17))},
		6:   {Type: raftpb.MsgHeartbeatResp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(4))},
		1e9: {Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)), Commit: new(uint64(0))},
	}
	var recs []byte
	for g, m := range sent {
		if !coalescable(m) {
			t.Fatalf("group %d: %v not coalescable", g, m)
		}
		recs = appendBeat(recs, g, m)
	}
	if coalescable(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Context: []byte("read-index")}) {
		t.Fatal("a heartbeat with a context was coalesced: the context would be lost")
	}
	f := binary.BigEndian.AppendUint32(nil, uint32(12+len(recs)))
	f = binary.BigEndian.AppendUint64(f, heartbeatsGroup)
	f = binary.BigEndian.AppendUint32(f, uint32(len(sent)))
	f = append(f, recs...)
	got := map[uint64]*raftpb.Message{}
	err = tr.readFrame(bufio.NewReader(bytes.NewReader(f)), 1, func(g uint64, m *raftpb.Message) error {
		got[g] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for g, m := range sent {
		if !proto.Equal(got[g], m) {
			t.Fatalf("group %d: read %v, sent %v", g, got[g], m)
		}
	}
}

type nopListener struct{}

func (nopListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (nopListener) Close() error              { return nil }
func (nopListener) Addr() net.Addr            { return &net.TCPAddr{} }
