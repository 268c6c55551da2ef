package queues

import (
	"strings"
	"testing"
	"time"
)

// variant returns another spelling of receipt s: base64 without padding
// leaves the low 2 bits of the last character unused, and a lenient
// decoder ignores them.
func receiptVariant(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i^1])
}

// TestReceiptHasOneSpelling: a receipt with the unused bits of its last
// character set is invalid_receipt. When it was accepted, one ack request
// could carry the same receipt twice under two spellings: both passed the
// duplicate_in_request check (it compares strings), both were acked in one
// batch, and the queue's inflight counter went down twice (negative in
// stats, and max_inflight was overshot).
func TestReceiptHasOneSpelling(t *testing.T) {
	en := newEnv(t)
	en.create("q", nil)
	en.send("q", t0, body("a"))
	msgs := en.receive("q", 1, 0, t0)
	r := msgs[0].Receipt
	res, err := en.e.Ack("q", []string{r, receiptVariant(r)}, time.UnixMilli(t0))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != "acked" || res[1].Error == nil || res[1].Error.Code != CodeInvalidReceipt {
		t.Fatalf("ack of a receipt and its other spelling: %+v %+v", res[0], res[1].Error)
	}
	st, err := en.e.Stats("q", time.UnixMilli(t0))
	if err != nil {
		t.Fatal(err)
	}
	if st.Inflight != 0 || st.Totals.Acked != 1 {
		t.Fatalf("after one ack: inflight %d, acked %d", st.Inflight, st.Totals.Acked)
	}
}

// TestReceiptRoundTrip: encodeReceipt, decodeReceipt and checkedReceipt
// (the read of an accepted receipt without its MAC, ack and nack use it)
// agree on every field, with pooled MAC states reused across receipts;
// a flipped bit in the MAC is refused.
func TestReceiptRoundTrip(t *testing.T) {
	e := &Engine{receiptKey: []byte(strings.Repeat("k", 32))}
	for i := range 200 {
		want := receipt{qid: uint32(i * 7919), m: msgKey{part: int32(i % 17), off: int64(i) << 33}, epoch: uint32(i * 31)}
		s := e.encodeReceipt(want)
		got, err := e.decodeReceipt(s)
		if err != nil || got != want {
			t.Fatalf("decodeReceipt(encodeReceipt(%+v)) = %+v, %v", want, got, err)
		}
		if got := checkedReceipt(s); got != want {
			t.Fatalf("checkedReceipt = %+v, want %+v", got, want)
		}
		c := byte('A')
		if s[len(s)-5] == 'A' {
			c = 'B'
		}
		if _, err := e.decodeReceipt(s[:len(s)-5] + string(c) + s[len(s)-4:]); err == nil || err.Code != CodeInvalidReceipt {
			t.Fatalf("a receipt with a changed MAC was not refused: %v", err)
		}
	}
}
