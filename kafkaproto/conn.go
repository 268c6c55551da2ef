package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

// request is one decoded request and the connection it came on.
type request struct {
	c        *conn
	key      int16
	version  int16
	corr     int32
	clientID string
	kreq     kmsg.Request
}

// queued is a reply waiting its turn on the writer.
type queued struct {
	corr    int32
	version int16
	key     int16
	reply   reply
	// reserved is the request memory (Server.memory) held for the
	// request's body; the writer releases it once the reply is written or
	// dropped, when nothing can refer to the body any more (kmsg's
	// decoders alias the body: Produce records, group protocol metadata).
	reserved int64
	start    time.Time // request decoded, for broker_kafka_request_duration_seconds
	// rawReply: raw is a bare SASL token answering a v0 handshake's
	// exchange (sasl.go), written with only its length prefix.
	rawReply bool
	raw      []byte
}

// conn is one client connection: a reader goroutine that decodes requests
// and runs handlers in order, and a writer goroutine that finishes replies
// and writes them in the same order. The replies channel bounds how many
// requests may be in flight; when it is full the reader stops reading.
type conn struct {
	s   *Server
	nc  net.Conn
	ip  netip.Addr // counted in Server.perIP until the connection ends
	log zerolog.Logger
	// listener is the listener the connection came in on (listener.go).
	listener *Listener
	// principal is who the client is ("User:name"): from SASL or the
	// client certificate, else User:ANONYMOUS. sasl is the SASL state
	// (sasl.go). Only the reader goroutine (and so handlers) uses both.
	principal string
	// host is the client's IP address as ACL bindings name it.
	host    string
	sasl    saslState
	replies chan queued
	// readDone is closed when the reader stops: the client closed the
	// connection, sent bytes we refuse, or the server is shutting down.
	// Replies still waiting (long polls) give up then.
	readDone chan struct{}
	// stop is closed by stopReading: a reader waiting for request memory
	// gives up.
	stop     chan struct{}
	stopOnce sync.Once
	// shareSessions are the share sessions (KIP-932) opened on this
	// connection; they close with it. Only the reader goroutine uses it.
	shareSessions map[shareSessionRef]uint64
	// quota caches the client's quota sensors (quotas.go); reader only.
	quota connQuota
	// mutedUntil is when a throttled connection may be read again, in
	// Unix nanoseconds (quotas.go); set by the reader and, for Fetch, the
	// writer.
	mutedUntil atomic.Int64
	// kept is the body buffer of the last large Produce frame, for the
	// next one (buffers.go).
	kept keptBody
	// fw is the writer's Fetch response encoder (fetch_wire.go); writer
	// only.
	fw fetchWire

	// dl decides the read deadline. The reader, the writer and Shutdown
	// all set it, so every SetReadDeadline happens under dl, and the
	// deadline always matches the state:
	//   - stopped: now (Shutdown); nothing moves it later.
	//   - inFrame (the first byte of a frame has been read):
	//     request-read-timeout after that byte, plus the time the reader
	//     waited for the frame's memory.
	//   - otherwise, outstanding == 0: connections-max-idle after the last
	//     byte read or the last reply written, whichever is later.
	//   - otherwise (replies outstanding, e.g. a long poll): none; the
	//     writer arms the idle deadline when the last reply is written.
	dl struct {
		sync.Mutex
		stopped     bool
		inFrame     bool
		outstanding int // requests dispatched whose replies are not written
	}
}

func newConn(s *Server, nc net.Conn, ip netip.Addr, l *Listener) *conn {
	return &conn{
		s:         s,
		nc:        nc,
		ip:        ip,
		listener:  l,
		principal: auth.Anonymous,
		host:      ip.String(),
		log:       s.log.With().Str("remote", nc.RemoteAddr().String()).Logger(),
		replies:   make(chan queued, s.cfg.MaxInflightRequests),
		readDone:  make(chan struct{}),
		stop:      make(chan struct{}),
	}
}

// stopReading makes the reader return at its next read (or while it waits
// for request memory); in-flight replies are still written.
func (c *conn) stopReading() {
	c.dl.Lock()
	c.dl.stopped = true
	_ = c.nc.SetReadDeadline(time.Now())
	c.dl.Unlock()
	c.stopOnce.Do(func() { close(c.stop) })
}

// armIdle arms the idle deadline before the first byte of a request. It
// returns false once stopReading was called.
func (c *conn) armIdle() bool {
	c.dl.Lock()
	defer c.dl.Unlock()
	if c.dl.stopped {
		return false
	}
	c.dl.inFrame = false
	var deadline time.Time
	if c.dl.outstanding == 0 {
		deadline = time.Now().Add(c.s.cfg.ConnectionsMaxIdle)
	}
	_ = c.nc.SetReadDeadline(deadline)
	return true
}

// armFrame sets the deadline for completing the current frame. It returns
// false once stopReading was called.
func (c *conn) armFrame(deadline time.Time) bool {
	c.dl.Lock()
	defer c.dl.Unlock()
	if c.dl.stopped {
		return false
	}
	c.dl.inFrame = true
	_ = c.nc.SetReadDeadline(deadline)
	return true
}

// beginRequest counts a request whose reply the writer will handle.
func (c *conn) beginRequest() {
	c.dl.Lock()
	c.dl.outstanding++
	c.dl.Unlock()
}

// endRequest runs on the writer once a reply is written or dropped: it
// releases the request's memory and, when it was the last outstanding reply
// and the reader waits for a new request, arms the idle deadline.
func (c *conn) endRequest(reserved int64) {
	c.s.memory.release(reserved)
	c.dl.Lock()
	c.dl.outstanding--
	if c.dl.outstanding == 0 && !c.dl.inFrame && !c.dl.stopped {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
	}
	c.dl.Unlock()
}

// errFrame marks a request that is not a well-formed frame.
var errFrame = errors.New("malformed request")

// errStopped ends a read that stopReading interrupted.
var errStopped = errors.New("connection stopped reading")

func (c *conn) readLoop() {
	defer close(c.replies)
	defer close(c.readDone)
	defer c.closeShareSessions()
	defer c.kept.close()
	if !c.startTLS() {
		return
	}
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		if !c.waitMuted() {
			return
		}
		body, reserved, ok := c.readFrame(br)
		if !ok {
			return
		}
		if !c.serveFrame(body, reserved) {
			return
		}
	}
}

// readFrame reads the next request frame: it waits for the first byte
// within connections-max-idle, then for the whole frame within
// request-read-timeout, checks the claimed size, and reserves it from the
// broker-wide request memory. ok is false when the connection must close
// (nothing is reserved then).
func (c *conn) readFrame(br *bufio.Reader) (body []byte, reserved int64, ok bool) {
	var sizeBuf [4]byte
	if !c.armIdle() {
		return nil, 0, false
	}
	first, err := br.ReadByte()
	if err != nil {
		c.logReadEnd(err)
		return nil, 0, false
	}
	// From its first byte on, the frame must be complete within
	// request-read-timeout (plus any time spent waiting for memory).
	frameDeadline := time.Now().Add(c.s.cfg.RequestReadTimeout)
	if !c.armFrame(frameDeadline) {
		return nil, 0, false
	}
	sizeBuf[0] = first
	if _, err := io.ReadFull(br, sizeBuf[1:]); err != nil {
		c.logReadEnd(err)
		return nil, 0, false
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if c.listener.TLS == nil && looksLikeTLS(sizeBuf[:]) {
		c.log.Warn().Str("listener", c.listener.Name).Msg("closing connection: " + errTLSOnPlaintext.Error() + "; the client must use security.protocol " + string(c.listener.Protocol) + " on this port")
		c.s.metrics.badRequests.Inc()
		return nil, 0, false
	}
	// Check the claimed size before reserving or allocating anything for it.
	if maxSize := c.maxFrameBytes(); size < c.minFrameBytes() || size > maxSize {
		c.log.Warn().Int32("size", size).Int32("max_request_bytes", maxSize).Bool("authenticated", c.sasl.authenticated || !c.listener.Protocol.SASL()).Msg("closing connection: request size out of range")
		c.s.metrics.badRequests.Inc()
		return nil, 0, false
	}
	// Reserve the claimed size from the broker-wide budget, all or
	// nothing, before the frame can cost more than initialBodyBytes:
	// small frames before their body is read, larger ones once their
	// first initialBodyBytes have arrived (so a peer that claims 100 MiB
	// and sends 4 KiB reserves nothing). While the budget is used up
	// nothing more is read from this socket. Waiting is not the peer's
	// fault: the frame deadline moves by the time waited.
	reserve := func() error {
		start := time.Now()
		if !c.s.memory.acquire(int64(size), c.stop) {
			return errStopped
		}
		reserved = int64(size)
		if waited := time.Since(start); waited > time.Millisecond {
			frameDeadline = frameDeadline.Add(waited)
			if !c.armFrame(frameDeadline) {
				return errStopped
			}
		}
		return nil
	}
	if int(size) <= initialBodyBytes {
		if err := reserve(); err != nil {
			c.s.memory.release(reserved)
			return nil, 0, false
		}
	}
	// A peer claiming 100 MiB and sending 4 KiB costs 64 KiB, not 100 MiB:
	// the buffer of the claimed size is allocated once it is reserved. A
	// large frame uses the buffer kept from the last one, if any.
	var kept []byte
	if int(size) > initialBodyBytes {
		kept = c.kept.take()
	}
	body, err = readBody(br, int(size), kept, reserve)
	if err != nil {
		c.s.memory.release(reserved)
		if !errors.Is(err, errStopped) {
			c.logReadEnd(err)
		}
		return nil, 0, false
	}
	return body, reserved, true
}

// serveFrame decodes one frame, checks it may be served on this
// connection now, runs its handler and queues its reply, which releases
// the reservation once written. It reports whether to read on.
func (c *conn) serveFrame(body []byte, reserved int64) bool {
	if c.sasl.raw {
		ok := c.handleRawToken(body)
		putBuffer(body)
		c.s.memory.release(reserved)
		return ok
	}
	r, err := c.decode(body)
	if err != nil {
		c.s.memory.release(reserved)
		c.log.Warn().Err(err).Msg("closing connection: undecodable request")
		c.s.metrics.badRequests.Inc()
		return false
	}
	if r == nil {
		// Answered already (ApiVersions fallback); that reply does not
		// refer to the body.
		c.s.memory.release(reserved)
		return true
	}
	if err := c.admit(r); err != nil {
		c.s.memory.release(reserved)
		c.log.Warn().Err(err).Str("listener", c.listener.Name).Msg("closing connection: request not allowed")
		c.s.metrics.badRequests.Inc()
		return false
	}
	if !c.waitMuted() {
		// Read while a fetch's throttle began on the writer.
		c.s.memory.release(reserved)
		return false
	}
	reg := registry[r.key]
	start := time.Now()
	c.s.metrics.requests.WithLabelValues(apiName(r.key)).Inc()
	rep, err := c.dispatch(reg, r)
	if err != nil {
		c.s.memory.release(reserved)
		c.log.Warn().Err(err).Int16("api_key", r.key).Int16("version", r.version).Msg("closing connection: request cannot be served")
		return false
	}
	var throttle time.Duration
	if c.s.cfg.Quotas.Any() {
		throttle = c.applyQuotas(r, &rep, len(body), time.Since(start))
	}
	if r.key == int16(kmsg.Produce) {
		// Append copied every batch into the store's write batch; nothing
		// refers to the request bytes any more: the buffer is kept for the
		// connection's next frame. The reservation is still held until the
		// reply is written: simple and conservative.
		c.kept.keep(body)
	}
	c.beginRequest()
	c.replies <- queued{corr: r.corr, version: r.version, key: r.key, reply: rep, reserved: reserved, start: start}
	if throttle > 0 {
		// KIP-219: the reply goes out first; the next request is read
		// once the throttle time is over.
		c.muteFor(throttle)
	}
	return !c.sasl.closeAfterReply
}

// dispatch runs a handler, turning a panic into a closed connection so a
// bug reached by one client's bytes never takes the broker down.
func (c *conn) dispatch(reg *registration, r *request) (rep reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error().Interface("panic", p).Int16("api_key", r.key).Int16("version", r.version).Msg("handler panicked; closing the connection")
			c.s.metrics.panics.Inc()
			err = fmt.Errorf("internal error serving api key %d", r.key)
		}
	}()
	return reg.handle(c.s, r)
}

func (c *conn) logReadEnd(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.dl.Lock()
		stopped, inFrame := c.dl.stopped, c.dl.inFrame
		c.dl.Unlock()
		switch {
		case stopped:
			// Shutdown.
		case inFrame:
			c.s.metrics.timeouts.WithLabelValues("request_read").Inc()
			c.s.warnLimited("request_read_timeout", func(e *zerolog.Event) {
				e.Str("remote", c.nc.RemoteAddr().String()).Dur("request_read_timeout", c.s.cfg.RequestReadTimeout).
					Msg("closing connection: request not completed within request-read-timeout")
			})
		default:
			c.s.metrics.timeouts.WithLabelValues("idle").Inc()
			c.log.Debug().Dur("connections_max_idle", c.s.cfg.ConnectionsMaxIdle).Msg("closing idle connection")
		}
		return
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		c.log.Debug().Msg("connection closed in the middle of a request")
		return
	}
	c.log.Debug().Err(err).Msg("read ended")
}

// decode parses the request header and body. Unknown keys and versions
// outside the registered range are errors, except ApiVersions, which is
// answered in its v0 form per KIP-511 so the client can pick a version.
func (c *conn) decode(body []byte) (*request, error) {
	rd := kbin.Reader{Src: body}
	key := rd.Int16()
	version := rd.Int16()
	corr := rd.Int32()
	clientID := rd.NullableString()
	if !rd.Ok() {
		return nil, fmt.Errorf("%w: truncated header", errFrame)
	}
	reg := registry[key]
	if reg == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", errFrame, key)
	}
	if version < reg.minVersion || version > reg.maxVersion {
		if key == int16(kmsg.ApiVersions) {
			c.beginRequest()
			c.replies <- queued{corr: corr, version: 0, key: key, reply: reply{resp: unsupportedApiVersions()}}
			return nil, nil
		}
		return nil, fmt.Errorf("%w: api key %d version %d is not supported (supported %d-%d)", errFrame, key, version, reg.minVersion, reg.maxVersion)
	}
	kreq := kmsg.RequestForKey(key)
	kreq.SetVersion(version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return nil, fmt.Errorf("%w: truncated header tags", errFrame)
		}
	}
	if err := decodeBody(kreq, rd.Src); err != nil {
		return nil, fmt.Errorf("%w: api key %d v%d: %v", errFrame, key, version, err)
	}
	r := &request{c: c, key: key, version: version, corr: corr, kreq: kreq}
	if clientID != nil {
		r.clientID = *clientID
	}
	return r, nil
}

// decodeBody runs kmsg's decoder, converting a panic on hostile bytes into
// an error.
func decodeBody(kreq kmsg.Request, b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoder panic: %v", p)
		}
	}()
	return kreq.ReadFrom(b)
}

func (c *conn) writeLoop() {
	defer c.nc.Close()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	broken := false
	for q := range c.replies {
		buf = c.writeReply(bw, buf, &broken, q)
		if q.reply.done != nil {
			q.reply.done()
		}
		c.endRequest(q.reserved)
	}
	if !broken {
		_ = c.setWriteDeadline()
		_ = bw.Flush()
	}
}

// writeReply finishes and writes one reply and returns the (possibly
// regrown) encoding buffer. After a write error it only runs finish steps:
// they must run (they wait for appends).
func (c *conn) writeReply(bw *bufio.Writer, buf []byte, broken *bool, q queued) []byte {
	if q.reply.finish != nil {
		q.reply.finish()
	}
	if !q.start.IsZero() {
		c.s.metrics.duration.WithLabelValues(apiName(q.key)).Observe(time.Since(q.start).Seconds())
	}
	if q.reply.none || *broken {
		if q.reply.release != nil {
			q.reply.release() // never encoded: nothing refers to its buffers
		}
		return buf
	}
	if q.rawReply {
		return c.writeRawToken(bw, buf, broken, q.raw) // sasl.go
	}
	if fr, ok := q.reply.resp.(*kmsg.FetchResponse); ok && q.key == int16(kmsg.Fetch) {
		fr.SetVersion(q.version)
		if plainFetchResponse(fr) {
			return c.dropLargeBuffer(c.writeFetchReply(bw, buf, broken, q))
		}
	}
	if q.reply.size != nil {
		if need := q.reply.size() + 64; cap(buf) < need {
			putBuffer(buf)
			buf = getBuffer(need)
		}
	}
	buf = buf[:0]
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(q.corr))
	resp := q.reply.resp
	resp.SetVersion(q.version)
	// The ApiVersions response header is never flexible (KIP-511).
	if resp.IsFlexible() && q.key != int16(kmsg.ApiVersions) {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	if q.reply.release != nil {
		q.reply.release()
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	c.s.metrics.bytesOut.Add(float64(len(buf)))
	_ = c.setWriteDeadline()
	if _, err := bw.Write(buf); err != nil {
		c.writeFailed(err, broken)
		return buf
	}
	if len(c.replies) == 0 {
		if err := bw.Flush(); err != nil {
			c.writeFailed(err, broken)
			return buf
		}
	}
	return c.dropLargeBuffer(buf)
}

// dropLargeBuffer returns buf, or nil after pooling it when it is large and
// no reply waits: a large response buffer is not pinned to an idle
// connection.
func (c *conn) dropLargeBuffer(buf []byte) []byte {
	if cap(buf) > 1<<20 && len(c.replies) == 0 {
		putBuffer(buf)
		return nil
	}
	return buf
}

// setWriteDeadline gives the next write connections-max-idle to complete:
// a peer that stops reading its replies is idle too (Kafka closes a
// connection without reads or writes for connections.max.idle.ms), and must
// not pin its replies and its request memory forever.
func (c *conn) setWriteDeadline() error {
	return c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
}

// writeFailed closes the connection after a failed write, which unblocks
// the reader; a write that timed out is counted.
func (c *conn) writeFailed(err error, broken *bool) {
	*broken = true
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.s.metrics.timeouts.WithLabelValues("write").Inc()
		c.log.Debug().Dur("connections_max_idle", c.s.cfg.ConnectionsMaxIdle).Msg("closing connection: the client read no reply for connections-max-idle")
	}
	_ = c.nc.Close()
}
