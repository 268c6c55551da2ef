package queues

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"strconv"
)

// A receipt names one lease: base64url of
//
//	version u8 (1) | queueID u32 | partition u32 | offset u64 | epoch u32 | hmac [8]
//
// where hmac is HMAC-SHA256 (key: the store's receipt key) of the bytes
// before it, truncated. The epoch is the message's delivery count when it
// was leased; the receipt counts only while the count is unchanged, so a
// stale receipt gets lease_lost. Queue IDs are never reused, so a receipt
// of a deleted queue cannot match a new one.
type receipt struct {
	qid   uint32
	m     msgKey
	epoch uint32
}

const receiptLen = 1 + 4 + 4 + 8 + 4 + 8

func (e *Engine) encodeReceipt(r receipt) string {
	b := make([]byte, 0, receiptLen-8+sha256.Size)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, r.qid)
	b = binary.BigEndian.AppendUint32(b, uint32(r.m.part))
	b = binary.BigEndian.AppendUint64(b, uint64(r.m.off))
	b = binary.BigEndian.AppendUint32(b, r.epoch)
	b = e.receiptMAC(b, b)[:receiptLen]
	return base64.RawURLEncoding.EncodeToString(b)
}

func (e *Engine) decodeReceipt(s string) (receipt, *Error) {
	bad := func(why string) (receipt, *Error) {
		return receipt{}, errf(CodeInvalidReceipt, "receipt %q is %s", truncate(s, 64), why)
	}
	if len(s) != base64.RawURLEncoding.EncodedLen(receiptLen) {
		return bad("not a receipt of this broker (wrong length)")
	}
	// Strict: the unused low bits of the last character must be zero, so
	// that a receipt has one spelling (duplicate_in_request compares
	// strings).
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != receiptLen || b[0] != 1 {
		return bad("not a receipt of this broker")
	}
	var sum [receiptLen - 8 + sha256.Size]byte
	if !hmac.Equal(e.receiptMAC(sum[:0], b[:receiptLen-8])[:8], b[receiptLen-8:]) {
		return bad("forged, damaged or from another broker")
	}
	return receipt{
		qid:   binary.BigEndian.Uint32(b[1:]),
		m:     msgKey{part: int32(binary.BigEndian.Uint32(b[5:])), off: int64(binary.BigEndian.Uint64(b[9:]))},
		epoch: binary.BigEndian.Uint32(b[17:]),
	}, nil
}

// checkedReceipt reads a receipt decodeReceipt accepted, without checking
// its MAC again.
// REQUIRES: decodeReceipt(s) returned no error.
func checkedReceipt(s string) receipt {
	var b [receiptLen]byte
	_, _ = base64.RawURLEncoding.Decode(b[:], []byte(s))
	return receipt{
		qid:   binary.BigEndian.Uint32(b[1:]),
		m:     msgKey{part: int32(binary.BigEndian.Uint32(b[5:])), off: int64(binary.BigEndian.Uint64(b[9:]))},
		epoch: binary.BigEndian.Uint32(b[17:]),
	}
}

// receiptMAC appends HMAC-SHA256(receiptKey, data) to dst.
func (e *Engine) receiptMAC(dst, data []byte) []byte {
	mac, ok := e.receiptMACs.Get().(hash.Hash)
	if ok {
		mac.Reset()
	} else {
		mac = hmac.New(sha256.New, e.receiptKey)
	}
	mac.Write(data)
	dst = mac.Sum(dst)
	e.receiptMACs.Put(mac)
	return dst
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func itoa(i int) string { return strconv.Itoa(i) }
