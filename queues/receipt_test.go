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
