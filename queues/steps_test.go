package queues

import (
	"testing"
	"time"

	"github.com/vibemq/broker/topics"
)

// The steps of the long jobs are functions of their own (issue 15): each
// is pinned here on its own.

// TestRedrivenRecord: a redriven record loses the dead-letter headers and
// an older redrive mark, names its DLQ, counts one more redrive, and keeps
// its dead delivery count only when asked.
func TestRedrivenRecord(t *testing.T) {
	rec := storedRecord{Key: []byte("k"), Value: []byte("v"), Headers: []topics.RecordHeader{
		{Key: "trace", Value: []byte("t1")},
		{Key: HeaderDLQReason, Value: []byte(ReasonMaxReceives)},
		{Key: HeaderDLQDeliveries, Value: []byte("5")},
		{Key: HeaderRedrivenFrom, Value: []byte("older.dlq")},
		{Key: HeaderRedriveCount, Value: []byte("2")},
	}}
	out, deliveries := redrivenRecord(rec, "q.dlq", false)
	if deliveries != 0 || string(out.Key) != "k" || string(out.Value) != "v" {
		t.Fatalf("record %+v deliveries %d", out, deliveries)
	}
	want := []topics.RecordHeader{{Key: "trace", Value: []byte("t1")},
		{Key: HeaderRedrivenFrom, Value: []byte("q.dlq")}, {Key: HeaderRedriveCount, Value: []byte("3")}}
	if len(out.Headers) != len(want) {
		t.Fatalf("headers %v, want %v", out.Headers, want)
	}
	for i := range want {
		if out.Headers[i].Key != want[i].Key || string(out.Headers[i].Value) != string(want[i].Value) {
			t.Fatalf("headers %v, want %v", out.Headers, want)
		}
	}
	if _, deliveries := redrivenRecord(rec, "q.dlq", true); deliveries != 5 {
		t.Fatalf("keep_deliveries: %d, want 5", deliveries)
	}
}

// TestRedriveFilterMatches: reason and source match their headers
// exactly; failed_before selects messages that died strictly before it
// and none whose failed-at header does not parse.
func TestRedriveFilterMatches(t *testing.T) {
	hdr := map[string]string{HeaderDLQReason: ReasonRejected, HeaderDLQSourceQueue: "orders", HeaderDLQFailedAt: formatHeaderTime(t0)}
	for _, c := range []struct {
		f      RedriveFilter
		before int64
		want   bool
	}{
		{RedriveFilter{}, 0, true},
		{RedriveFilter{Reason: ReasonRejected, Source: "orders"}, 0, true},
		{RedriveFilter{Reason: ReasonExpired}, 0, false},
		{RedriveFilter{Source: "other"}, 0, false},
		{RedriveFilter{}, t0 + 1, true},
		{RedriveFilter{}, t0, false},
	} {
		if got := c.f.matches(hdr, c.before); got != c.want {
			t.Errorf("%+v before %d: %v, want %v", c.f, c.before, got, c.want)
		}
	}
	if (&RedriveFilter{}).matches(map[string]string{HeaderDLQFailedAt: "yesterday"}, t0) {
		t.Error("a failed-at header that does not parse matched failed_before")
	}
}

// TestPrepareSteps: the schedule and expiry steps of prepare on their own.
func TestPrepareSteps(t *testing.T) {
	a := DefaultAttributes()
	past, future := time.UnixMilli(t0-5000), time.UnixMilli(t0+5000)
	var p preparedMessage
	if err := prepareSchedule(&SendMessage{DeliverAt: &past}, &a, &p, t0); err != nil || p.due != t0 {
		t.Fatalf("deliver_at in the past: due %d err %v, want now", p.due, err)
	}
	if err := prepareSchedule(&SendMessage{DeliverAt: &future}, &a, &p, t0); err != nil || p.due != t0+5000 {
		t.Fatalf("deliver_at: due %d err %v", p.due, err)
	}
	delay := int64(1)
	if err := prepareSchedule(&SendMessage{Delay: pms(delay), DeliverAt: &future}, &a, &p, t0); err == nil || err.Code != CodeConflictingFields {
		t.Fatalf("delay_ms and deliver_at: %v", err)
	}
	if err := prepareExpiry(&SendMessage{ExpireAt: &past}, &a, &p, t0); err == nil || err.Code != CodeExpireInPast {
		t.Fatalf("expire_at in the past: %v", err)
	}
	if err := prepareExpiry(&SendMessage{ExpireAt: &future}, &a, &p, t0); err != nil || p.expireAt != t0+5000 {
		t.Fatalf("expire_at: %d %v", p.expireAt, err)
	}
	invalid := &Error{Code: CodeInvalidBase64, Message: "bad"}
	if _, err := prepare(&SendMessage{Body: []byte("x"), Invalid: invalid}, &a, 1, t0); err != invalid {
		t.Fatalf("an Invalid message: %v", err)
	}
}
