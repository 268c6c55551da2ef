package kafkaproto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	start   time.Time // request decoded, for broker_kafka_request_duration_seconds
}

// conn is one client connection: a reader goroutine that decodes requests
// and runs handlers in order, and a writer goroutine that finishes replies
// and writes them in the same order. The replies channel bounds how many
// requests may be in flight; when it is full the reader stops reading.
type conn struct {
	s       *Server
	nc      net.Conn
	log     zerolog.Logger
	replies chan queued
	// readDone is closed when the reader stops: the client closed the
	// connection, sent bytes we refuse, or the server is shutting down.
	// Replies still waiting (long polls) give up then.
	readDone chan struct{}
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{
		s:        s,
		nc:       nc,
		log:      s.log.With().Str("remote", nc.RemoteAddr().String()).Logger(),
		replies:  make(chan queued, s.cfg.MaxInflightRequests),
		readDone: make(chan struct{}),
	}
}

// stopReading makes the reader return at its next read; in-flight replies
// are still written.
func (c *conn) stopReading() { _ = c.nc.SetReadDeadline(time.Now()) }

// errFrame marks a request that is not a well-formed frame.
var errFrame = errors.New("malformed request")

func (c *conn) readLoop() {
	defer close(c.replies)
	defer close(c.readDone)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			c.logReadEnd(err)
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		// Check the claimed size before allocating anything for it.
		if size < 8 || size > c.s.cfg.MaxRequestBytes {
			c.log.Warn().Int32("size", size).Int32("max_request_bytes", c.s.cfg.MaxRequestBytes).Msg("closing connection: request size out of range")
			c.s.metrics.badRequests.Inc()
			return
		}
		body := getBuffer(int(size))
		if _, err := io.ReadFull(br, body); err != nil {
			c.logReadEnd(err)
			return
		}
		r, err := c.decode(body)
		if err != nil {
			c.log.Warn().Err(err).Msg("closing connection: undecodable request")
			c.s.metrics.badRequests.Inc()
			return
		}
		if r == nil {
			continue // answered already (ApiVersions fallback)
		}
		reg := registry[r.key]
		start := time.Now()
		c.s.metrics.requests.WithLabelValues(apiName(r.key)).Inc()
		rep, err := c.dispatch(reg, r)
		if err != nil {
			c.log.Warn().Err(err).Int16("api_key", r.key).Int16("version", r.version).Msg("closing connection: request cannot be served")
			return
		}
		if r.key == int16(kmsg.Produce) {
			// Append copied every batch into the store's write batch; nothing
			// refers to the request bytes any more.
			putBuffer(body)
		}
		c.replies <- queued{corr: r.corr, version: r.version, key: r.key, reply: rep, start: start}
	}
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
		return // Shutdown
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
	if version < reg.advertisedMin || version > reg.maxVersion {
		if key == int16(kmsg.ApiVersions) {
			c.replies <- queued{corr: corr, version: 0, key: key, reply: reply{resp: unsupportedApiVersions()}}
			return nil, nil
		}
		return nil, fmt.Errorf("%w: api key %d version %d is not supported (supported %d-%d)", errFrame, key, version, reg.advertisedMin, reg.maxVersion)
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
		if q.reply.finish != nil {
			q.reply.finish()
		}
		if !q.start.IsZero() {
			c.s.metrics.duration.WithLabelValues(apiName(q.key)).Observe(time.Since(q.start).Seconds())
		}
		if q.reply.none || broken {
			continue
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
		if _, err := bw.Write(buf); err != nil {
			broken = true
			_ = c.nc.Close() // unblocks the reader
			continue
		}
		if len(c.replies) == 0 {
			if err := bw.Flush(); err != nil {
				broken = true
				_ = c.nc.Close()
			}
		}
		if cap(buf) > 1<<20 && len(c.replies) == 0 {
			// Do not pin a large response buffer to an idle connection.
			putBuffer(buf)
			buf = nil
		}
	}
	_ = bw.Flush()
}
