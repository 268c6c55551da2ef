package kafkaproto

// The Fetch response on the wire without the copy of its records.
//
// A Fetch response is mostly record batches, which the partitions' read
// buffers already hold. Encoding it with kmsg copies every one of them into
// one response buffer (up to maxFetchResponseBytes), which at 1,000
// partitions and more was most of the consume path's memory and a good part
// of its CPU. fetchWire encodes everything but the record batches into one
// small buffer (meta) and writes the response as the list of meta's pieces
// and the partitions' buffers, with writev (net.Buffers) on a TCP
// connection.
//
// Invariant: the concatenation of the pieces is byte for byte what kmsg's
// FetchResponse.AppendTo writes after the same response header
// (TestFetchWireBytes compares both for every served version). Responses
// with a field this encoder does not write (tagged fields: diverging epoch,
// current leader, snapshot ID, node endpoints, unknown tags) are not
// encoded here: plainFetchResponse sends them to kmsg's encoder.

import (
	"bufio"
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchCut is where a partition's record batches go: after meta[:at].
type fetchCut struct {
	at      int
	records []byte
}

// fetchWire is one Fetch response split into its encoded non-record bytes
// and the record batches between them. It is reused by a connection's
// writer; bufs holds slices of meta and of the partitions' buffers until
// reset.
type fetchWire struct {
	cuts []fetchCut
	bufs net.Buffers
}

// plainFetchResponse reports whether appendFetchMeta encodes resp exactly:
// no tagged field is set.
func plainFetchResponse(resp *kmsg.FetchResponse) bool {
	if len(resp.Brokers) > 0 || resp.UnknownTags.Len() > 0 {
		return false
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 ||
				p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for k := range p.AbortedTransactions {
				if p.AbortedTransactions[k].UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// appendFetchMeta appends resp's encoding (as kmsg.FetchResponse.AppendTo
// at resp.Version) without the record batches' bytes, and records in w.cuts
// where each non-empty one belongs. It returns meta and the record bytes
// left out. REQUIRES: plainFetchResponse(resp).
func (w *fetchWire) appendFetchMeta(meta []byte, resp *kmsg.FetchResponse) ([]byte, int) {
	version := resp.Version
	flex := version >= 12
	w.cuts = w.cuts[:0]
	records := 0
	if version >= 1 {
		meta = kbin.AppendInt32(meta, resp.ThrottleMillis)
	}
	if version >= 7 {
		meta = kbin.AppendInt16(meta, resp.ErrorCode)
		meta = kbin.AppendInt32(meta, resp.SessionID)
	}
	meta = appendLen(meta, len(resp.Topics), flex)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if version >= 13 {
			meta = append(meta, t.TopicID[:]...)
		} else if flex {
			meta = kbin.AppendCompactString(meta, t.Topic)
		} else {
			meta = kbin.AppendString(meta, t.Topic)
		}
		meta = appendLen(meta, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			meta = appendFetchPartition(meta, p, version)
			// Record batches: nullable bytes, never null here when set.
			n := len(p.RecordBatches)
			switch {
			case p.RecordBatches == nil && flex:
				meta = append(meta, 0)
			case p.RecordBatches == nil:
				meta = kbin.AppendInt32(meta, -1)
			case flex:
				meta = kbin.AppendUvarint(meta, uint32(n)+1)
			default:
				meta = kbin.AppendInt32(meta, int32(n))
			}
			if n > 0 {
				w.cuts = append(w.cuts, fetchCut{at: len(meta), records: p.RecordBatches})
				records += n
			}
			if flex {
				meta = append(meta, 0) // partition tags
			}
		}
		if flex {
			meta = append(meta, 0) // topic tags
		}
	}
	if flex {
		meta = append(meta, 0) // response tags
	}
	return meta, records
}

// appendFetchPartition appends a partition's fields before its record
// batches.
func appendFetchPartition(meta []byte, p *kmsg.FetchResponseTopicPartition, version int16) []byte {
	flex := version >= 12
	meta = kbin.AppendInt32(meta, p.Partition)
	meta = kbin.AppendInt16(meta, p.ErrorCode)
	meta = kbin.AppendInt64(meta, p.HighWatermark)
	if version >= 4 {
		meta = kbin.AppendInt64(meta, p.LastStableOffset)
	}
	if version >= 5 {
		meta = kbin.AppendInt64(meta, p.LogStartOffset)
	}
	if version >= 4 {
		at := p.AbortedTransactions
		switch {
		case at == nil && flex:
			meta = append(meta, 0)
		case at == nil:
			meta = kbin.AppendInt32(meta, -1)
		default:
			meta = appendLen(meta, len(at), flex)
		}
		for k := range at {
			meta = kbin.AppendInt64(meta, at[k].ProducerID)
			meta = kbin.AppendInt64(meta, at[k].FirstOffset)
			if flex {
				meta = append(meta, 0)
			}
		}
	}
	if version >= 11 {
		meta = kbin.AppendInt32(meta, p.PreferredReadReplica)
	}
	return meta
}

// appendLen appends an array length: compact (length+1, uvarint) when
// flexible, int32 before.
func appendLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendUvarint(dst, uint32(n)+1)
	}
	return kbin.AppendInt32(dst, int32(n))
}

// vectors returns the response as pieces in wire order: meta between the
// cuts, and the cuts' record batches. The result aliases meta, the record
// buffers and w.bufs.
func (w *fetchWire) vectors(meta []byte) net.Buffers {
	w.bufs = w.bufs[:0]
	prev := 0
	for _, c := range w.cuts {
		w.bufs = append(w.bufs, meta[prev:c.at], c.records)
		prev = c.at
	}
	w.bufs = append(w.bufs, meta[prev:])
	return w.bufs
}

// reset drops the references to the record buffers, so that a pooled
// buffer is never reachable from an idle connection's writer.
func (w *fetchWire) reset() {
	clear(w.cuts)
	w.cuts = w.cuts[:0]
	clear(w.bufs)
	w.bufs = w.bufs[:0]
}

// writeVectorMin is the response size from which the pieces are written
// with writev instead of being copied through the writer's buffer.
const writeVectorMin = 64 << 10

// writeFetchReply writes a Fetch reply whose response is plain (see
// plainFetchResponse): the response header and meta in buf, the record
// batches from the partitions' buffers. It returns buf (possibly regrown).
// The reply's release runs after the write, as the pieces alias the
// buffers it frees.
func (c *conn) writeFetchReply(bw *bufio.Writer, buf []byte, broken *bool, q queued) []byte {
	resp := q.reply.resp.(*kmsg.FetchResponse)
	defer func() {
		c.fw.reset()
		if q.reply.release != nil {
			q.reply.release()
		}
	}()
	buf = append(buf[:0], 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(q.corr))
	if resp.IsFlexible() {
		buf = append(buf, 0)
	}
	buf, records := c.fw.appendFetchMeta(buf, resp)
	size := len(buf) - 4 + records
	binary.BigEndian.PutUint32(buf[:4], uint32(size))
	c.s.metrics.bytesOut.Add(float64(size + 4))
	_ = c.setWriteDeadline()
	bufs := c.fw.vectors(buf)
	var err error
	if _, tcp := c.nc.(*net.TCPConn); tcp && size >= writeVectorMin {
		// What the writer holds goes first, then every piece in
		// one writev (a few when there are more than IOV_MAX).
		if err = bw.Flush(); err == nil {
			_, err = bufs.WriteTo(c.nc)
		}
	} else {
		// TLS, or small: through the buffer, which passes a piece
		// larger than its free space straight to the connection when
		// empty.
		for _, b := range bufs {
			if _, err = bw.Write(b); err != nil {
				break
			}
		}
		if err == nil && len(c.replies) == 0 {
			err = bw.Flush()
		}
	}
	if err != nil {
		c.writeFailed(err, broken)
	}
	return buf
}
