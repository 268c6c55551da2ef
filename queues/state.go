package queues

import (
	"encoding/binary"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Message states of a delivery state row. KIP-932 names in parentheses.
const (
	// stateAvailable: waiting for a receiver, ready once due (Available).
	stateAvailable uint8 = 1
	// stateInflight: leased to a receiver until the deadline (Acquired).
	stateInflight uint8 = 2
	// stateAcked: acknowledged and kept for retain_acked_ms (Acknowledged).
	stateAcked uint8 = 3
)

func stateName(s uint8, due, now int64) string {
	switch s {
	case stateAvailable:
		if due > now {
			return "delayed"
		}
		return "ready"
	case stateInflight:
		return "inflight"
	case stateAcked:
		return "acked"
	}
	return "unknown"
}

// deliveryState is the value of a state row (pebblestore 0x33): everything
// the engine knows about one message besides its record in the log.
//
//	version u8 (1) | state u8 | priority u8 | deliveries u32 | expiries u32 |
//	nacks u32 | due i64 | deadline i64 | leaseStart i64 | enqueued i64 |
//	expireAt i64 | firstReceived i64 | size u32 | lastError len u16 | bytes
//
// Version 2 (written only for a message leased to a Kafka share-group
// member, share.go) appends: owner len u16 | bytes. A row without an
// owner is still written as version 1, byte for byte as before.
type deliveryState struct {
	State      uint8
	Priority   uint8
	Deliveries uint32 // receives so far; the epoch of the current lease
	Expiries   uint32 // leases that ran out
	Nacks      uint32
	Due        int64 // available: visible from this time (Unix ms)
	Deadline   int64 // inflight: the lease ends at this time
	LeaseStart int64 // inflight: when the current lease began
	Enqueued   int64 // when the message was sent
	ExpireAt   int64 // explicit TTL end, 0 for none
	FirstRecv  int64 // first receive, 0 before
	Size       uint32
	LastError  string
	// Owner is the Kafka share-group member holding the lease (share.go),
	// "" for a native receiver's lease and for every other state.
	Owner string
}

const stateFixedSize = 3 + 4*3 + 8*6 + 4 + 2

const lastErrorMax = 1024

// ownerMax bounds the owner of a lease (a share group and member ID).
const ownerMax = 1024

func (s *deliveryState) encode() []byte {
	le := s.LastError
	if len(le) > lastErrorMax {
		le = le[:lastErrorMax]
	}
	version := byte(1)
	if s.Owner != "" {
		version = 2
	}
	b := make([]byte, 0, stateFixedSize+len(le)+2+len(s.Owner))
	b = append(b, version, s.State, s.Priority)
	b = binary.BigEndian.AppendUint32(b, s.Deliveries)
	b = binary.BigEndian.AppendUint32(b, s.Expiries)
	b = binary.BigEndian.AppendUint32(b, s.Nacks)
	for _, v := range []int64{s.Due, s.Deadline, s.LeaseStart, s.Enqueued, s.ExpireAt, s.FirstRecv} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = binary.BigEndian.AppendUint32(b, s.Size)
	b = binary.BigEndian.AppendUint16(b, uint16(len(le)))
	b = append(b, le...)
	if version == 2 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s.Owner)))
		b = append(b, s.Owner...)
	}
	if invariantsEnabled {
		checkStateRow(s)
		want := *s
		want.LastError = le
		if got, err := decodeState(b); err != nil || got != want {
			invariantf("state row %+v decodes as %+v, %v", want, got, err)
		}
	}
	return b
}

func decodeState(v []byte) (deliveryState, error) {
	var s deliveryState
	if len(v) < stateFixedSize || v[0] != 1 && v[0] != 2 {
		return s, fmt.Errorf("%w: queue delivery state of %d bytes (version %d)", pebblestore.ErrCorruption, len(v), firstByte(v))
	}
	s.State, s.Priority = v[1], v[2]
	s.Deliveries = binary.BigEndian.Uint32(v[3:])
	s.Expiries = binary.BigEndian.Uint32(v[7:])
	s.Nacks = binary.BigEndian.Uint32(v[11:])
	p := 15
	for _, dst := range []*int64{&s.Due, &s.Deadline, &s.LeaseStart, &s.Enqueued, &s.ExpireAt, &s.FirstRecv} {
		*dst = int64(binary.BigEndian.Uint64(v[p:]))
		p += 8
	}
	s.Size = binary.BigEndian.Uint32(v[p:])
	n := int(binary.BigEndian.Uint16(v[p+4:]))
	p += 6
	if v[0] == 2 {
		if len(v) < p+n+2 {
			return s, fmt.Errorf("%w: queue delivery state of %d bytes ends inside its last error", pebblestore.ErrCorruption, len(v))
		}
		s.LastError = string(v[p : p+n])
		p += n
		o := int(binary.BigEndian.Uint16(v[p:]))
		p += 2
		if o == 0 || len(v) != p+o {
			return s, fmt.Errorf("%w: queue delivery state (version 2) has %d bytes, want %d with a non-empty owner", pebblestore.ErrCorruption, len(v), p+o)
		}
		s.Owner = string(v[p:])
		return s, nil
	}
	if len(v) != p+n {
		return s, fmt.Errorf("%w: queue delivery state has %d bytes, want %d", pebblestore.ErrCorruption, len(v), p+n)
	}
	s.LastError = string(v[p:])
	return s, nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

func u32Bytes(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func decodeU32(v []byte) uint32 {
	if len(v) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}
