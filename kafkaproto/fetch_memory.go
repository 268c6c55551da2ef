package kafkaproto

// Fetch responses charged to the request memory budget (memory.go).
//
// A fetch response holds its records in the partitions' read buffers from
// its read until the writer has written it (fetch_wire.go writes from those
// buffers). Without a charge, max-connections consumers asking for 64 MiB
// each could make the broker hold that many responses whatever the budget.
// So each read of a fetch first reserves its response's byte limit from
// the budget, or what is free of it, without waiting (reserveUpTo), reads
// within what it got, and then keeps charged exactly the record bytes it
// read: the rest goes back at once, and a first batch read whole past the
// grant (KIP-74: a consumer always makes progress) is charged as overdraft
// (chargeOver). The charge is given back once the response is written or
// dropped (reply.done, on the writer).
//
// Why a fetch never waits for memory: see reserveUpTo. And a long poll
// holds only the bytes it has read (fewer than its min_bytes), not its
// limit: each read gives back what the last one held before reserving.
//
// The overdraft is kept beside the budget's used bytes, where no waiting
// request waits for it (memory.go): else continuous consumers, each holding
// one batch past the budget, could starve a request of max-request-bytes.
//
// Invariants:
//   - charge.held() is what the fetch holds of requestMemory.fetchInUse;
//     it is 0 once done ran, whatever happened to the connection.
//   - After a read, charge.held() == heldRecordBytes(items), and
//     charge.over > 0 only if charge.granted is all the budget gave.

import "github.com/twmb/franz-go/pkg/kmsg"

// fetchCharge is one fetch response's share of the request memory budget:
// granted bytes (reserveUpTo, in the budget's used) and the overdraft
// beyond them (chargeOver). Only the connection's writer uses it (finish,
// then done).
type fetchCharge struct {
	mem     *requestMemory
	granted int64
	over    int64
	shrunk  bool // counted once in requestMemory.fetchShrunk
}

// settle makes the charge n bytes: of the grant it keeps at most n and
// gives back the rest; what n exceeds the grant by is the overdraft.
func (c *fetchCharge) settle(n int64) {
	if n < c.granted {
		c.mem.releaseFetch(c.granted - n)
		c.granted = n
	}
	over := n - c.granted
	switch {
	case over > c.over:
		c.mem.chargeOver(over - c.over)
	case over < c.over:
		c.mem.releaseOver(c.over - over)
	}
	c.over = over
}

// held is the bytes the response holds: grant and overdraft.
func (c *fetchCharge) held() int64 { return c.granted + c.over }

// release gives the whole charge back; reply.done of a Fetch.
func (c *fetchCharge) release() { c.settle(0) }

// charge makes the charge n bytes, from the free budget as far as it goes
// (reserveUpTo), the rest as overdraft: for a response read before it
// could be shrunk (ShareFetch).
func (c *fetchCharge) charge(n int64) {
	c.settle(0)
	c.granted = c.mem.reserveUpTo(n)
	c.settle(n)
}

// readFetchCharged is readFetchItems within the budget: it gives back what
// the last read held, reserves the response's byte limit or what is free of
// it, reads within that (the first batch whole regardless, KIP-74), and
// keeps charged exactly the record bytes read.
func (s *Server) readFetchCharged(req *kmsg.FetchRequest, items []*fetchItem, c *fetchCharge) (int, bool) {
	c.settle(0)
	want := fetchResponseLimit(req)
	got := c.mem.reserveUpTo(int64(want))
	c.granted = got
	if got < int64(want) && !c.shrunk {
		c.shrunk = true
		c.mem.fetchShrunk.Add(1)
	}
	total, anyErr := s.readFetchWithin(req, items, int(got))
	c.settle(heldRecordBytes(items))
	return total, anyErr
}

// shareRecordBytes is the record bytes a ShareFetch response holds.
// ShareFetch's records are charged once read, but its limit is not shrunk
// to the budget: they are acquired before they are read, and records
// acquired but left out of the response would stay locked, undelivered,
// until their acquisition lock expires.
func shareRecordBytes(resp *kmsg.ShareFetchResponse) int64 {
	n := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			n += len(resp.Topics[i].Partitions[j].Records)
		}
	}
	return int64(n)
}

// heldRecordBytes is the record bytes the items hold for the response.
func heldRecordBytes(items []*fetchItem) int64 {
	n := 0
	for _, it := range items {
		n += len(it.records)
	}
	return int64(n)
}
