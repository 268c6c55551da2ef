package queues_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/vibemq/broker/queues"
)

// TestAnswerWaitsForTheLeaseItRead: a receive's lease is visible to other
// calls once applied, durable only once its WAL sync returns. A call that
// writes nothing and answers from that lease (an ack of the message's
// previous receipt refused with lease_lost, a receive that finds nothing)
// must not answer before the lease is durable: a crash in between takes
// the lease back, and the answer was a lie (after the restart the
// "lost" receipt acks, the "empty" queue has the message). This is what
// clustertests' TestQueueLeasesSurviveKill caught under kill -9
// (TESTING.md, "Linearizability of the native queue").
//
// The filesystem holds the receive's WAL write (crashfs hook) so that its
// sync cannot happen; the second call runs meanwhile. If it answers
// within the window, a crash image taken while the write is held must
// agree with its answer; it does not, and the test fails.
func TestAnswerWaitsForTheLeaseItRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		// second runs beside the held receive; it returns what it answered.
		second func(e *queues.Engine, old string) string
		// after checks the crash image against that answer.
		after func(t *testing.T, e *queues.Engine, old, answer string)
	}{
		{"ack of the previous receipt", func(e *queues.Engine, old string) string {
			res, err := e.Ack("q", []string{old}, time.UnixMilli(start))
			if err != nil {
				return err.Error()
			}
			if res[0].Error != nil {
				return res[0].Error.Code
			}
			return res[0].Status
		}, func(t *testing.T, e *queues.Engine, old, answer string) {
			res, err := e.Ack("q", []string{old}, time.UnixMilli(start))
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Status == "acked" {
				t.Errorf("the ack of the previous receipt answered %q while the new lease was not durable; after a crash that receipt acks", answer)
			}
		}},
		{"receive finding nothing", func(e *queues.Engine, _ string) string {
			msgs, err := e.Receive("q", queues.ReceiveRequest{MaxMessages: 1}, time.UnixMilli(start))
			if err != nil {
				return err.Error()
			}
			if len(msgs) == 0 {
				return "nothing"
			}
			return string(msgs[0].Body)
		}, func(t *testing.T, e *queues.Engine, _, answer string) {
			msgs, err := e.Receive("q", queues.ReceiveRequest{MaxMessages: 1}, time.UnixMilli(start))
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 1 {
				t.Errorf("a receive answered %q while the only message's lease was not durable; after a crash the message is available", answer)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { heldLeaseRun(t, tc.second, tc.after) })
	}
}

func heldLeaseRun(t *testing.T, second func(*queues.Engine, string) string, after func(*testing.T, *queues.Engine, string, string)) {
	mem := vfs.NewCrashableMem()
	fs := &crashFS{FS: mem}
	store, e := openCrashEngine(t, fs, start)
	defer func() { _ = store.Close() }()
	if _, _, err := e.CreateQueue("q", &queues.AttributesPatch{MaxReceives: ptr[int32](0), VisibilityTimeoutMs: ptr[int64](600000)}, time.UnixMilli(start)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Send("q", queues.SendRequest{Messages: []queues.SendMessage{{Body: []byte("m")}}}, time.UnixMilli(start)); err != nil {
		t.Fatal(err)
	}
	// Delivery 1, released by a nack: its receipt is the latest (it would
	// still ack, DESIGN.md "Epoch fencing") until the next receive.
	msgs, err := e.Receive("q", queues.ReceiveRequest{MaxMessages: 1}, time.UnixMilli(start))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("first receive: %v %v", msgs, err)
	}
	old := msgs[0].Receipt
	zero := time.Duration(0)
	if res, err := e.Nack("q", queues.NackRequest{Receipts: []string{old}, Delay: &zero}, time.UnixMilli(start)); err != nil || res[0].Status != "requeued" {
		t.Fatalf("nack: %v %v", res, err)
	}

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func() { // the next write is the receive's WAL record: hold it
		once.Do(func() { close(held); <-release })
	})
	received := make(chan error, 1)
	go func() {
		_, err := e.Receive("q", queues.ReceiveRequest{MaxMessages: 1}, time.UnixMilli(start))
		received <- err
	}()
	<-held
	for { // the lease is applied (visible), its sync held
		st, err := e.Stats("q", time.UnixMilli(start))
		if err != nil {
			t.Fatal(err)
		}
		if st.Inflight == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	answers := make(chan string, 1)
	go func() { answers <- second(e, old) }()
	answer := ""
	select {
	case answer = <-answers:
	case <-time.After(time.Second): // the detection window; the correct engine waits here
	}
	image := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	close(release) // the hook (it runs under fs's mutex) is done after this
	if err := <-received; err != nil {
		t.Fatal(err)
	}
	if answer == "" {
		answer = <-answers // after the lease is durable: refused rightly
	} else {
		is, ie := openCrashEngine(t, image, start)
		defer func() { _ = is.Close() }()
		after(t, ie, old, answer)
	}
	t.Logf("answer: %s", answer)
}
