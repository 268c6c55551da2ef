package queues

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/vibemq/broker/pebblestore"
)

// Fuzz targets of every stored queue row and of receipts (STYLE.md rule
// 14): a decoder never panics, a refused input is corruption (or
// invalid_receipt), and what decodes re-encodes to the same bytes. Inputs
// are also fed in two halves (a torn row must be refused or decode to
// something that round-trips). go test runs the seed corpus; go test
// -fuzz=FuzzDecodeState ./queues/ explores.

// stateSeeds are real encodings: what send, receive, nack, ack (retained)
// and a dead-letter copy write.
func stateSeeds() []deliveryState {
	return []deliveryState{
		{State: stateAvailable, Due: t0, Enqueued: t0, Size: 5},
		{State: stateAvailable, Priority: 3, Due: t0 + 5000, Enqueued: t0, ExpireAt: t0 + 60000, Size: 1 << 20},
		{State: stateInflight, Deliveries: 1, Due: t0, Deadline: t0 + 30000, LeaseStart: t0, Enqueued: t0, FirstRecv: t0, Size: 3},
		{State: stateAvailable, Deliveries: 2, Expiries: 1, Nacks: 1, Due: t0 + 9000, Enqueued: t0, FirstRecv: t0, Size: 3, LastError: "boom"},
		{State: stateAcked, Deliveries: 1, Due: t0, Deadline: t0 + 7, LeaseStart: t0, Enqueued: t0, FirstRecv: t0, LastError: "é"},
		{State: stateInflight, Deliveries: 2, Nacks: 1, Due: t0, Deadline: t0 + 30000, LeaseStart: t0, Enqueued: t0, FirstRecv: t0, Size: 3, LastError: "x", Owner: "g\x00member-1"},
	}
}

func feedHalves(raw []byte, f func([]byte)) {
	f(raw)
	f(raw[:len(raw)/2])
	f(raw[len(raw)/2:])
}

func FuzzDecodeState(f *testing.F) {
	for _, s := range stateSeeds() {
		f.Add(s.encode())
	}
	f.Add([]byte{1})
	f.Add([]byte{2, 1, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		feedHalves(raw, func(raw []byte) {
			s, err := decodeState(raw)
			if err != nil {
				if !errors.Is(err, pebblestore.ErrCorruption) {
					t.Fatalf("error %v is not corruption", err)
				}
				return
			}
			if len(s.LastError) > lastErrorMax {
				// encode truncates: the row was not written by this engine,
				// and re-encodes to its truncation.
				again, err := decodeState(rawEncode(s))
				s.LastError = s.LastError[:lastErrorMax]
				if err != nil || again != s {
					t.Fatalf("%+v truncated decodes as %+v, %v", s, again, err)
				}
				return
			}
			if got := rawEncode(s); !bytes.Equal(got, raw) {
				t.Fatalf("%x decodes as %+v, which encodes as %x", raw, s, got)
			}
		})
	})
}

// rawEncode encodes s without the invariants checks of encode, which
// refuse rows the engine never writes (fuzzed rows are any bytes).
func rawEncode(s deliveryState) []byte {
	le := s.LastError
	if len(le) > lastErrorMax {
		le = le[:lastErrorMax]
	}
	c := s
	c.LastError = le
	c.State, c.Deadline = stateAcked, 0 // valid for checkStateRow, restored below
	c.Nacks, c.Expiries, c.Priority = 0, 0, 0
	c.Owner = "" // an owner needs a lease: appended below
	b := c.encode()
	if s.Owner != "" {
		b[0] = 2
		b = append(b, byte(len(s.Owner)>>8), byte(len(s.Owner)))
		b = append(b, s.Owner...)
	}
	// Put back the fields changed to pass the checks: they sit at fixed
	// offsets of the layout.
	b[1], b[2] = s.State, s.Priority
	putU32(b[7:], s.Expiries)
	putU32(b[11:], s.Nacks)
	putU64(b[15+8:], uint64(s.Deadline))
	return b
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}
func putU64(b []byte, v uint64) {
	putU32(b, uint32(v>>32))
	putU32(b[4:], uint32(v))
}

func FuzzDecodeDedup(f *testing.F) {
	f.Add(encodeDedup(dedupEntry{m: msgKey{part: 1, off: 42}, expires: t0 + 300000, bodyHash: dedupIDHash("b"), hasBody: true}))
	f.Add(encodeDedup(dedupEntry{m: msgKey{part: 0, off: 0}, expires: t0})[:dedupEntrySizeV1]) // a row from before body hashes
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		feedHalves(raw, func(raw []byte) {
			d, ok := decodeDedup(raw)
			if !ok {
				if len(raw) == dedupEntrySize || len(raw) == dedupEntrySizeV1 {
					t.Fatalf("a %d-byte dedup row is refused", len(raw))
				}
				return
			}
			got := encodeDedup(d)
			if !d.hasBody {
				got = got[:dedupEntrySizeV1]
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("%x decodes as %+v, which encodes as %x", raw, d, got)
			}
		})
	})
}

func FuzzDecodeMemo(f *testing.F) {
	f.Add((&receiveMemo{deadline: t0 + 30000, items: []memoItem{{m: msgKey{0, 1}, epoch: 1}, {m: msgKey{3, 1 << 40}, epoch: 7}}}).encode())
	f.Add((&receiveMemo{deadline: t0}).encode())
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		feedHalves(raw, func(raw []byte) {
			r, err := decodeMemo(raw)
			if err != nil {
				if !errors.Is(err, pebblestore.ErrCorruption) {
					t.Fatalf("error %v is not corruption", err)
				}
				return
			}
			if got := r.encode(); !bytes.Equal(got, raw) {
				t.Fatalf("%x decodes as %+v, which encodes as %x", raw, r, got)
			}
		})
	})
}

// FuzzDecodeReceipt: a receipt string never panics the parser; one that
// parses is exactly the receipt the engine would give for what it names
// (so two strings never name the same lease: the duplicate_in_request
// check compares strings). Seeds are real receipts of an engine.
func FuzzDecodeReceipt(f *testing.F) {
	e := &Engine{receiptKey: bytes.Repeat([]byte{7}, 32)}
	for _, r := range []receipt{{qid: 1, m: msgKey{0, 0}, epoch: 1}, {qid: 9, m: msgKey{63, 1 << 50}, epoch: 1 << 31}} {
		s := e.encodeReceipt(r)
		f.Add(s)
		raw, _ := base64.RawURLEncoding.DecodeString(s)
		f.Add(base64.RawURLEncoding.EncodeToString(append(raw[:len(raw)-1], raw[len(raw)-1]^1))) // bad hmac
		f.Add(receiptVariant(s))                                                                 // another spelling
	}
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		for _, in := range []string{s, s[:len(s)/2], s[len(s)/2:]} {
			r, err := e.decodeReceipt(in)
			if err != nil {
				if err.Code != CodeInvalidReceipt {
					t.Fatalf("%q: error %v", in, err)
				}
				continue
			}
			if got := e.encodeReceipt(r); got != in {
				t.Fatalf("%q parses as %+v, whose receipt is %q", in, r, got)
			}
		}
	})
}

// FuzzParseID: a message id parses only in its canonical form.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0:0", "3:17", "63:9223372036854775807", "64:1", "-1:2", "01:2", "1:+2", "1:", ":1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseID(s)
		if err != nil {
			if err.Code != CodeInvalidID {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		if m.part < 0 || m.part >= PartitionsMax || m.off < 0 || fmtID(m) != s {
			t.Fatalf("%q parses as %+v", s, m)
		}
	})
}
