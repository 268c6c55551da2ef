package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/internal/loglimit"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The inter-broker stream: a connection carries messages one way, from the
// node that dialed to the node that accepted. It opens with a 32-byte
// hello, then frames. Version 1 (the metadata group alone):
//
//	hello: magic "VMQRAFT1" [8] | from u64 | to u64 | incarnation u64
//	frame: length u32 | protobuf raftpb.Message [length]
//
// Version 2 (TransportConfig.GroupFrames: many groups, a Host) names the
// group of every message and coalesces heartbeats:
//
//	hello: magic "VMQRAFT2" [8] | from u64 | to u64 | incarnation u64
//	frame: length u32 | group u64 | protobuf raftpb.Message [length-8]
//	frame: length u32 | 0xffffffffffffffff | count u32 |
//	       count x (group u64 | kind u8 | term u64 | commit u64)
//
// The second v2 frame is every heartbeat (kind 0) and heartbeat response
// (kind 1) one Send has for one peer, 25 bytes each instead of a message
// each; only those without a context (no ReadIndex) are coalesced. A
// receiver accepts both versions; a sender speaks the one it is
// configured with, so nodes of a version-1 cluster keep understanding
// each other.
//
// Quiescing (a Host's idle groups stop ticking) adds no frame type, so
// every v2 receiver understands a quiescing sender:
//   - a node heartbeat is a coalesced-heartbeats frame of count 0, sent
//     to every peer on each of the Host's ticks; any frame received from
//     a peer counts as a sign of its node's life (Transport.Heard);
//   - a quiesce heartbeat is an ordinary group frame holding a
//     MsgHeartbeat whose context is "vmq.quiesce" (so never coalesced):
//     a receiver that does not know it steps it as a heartbeat and keeps
//     ticking.
//
// The receiver checks the hello (magic, to = itself, from a known peer) and
// every message (From = the hello's from, To = itself, a message type peers
// send); anything else closes that connection only. A hello whose
// incarnation differs from the one the peer announced before means the
// peer lost its Raft state (a wiped data directory): the receiver and the
// group receiver are told (PeerLostState).
var (
	helloMagic   = [8]byte{'V', 'M', 'Q', 'R', 'A', 'F', 'T', '1'}
	helloMagicV2 = [8]byte{'V', 'M', 'Q', 'R', 'A', 'F', 'T', '2'}
)

const (
	helloSize = 32
	// heartbeatsGroup in a v2 frame's group field marks coalesced
	// heartbeats; no Raft group has this ID.
	heartbeatsGroup = ^uint64(0)
	// heartbeatSize: one coalesced heartbeat.
	heartbeatSize = 25
)

// GroupReceiver takes the messages of the groups other than 0 (a Host)
// and what the transport learns about their sends and peers.
type GroupReceiver interface {
	StepGroup(group uint64, m *raftpb.Message)
	ReportGroupUnreachable(group, id uint64)
	ReportGroupSnapshot(group, id uint64, status raft.SnapshotStatus)
	PeerLostState(id uint64)
}

// GroupMessage is a message of one Raft group.
type GroupMessage struct {
	Group uint64
	Msg   *raftpb.Message
}

// Receiver takes what the transport receives and what it learns about
// sends: a *Node.
type Receiver interface {
	Step(m *raftpb.Message)
	ReportUnreachable(id uint64)
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
	PeerLostState(id uint64)
}

// TransportConfig configures the inter-broker transport of one node.
type TransportConfig struct {
	// ID is this node's ID.
	ID uint64
	// Listener accepts the peers' connections (the inter-broker address).
	Listener net.Listener
	// Incarnation is this node's (Incarnation of the metadata group).
	Incarnation uint64
	// Peers maps every other node's ID to its inter-broker address.
	Peers map[uint64]string
	// QueueMessages bounds the messages waiting for one peer; beyond it
	// messages are dropped (Raft retransmits). 1024 by default.
	QueueMessages int
	// MaxFrameBytes bounds one received message; a larger frame closes
	// the connection. 64 MiB by default (a metadata snapshot travels in
	// one message).
	MaxFrameBytes int
	// DialTimeout bounds one connection attempt; 1s by default.
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between connection
	// attempts to an unreachable peer (doubling); 50ms and 2s by default.
	BackoffMin, BackoffMax time.Duration
	// GroupFrames: speak version 2 (every frame names its group; groups
	// other than 0 need it). Receiving understands both versions.
	GroupFrames bool
	// Logger receives the transport's events.
	Logger zerolog.Logger
}

// Transport sends Raft messages to the peers over TCP and hands the
// messages it receives to a Receiver. One outbound connection and one
// goroutine per peer, each with a bounded queue; messages to a peer that
// cannot be reached are dropped and reported (Raft retransmits).
type Transport struct {
	cfg      TransportConfig
	log      zerolog.Logger
	limiter  loglimit.Limiter
	receiver atomic.Pointer[receiverBox]
	groups   atomic.Pointer[groupsBox]
	filter   atomic.Pointer[Filter]

	mu struct {
		sync.Mutex
		closed  bool
		started bool
		inbound map[net.Conn]struct{}
		// peers: every other member's sender, by node ID; membership
		// changes add and remove them (AddPeer, RemovePeer).
		peers map[uint64]*peer
		// incarnations: the last incarnation each peer announced.
		incarnations map[uint64]uint64
		// heard: frames received from each peer (Heard).
		heard map[uint64]*atomic.Uint64
	}
	wg     sync.WaitGroup
	closec chan struct{}
}

type receiverBox struct{ r Receiver }

type groupsBox struct{ g GroupReceiver }

// Filter decides, for tests, whether a message may leave (true) or is
// dropped as if the network lost it (false).
type Filter func(m *raftpb.Message) bool

type outbound struct {
	to    uint64
	group uint64
	frame []byte
	snap  bool
	// beats: a frame of coalesced heartbeats, whose loss is not reported
	// (every group sends another at its next heartbeat tick).
	beats bool
}

type peer struct {
	id    uint64
	addr  string
	queue chan outbound
	stopc chan struct{} // closed when the peer is removed or replaced
}

// NewTransport prepares the transport; Start begins accepting and sending.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if cfg.ID == 0 || cfg.Listener == nil {
		return nil, errors.New("cluster: a transport needs this node's ID and a listener")
	}
	if cfg.QueueMessages <= 0 {
		cfg.QueueMessages = 1024
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 64 << 20
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 50 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(2*time.Second, cfg.BackoffMin)
	}
	t := &Transport{cfg: cfg, closec: make(chan struct{}),
		log: cfg.Logger.With().Str("component", "raft-transport").Uint64("node", cfg.ID).Logger()}
	t.mu.inbound = map[net.Conn]struct{}{}
	t.mu.incarnations = map[uint64]uint64{}
	t.mu.heard = map[uint64]*atomic.Uint64{}
	t.mu.peers = map[uint64]*peer{}
	for id, addr := range cfg.Peers {
		if id != cfg.ID {
			t.mu.peers[id] = t.newPeer(id, addr)
		}
	}
	return t, nil
}

func (t *Transport) newPeer(id uint64, addr string) *peer {
	return &peer{id: id, addr: addr, queue: make(chan outbound, t.cfg.QueueMessages), stopc: make(chan struct{})}
}

// AddPeer starts sending to node id at addr (a member added, or its
// address learned from the log); a peer known at another address is
// dialed at the new one from now on.
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == t.cfg.ID || addr == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.mu.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		close(old.stopc)
	}
	p := t.newPeer(id, addr)
	t.mu.peers[id] = p
	if t.mu.started && !t.mu.closed {
		t.wg.Add(1)
		go t.sendLoop(p)
	}
}

// RemovePeer stops sending to node id and refuses its connections from
// now on (a member removed).
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.mu.peers[id]; p != nil {
		close(p.stopc)
		delete(t.mu.peers, id)
	}
}

func (t *Transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.peers[id]
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.cfg.Listener.Addr() }

// SetFilter installs a test filter (nil removes it).
func (t *Transport) SetFilter(f Filter) {
	if f == nil {
		t.filter.Store(nil)
		return
	}
	t.filter.Store(&f)
}

// SetGroups hands the messages of the groups other than 0 to g (a Host);
// call it before Start. Without it they are dropped.
func (t *Transport) SetGroups(g GroupReceiver) { t.groups.Store(&groupsBox{g}) }

// Start accepts the peers' connections, handing their messages to r
// (group 0; nil drops them), and starts one sender per peer.
func (t *Transport) Start(r Receiver) {
	if r == nil {
		r = dropReceiver{}
	}
	t.receiver.Store(&receiverBox{r})
	t.wg.Add(1)
	go t.acceptLoop()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.started = true
	for _, p := range t.mu.peers {
		t.wg.Add(1)
		go t.sendLoop(p)
	}
}

// Close stops accepting, closes every connection and waits for the
// transport's goroutines.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	close(t.closec)
	err := t.cfg.Listener.Close()
	for c := range t.mu.inbound {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// Send queues msgs of group 0 (the metadata group) for their peers. It
// encodes them here, on the caller's goroutine (the node's loop), so no
// message is read while Raft may change it. A full queue or an unknown
// peer drops the message.
func (t *Transport) Send(msgs []*raftpb.Message) {
	f := t.filter.Load()
	for _, m := range msgs {
		if f == nil || (*f)(m) {
			t.enqueue(0, m)
		}
	}
}

// SendGroups queues the messages of many groups (one Host loop iteration)
// for their peers, as Send does, coalescing each peer's heartbeats into
// one frame (version 2 only).
func (t *Transport) SendGroups(msgs []GroupMessage) {
	f := t.filter.Load()
	var beats map[uint64][]byte // per peer: the coalesced heartbeats
	for _, gm := range msgs {
		m := gm.Msg
		if f != nil && !(*f)(m) {
			continue
		}
		if !t.cfg.GroupFrames && gm.Group != 0 {
			t.log.Error().Uint64("group", gm.Group).Msg("a raft group other than 0 needs a transport with GroupFrames; message dropped")
			continue
		}
		if t.cfg.GroupFrames && coalescable(m) {
			if beats == nil {
				beats = map[uint64][]byte{}
			}
			beats[m.GetTo()] = appendBeat(beats[m.GetTo()], gm.Group, m)
			continue
		}
		t.enqueue(gm.Group, m)
	}
	for to, recs := range beats {
		p := t.peer(to)
		if p == nil {
			continue
		}
		frame := binary.BigEndian.AppendUint32(make([]byte, 0, 16+len(recs)), uint32(12+len(recs)))
		frame = binary.BigEndian.AppendUint64(frame, heartbeatsGroup)
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(recs)/heartbeatSize))
		frame = append(frame, recs...)
		select {
		case p.queue <- outbound{to: to, frame: frame, beats: true}:
		default:
		}
	}
}

// nodeHeartbeat: a coalesced-heartbeats frame of no heartbeat.
var nodeHeartbeat = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, 12), heartbeatsGroup), 0)

// SendNodeHeartbeats queues a node heartbeat (version 2 only) for every
// peer: a sign of this node's life for the peers' quiesced groups. A full
// queue drops it (the queue then holds other frames, signs enough).
func (t *Transport) SendNodeHeartbeats() {
	if !t.cfg.GroupFrames {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, p := range t.mu.peers {
		select {
		case p.queue <- outbound{to: id, frame: nodeHeartbeat, beats: true}:
		default:
		}
	}
}

// Heard returns how many frames this node received from peer id so far;
// a count that stops moving means the peer's node is down or cut off.
func (t *Transport) Heard(id uint64) uint64 {
	return t.heardCounter(id).Load()
}

func (t *Transport) heardCounter(id uint64) *atomic.Uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.mu.heard[id]
	if c == nil {
		c = &atomic.Uint64{}
		t.mu.heard[id] = c
	}
	return c
}

// coalescable: a heartbeat or heartbeat response that a coalesced record
// carries whole (type, term, commit; from and to are the stream's).
func coalescable(m *raftpb.Message) bool {
	t := m.GetType()
	return (t == raftpb.MsgHeartbeat || t == raftpb.MsgHeartbeatResp) && len(m.GetContext()) == 0 &&
		m.GetIndex() == 0 && m.GetLogTerm() == 0 && len(m.GetEntries()) == 0 && !m.GetReject() &&
		m.GetRejectHint() == 0 && m.GetVote() == 0 && m.GetSnapshot() == nil && len(m.GetResponses()) == 0
}

func appendBeat(b []byte, group uint64, m *raftpb.Message) []byte {
	b = binary.BigEndian.AppendUint64(b, group)
	kind := byte(0)
	if m.GetType() == raftpb.MsgHeartbeatResp {
		kind = 1
	}
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, m.GetTerm())
	return binary.BigEndian.AppendUint64(b, m.GetCommit())
}

// enqueue encodes m of group and queues it for its peer.
func (t *Transport) enqueue(group uint64, m *raftpb.Message) {
	p := t.peer(m.GetTo())
	if p == nil {
		return
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.log.Error().Err(err).Stringer("type", m.GetType()).Msg("cannot encode a raft message; dropped")
		return
	}
	var frame []byte
	if t.cfg.GroupFrames {
		frame = binary.BigEndian.AppendUint32(make([]byte, 0, 12+len(body)), uint32(8+len(body)))
		frame = binary.BigEndian.AppendUint64(frame, group)
	} else {
		frame = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	}
	frame = append(frame, body...)
	out := outbound{to: p.id, group: group, frame: frame, snap: m.GetType() == raftpb.MsgSnap}
	select {
	case p.queue <- out:
	default:
		t.reportFailure(out)
	}
}

// reportFailure tells the group of a message that could not be sent.
func (t *Transport) reportFailure(m outbound) {
	if m.beats {
		return
	}
	if m.group == 0 {
		if b := t.receiver.Load(); b != nil {
			b.r.ReportUnreachable(m.to)
			if m.snap {
				b.r.ReportSnapshot(m.to, raft.SnapshotFailure)
			}
		}
		return
	}
	if g := t.groups.Load(); g != nil {
		g.g.ReportGroupUnreachable(m.group, m.to)
		if m.snap {
			g.g.ReportGroupSnapshot(m.group, m.to, raft.SnapshotFailure)
		}
	}
}

func (t *Transport) reportSnapshotSent(m outbound) {
	if m.group == 0 {
		t.receiver.Load().r.ReportSnapshot(m.to, raft.SnapshotFinish)
	} else if g := t.groups.Load(); g != nil {
		g.g.ReportGroupSnapshot(m.group, m.to, raft.SnapshotFinish)
	}
}

// dropReceiver stands for a missing group-0 receiver (a Host alone).
type dropReceiver struct{}

func (dropReceiver) Step(*raftpb.Message)                       {}
func (dropReceiver) ReportUnreachable(uint64)                   {}
func (dropReceiver) ReportSnapshot(uint64, raft.SnapshotStatus) {}
func (dropReceiver) PeerLostState(uint64)                       {}

// sendLoop owns the outbound connection to p: it dials when a message is
// waiting (no sooner than the backoff allows), writes every message
// waiting in the queue and flushes them in one write, and on any failure
// drops the connection and the messages and reports the peer unreachable.
func (t *Transport) sendLoop(p *peer) {
	defer t.wg.Done()
	var conn net.Conn
	var w *bufio.Writer
	backoff := time.Duration(0)
	var nextDial time.Time
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	// Connect at once, so that the peer learns this node's incarnation
	// before this node has anything to say.
	if c, err := t.dial(p); err == nil {
		conn, w = c, bufio.NewWriterSize(c, 64<<10)
	}
	var batch []outbound
	for {
		select {
		case m := <-p.queue:
			batch = append(batch[:0], m)
		case <-t.closec:
			return
		case <-p.stopc:
			return
		}
		batch = drainQueue(p.queue, batch, 256)
		if conn == nil {
			if time.Now().Before(nextDial) {
				t.reportFailures(batch)
				continue
			}
			c, err := t.dial(p)
			if err != nil {
				backoff = min(max(2*backoff, t.cfg.BackoffMin), t.cfg.BackoffMax)
				nextDial = time.Now().Add(backoff)
				t.warn("dial", p.id, err)
				t.reportFailures(batch)
				continue
			}
			backoff = 0
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
		}
		if err := t.write(conn, w, batch); err != nil {
			t.warn("write", p.id, err)
			_ = conn.Close()
			conn, w = nil, nil
			t.reportFailures(batch)
			continue
		}
		for _, m := range batch {
			if m.snap {
				t.reportSnapshotSent(m)
			}
		}
	}
}

// drainQueue appends to batch what q holds now, at most n in all.
func drainQueue(q chan outbound, batch []outbound, n int) []outbound {
	for len(batch) < n {
		select {
		case m := <-q:
			batch = append(batch, m)
		default:
			return batch
		}
	}
	return batch
}

func (t *Transport) reportFailures(batch []outbound) {
	for _, m := range batch {
		t.reportFailure(m)
	}
}

func (t *Transport) dial(p *peer) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", p.addr, t.cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	hello := make([]byte, 0, helloSize)
	if t.cfg.GroupFrames {
		hello = append(hello, helloMagicV2[:]...)
	} else {
		hello = append(hello, helloMagic[:]...)
	}
	hello = binary.BigEndian.AppendUint64(hello, t.cfg.ID)
	hello = binary.BigEndian.AppendUint64(hello, p.id)
	hello = binary.BigEndian.AppendUint64(hello, t.cfg.Incarnation)
	_ = c.SetWriteDeadline(time.Now().Add(t.cfg.DialTimeout))
	if _, err := c.Write(hello); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// write writes the frames of batch and flushes them.
func (t *Transport) write(conn net.Conn, w *bufio.Writer, batch []outbound) error {
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for _, m := range batch {
		if _, err := w.Write(m.frame); err != nil {
			return err
		}
	}
	return w.Flush()
}

func (t *Transport) warn(kind string, peer uint64, err error) {
	if ok, n := t.limiter.Allow(kind, time.Now()); ok {
		t.log.Warn().Err(err).Uint64("peer", peer).Int("suppressed", n).Msgf("raft transport: %s failed", kind)
	}
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-t.closec:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.warn("accept", 0, err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		if t.mu.closed {
			t.mu.Unlock()
			_ = c.Close()
			return
		}
		// Each peer needs one inbound connection; a few more cover
		// reconnections whose old connection is not closed yet.
		if limit := 4*len(t.mu.peers) + 4; len(t.mu.inbound) >= limit {
			peers := len(t.mu.peers)
			t.mu.Unlock()
			t.warn("accept", 0, fmt.Errorf("%d inbound connections are open, the most %d peers need; refusing %s", limit, peers, c.RemoteAddr()))
			_ = c.Close()
			continue
		}
		t.mu.inbound[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go t.readLoop(c)
	}
}

// readLoop reads one inbound connection until it fails or breaks the
// protocol; either closes this connection only.
func (t *Transport) readLoop(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.mu.inbound, c)
		t.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	from, v2, err := t.readHello(c, r)
	if err != nil {
		t.warn("handshake", from, err)
		return
	}
	heard := t.heardCounter(from)
	for {
		var err error
		if v2 {
			err = t.readFrame(r, from, t.dispatch)
		} else {
			var m *raftpb.Message
			if m, err = t.readMessage(r, from); err == nil {
				err = t.dispatch(0, m)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errPeerRemoved) {
				t.warn("read", from, err)
			}
			return
		}
		heard.Add(1)
	}
}

var errPeerRemoved = errors.New("peer removed")

// dispatch hands m to its group's receiver, unless its sender was removed
// from the group since it connected.
func (t *Transport) dispatch(group uint64, m *raftpb.Message) error {
	if t.peer(m.GetFrom()) == nil {
		return errPeerRemoved
	}
	if group == 0 {
		t.receiver.Load().r.Step(m)
	} else if g := t.groups.Load(); g != nil {
		g.g.StepGroup(group, m)
	}
	return nil
}

// readHello reads and checks the hello; v2 tells the stream's version.
func (t *Transport) readHello(c net.Conn, r *bufio.Reader) (uint64, bool, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hello [helloSize]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil {
		return 0, false, fmt.Errorf("read the hello from %s: %w", c.RemoteAddr(), err)
	}
	_ = c.SetReadDeadline(time.Time{})
	v2 := [8]byte(hello[:8]) == helloMagicV2
	if [8]byte(hello[:8]) != helloMagic && !v2 {
		return 0, false, fmt.Errorf("%s is not a raft peer of this cluster (bad magic); check its inter-broker address", c.RemoteAddr())
	}
	from, err := t.checkHello(c, hello)
	return from, v2, err
}

func (t *Transport) checkHello(c net.Conn, hello [helloSize]byte) (uint64, error) {
	from, to := binary.BigEndian.Uint64(hello[8:]), binary.BigEndian.Uint64(hello[16:])
	if to != t.cfg.ID {
		return from, fmt.Errorf("peer %d at %s dialed node %d, this is node %d; check cluster-peers on both", from, c.RemoteAddr(), to, t.cfg.ID)
	}
	if t.peer(from) == nil {
		return from, fmt.Errorf("node %d at %s is not in this node's peer list; check cluster-peers", from, c.RemoteAddr())
	}
	inc := binary.BigEndian.Uint64(hello[24:])
	if inc == 0 {
		return from, nil // not known (a tool, not a node)
	}
	t.mu.Lock()
	prev := t.mu.incarnations[from]
	t.mu.incarnations[from] = inc
	t.mu.Unlock()
	if prev != 0 && prev != inc {
		t.log.Warn().Uint64("peer", from).Msg("raft peer came back with a new incarnation: its data directory was wiped")
		t.receiver.Load().r.PeerLostState(from)
		if g := t.groups.Load(); g != nil {
			g.g.PeerLostState(from)
		}
	}
	return from, nil
}

// readMessage reads one version-1 frame.
func (t *Transport) readMessage(r *bufio.Reader, from uint64) (*raftpb.Message, error) {
	body, err := t.readBody(r, from, 1)
	if err != nil {
		return nil, err
	}
	return t.decodeMessage(body, from)
}

// readBody reads one frame's length and body; a body shorter than minimum
// or longer than MaxFrameBytes is an error.
func (t *Transport) readBody(r *bufio.Reader, from uint64, minimum uint32) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < minimum || int64(n) > int64(t.cfg.MaxFrameBytes) {
		return nil, fmt.Errorf("frame of %d bytes from peer %d (at least %d, limit %d)", n, from, minimum, t.cfg.MaxFrameBytes)
	}
	// The buffer grows with the bytes that arrive, not with the length a
	// peer claims.
	var body bytes.Buffer
	if _, err := io.CopyN(&body, r, int64(n)); err != nil {
		return nil, err
	}
	return body.Bytes(), nil
}

// readFrame reads one version-2 frame and hands each of its messages to
// deliver, with its group.
func (t *Transport) readFrame(r *bufio.Reader, from uint64, deliver func(group uint64, m *raftpb.Message) error) error {
	body, err := t.readBody(r, from, 9)
	if err != nil {
		return err
	}
	group := binary.BigEndian.Uint64(body)
	if group != heartbeatsGroup {
		m, err := t.decodeMessage(body[8:], from)
		if err != nil {
			return err
		}
		return deliver(group, m)
	}
	if len(body) < 12 {
		return fmt.Errorf("coalesced heartbeats from peer %d: %d bytes, no count", from, len(body))
	}
	count := binary.BigEndian.Uint32(body[8:])
	recs := body[12:]
	if uint64(len(recs)) != uint64(count)*heartbeatSize {
		return fmt.Errorf("coalesced heartbeats from peer %d: %d bytes for %d heartbeats", from, len(recs), count)
	}
	for ; len(recs) > 0; recs = recs[heartbeatSize:] {
		g := binary.BigEndian.Uint64(recs)
		typ := raftpb.MsgHeartbeat
		switch recs[8] {
		case 0:
		case 1:
			typ = raftpb.MsgHeartbeatResp
		default:
			return fmt.Errorf("coalesced heartbeats from peer %d: unknown kind %d", from, recs[8])
		}
		m := &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(t.cfg.ID), Term: new(binary.BigEndian.Uint64(recs[9:]))}
		if typ == raftpb.MsgHeartbeat {
			m.Commit = new(binary.BigEndian.Uint64(recs[17:]))
		}
		if err := deliver(g, m); err != nil {
			return err
		}
	}
	return nil
}

func (t *Transport) decodeMessage(body []byte, from uint64) (*raftpb.Message, error) {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("undecodable message from peer %d: %w", from, err)
	}
	if m.GetFrom() != from || m.GetTo() != t.cfg.ID || raft.IsLocalMsg(m.GetType()) {
		return nil, fmt.Errorf("peer %d sent a %s from %d to %d over its stream to node %d", from, m.GetType(), m.GetFrom(), m.GetTo(), t.cfg.ID)
	}
	return m, nil
}
