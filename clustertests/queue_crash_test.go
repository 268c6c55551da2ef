package clustertests

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/vibemq/broker/internal/queuemodel"
	"github.com/vibemq/broker/internal/testtools/freeaddr"
)

// singleBroker is one `broker serve` process on loopback (no namespace),
// restarted on the same data directory and ports.
type singleBroker struct {
	t                         *testing.T
	bin, dir, kafka, httpAddr string
	cmd                       *exec.Cmd
	done                      chan struct{}
}

// freeAddr is a loopback address no other call of this test binary got.
func freeAddr(t *testing.T) string { t.Helper(); return freeaddr.T(t) }

func (b *singleBroker) start() {
	b.t.Helper()
	logs, err := os.OpenFile(filepath.Join(b.dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(b.bin, "serve", "--data-dir", filepath.Join(b.dir, "data"), "--kafka-addr", b.kafka,
		"--http-addr", b.httpAddr, "--memtable-size", "4MiB", "--cache-size", "8MiB")
	cmd.Stdout, cmd.Stderr = logs, logs
	// The broker refuses unknown BROKER_* variables: BROKER_BIN (Binary)
	// is the test's, not the broker's.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "BROKER_BIN=") })
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.cmd, b.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); _ = logs.Close(); close(done) }(b.done)
	deadline := time.Now().Add(wait)
	for {
		resp, err := http.Get("http://" + b.httpAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.dir, "broker.log"))
			b.t.Fatalf("the broker did not become healthy within %v: %v\n%s", wait, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *singleBroker) kill() {
	if b.cmd != nil {
		_ = b.cmd.Process.Kill()
		<-b.done
		b.cmd = nil
	}
}

// TestQueueLeasesSurviveKill: four clients send, receive, ack, nack and
// extend on one queue of a `broker serve` process that is killed with
// kill -9 and restarted on its data twice under them. Operations
// cut by a kill have an unknown outcome (they may or may not have taken
// effect, in the process that died), those refused at connect never
// reached the broker. Porcupine
// must find the history linearizable under internal/queuemodel's model:
// so a lease taken before a crash is still its message's only one after
// it (no receive returns that message to anybody else), and its receipt
// still acks, nacks and extends. Leases are 10 minutes and cannot lapse.
// The history must show a receipt issued before a kill used successfully
// after it.
func TestQueueLeasesSurviveKill(t *testing.T) {
	bin := brokerBin
	if bin == "" {
		var err error
		if bin, err = Binary(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	b := &singleBroker{t: t, bin: bin, dir: t.TempDir(), kafka: freeAddr(t), httpAddr: freeAddr(t)}
	t.Cleanup(b.kill)
	b.start()
	req, _ := http.NewRequest(http.MethodPut, "http://"+b.httpAddr+"/v1/queues/lin",
		bytes.NewReader([]byte(`{"max_receives":0,"visibility_timeout_ms":600000,"dead_letter":"none"}`)))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create the queue: %v %v", err, resp)
	}

	epoch := time.Now()
	w := &queuemodel.Workload{Bases: []string{"http://" + b.httpAddr}, Queue: "lin", Clients: 4, Seed: 11, Epoch: epoch}
	type ran struct {
		history []porcupine.Operation
		errs    []error
	}
	done := make(chan ran, 1)
	go func() { h, errs := w.Run(); done <- ran{h, errs} }()
	var kills, healthy []int64 // times of the kills and of the restarts' health, as the history's
	for range 2 {
		time.Sleep(600 * time.Millisecond)
		b.kill()
		kills = append(kills, time.Since(epoch).Nanoseconds()) // the process is gone
		time.Sleep(100 * time.Millisecond)
		b.start()
		healthy = append(healthy, time.Since(epoch).Nanoseconds())
	}
	time.Sleep(600 * time.Millisecond)
	w.Stop()
	r := <-done
	if len(r.errs) > 0 {
		t.Fatalf("%d unexpected answers, first: %v", len(r.errs), r.errs[0])
	}
	boundUnknown(r.history, kills)
	start := time.Now()
	res, report := queuemodel.CheckSaved(r.history, 30*time.Second, t.ArtifactDir())
	kinds := queuemodel.Summary(r.history)
	t.Logf("%d operations around %d kills: %v; porcupine: %v in %v", len(r.history), len(kills), kinds, res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Logf("kills at %v ns, restarts healthy at %v ns", kills, healthy)
		t.Fatalf("the queue's history across kill -9 is not linearizable (%v); %s", res, report)
	}
	if n := leasesUsedAcrossKill(r.history, kills); n == 0 {
		t.Error("no receipt issued before a kill was used successfully after it: the test did not exercise leases across a crash")
	} else {
		t.Logf("%d receipts issued before a kill were used successfully after it", n)
	}
}

// boundUnknown: an operation without an answer was cut by a kill (the
// broker is healthy otherwise); whatever it did, it did in the process
// that died, so it takes effect before that process was gone, not at any
// later time. Its return becomes the first kill after its call, which
// spares porcupine the states where it happens after the restart.
func boundUnknown(history []porcupine.Operation, kills []int64) {
	for i, op := range history {
		if !op.Output.(queuemodel.Result).Unknown {
			continue
		}
		for _, k := range kills {
			if k >= op.Call {
				history[i].Return = k
				break
			}
		}
	}
}

// leasesUsedAcrossKill counts the ack, nack and extend operations that
// succeeded after a kill with a receipt a receive answered before it.
func leasesUsedAcrossKill(history []porcupine.Operation, kills []int64) int {
	issued := map[string]int64{} // receipt -> when its receive returned
	for _, op := range history {
		in, out := op.Input.(queuemodel.Op), op.Output.(queuemodel.Result)
		if in.Kind == queuemodel.Receive && out.Receipt != "" && !out.Unknown {
			issued[out.Receipt] = op.Return
		}
	}
	n := 0
	for _, op := range history {
		in, out := op.Input.(queuemodel.Op), op.Output.(queuemodel.Result)
		at, ok := issued[in.Receipt]
		if !ok || !out.OK || in.Kind == queuemodel.Receive {
			continue
		}
		for _, k := range kills {
			if at < k && op.Call > k {
				n++
				break
			}
		}
	}
	return n
}
