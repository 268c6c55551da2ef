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
// node that dialed to the node that accepted. It opens with a 24-byte
// hello, then frames:
//
//	hello: magic "VMQRAFT1" [8] | from u64 | to u64 | incarnation u64
//	frame: length u32 | protobuf raftpb.Message [length]
//
// The receiver checks the hello (magic, to = itself, from a known peer) and
// every message (From = the hello's from, To = itself, a message type peers
// send); anything else closes that connection only. A hello whose
// incarnation differs from the one the peer announced before means the
// peer lost its Raft state (a wiped data directory): the receiver is told
// (PeerLostState).
var helloMagic = [8]byte{'V', 'M', 'Q', 'R', 'A', 'F', 'T', '1'}

const helloSize = 32

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
	}
	wg     sync.WaitGroup
	closec chan struct{}
}

type receiverBox struct{ r Receiver }

// Filter decides, for tests, whether a message may leave (true) or is
// dropped as if the network lost it (false).
type Filter func(m *raftpb.Message) bool

type outbound struct {
	to    uint64
	frame []byte
	snap  bool
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

// Start accepts the peers' connections, handing their messages to r, and
// starts one sender per peer.
func (t *Transport) Start(r Receiver) {
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

// Send queues msgs for their peers. It encodes them here, on the caller's
// goroutine (the node's loop), so no message is read while Raft may change
// it. A full queue or an unknown peer drops the message.
func (t *Transport) Send(msgs []*raftpb.Message) {
	f := t.filter.Load()
	r := t.receiver.Load()
	for _, m := range msgs {
		if f != nil && !(*f)(m) {
			continue
		}
		p := t.peer(m.GetTo())
		if p == nil {
			continue
		}
		body, err := proto.Marshal(m)
		if err != nil {
			t.log.Error().Err(err).Stringer("type", m.GetType()).Msg("cannot encode a raft message; dropped")
			continue
		}
		frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
		frame = append(frame, body...)
		snap := m.GetType() == raftpb.MsgSnap
		select {
		case p.queue <- outbound{to: p.id, frame: frame, snap: snap}:
		default:
			if r != nil {
				t.reportFailure(r.r, p.id, snap)
			}
		}
	}
}

func (t *Transport) reportFailure(r Receiver, to uint64, snap bool) {
	r.ReportUnreachable(to)
	if snap {
		r.ReportSnapshot(to, raft.SnapshotFailure)
	}
}

// sendLoop owns the outbound connection to p: it dials when a message is
// waiting (no sooner than the backoff allows), writes, and on any failure
// drops the connection and the message and reports the peer unreachable.
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
	r := t.receiver.Load().r
	// Connect at once, so that the peer learns this node's incarnation
	// before this node has anything to say.
	if c, err := t.dial(p); err == nil {
		conn, w = c, bufio.NewWriterSize(c, 64<<10)
	}
	for {
		var m outbound
		select {
		case m = <-p.queue:
		case <-t.closec:
			return
		case <-p.stopc:
			return
		}
		if conn == nil {
			if time.Now().Before(nextDial) {
				t.reportFailure(r, p.id, m.snap)
				continue
			}
			c, err := t.dial(p)
			if err != nil {
				backoff = min(max(2*backoff, t.cfg.BackoffMin), t.cfg.BackoffMax)
				nextDial = time.Now().Add(backoff)
				t.warn("dial", p.id, err)
				t.reportFailure(r, p.id, m.snap)
				continue
			}
			backoff = 0
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
		}
		if err := t.write(conn, w, m); err != nil {
			t.warn("write", p.id, err)
			_ = conn.Close()
			conn, w = nil, nil
			t.reportFailure(r, p.id, m.snap)
			continue
		}
		if m.snap {
			r.ReportSnapshot(p.id, raft.SnapshotFinish)
		}
	}
}

func (t *Transport) dial(p *peer) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", p.addr, t.cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	hello := make([]byte, 0, helloSize)
	hello = append(hello, helloMagic[:]...)
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

// write writes and flushes one frame.
func (t *Transport) write(conn net.Conn, w *bufio.Writer, m outbound) error {
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.Write(m.frame); err != nil {
		return err
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
	from, err := t.readHello(c, r)
	if err != nil {
		t.warn("handshake", from, err)
		return
	}
	recv := t.receiver.Load().r
	for {
		m, err := t.readMessage(r, from)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.warn("read", from, err)
			}
			return
		}
		if t.peer(from) == nil {
			return // removed from the group since it connected
		}
		recv.Step(m)
	}
}

func (t *Transport) readHello(c net.Conn, r *bufio.Reader) (uint64, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hello [helloSize]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil {
		return 0, fmt.Errorf("read the hello from %s: %w", c.RemoteAddr(), err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if [8]byte(hello[:8]) != helloMagic {
		return 0, fmt.Errorf("%s is not a raft peer of this cluster (bad magic); check its inter-broker address", c.RemoteAddr())
	}
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
	}
	return from, nil
}

func (t *Transport) readMessage(r *bufio.Reader, from uint64) (*raftpb.Message, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n == 0 || int64(n) > int64(t.cfg.MaxFrameBytes) {
		return nil, fmt.Errorf("frame of %d bytes from peer %d (limit %d)", n, from, t.cfg.MaxFrameBytes)
	}
	// The buffer grows with the bytes that arrive, not with the length a
	// peer claims.
	var body bytes.Buffer
	if _, err := io.CopyN(&body, r, int64(n)); err != nil {
		return nil, err
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(body.Bytes(), m); err != nil {
		return nil, fmt.Errorf("undecodable message from peer %d: %w", from, err)
	}
	if m.GetFrom() != from || m.GetTo() != t.cfg.ID || raft.IsLocalMsg(m.GetType()) {
		return nil, fmt.Errorf("peer %d sent a %s from %d to %d over its stream to node %d", from, m.GetType(), m.GetFrom(), m.GetTo(), t.cfg.ID)
	}
	return m, nil
}
