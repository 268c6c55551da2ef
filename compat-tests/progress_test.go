package compattests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// deadLetters creates queue with n messages rejected into its DLQ.
func deadLetters(t *testing.T, b *brokerProc, queue string, n int) {
	t.Helper()
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{"max_receives": 3}, 201)
	qSend(t, b, queue, numbered("m", n)...)
	var receipts []string
	for _, m := range qReceive(t, b, queue, n, 0, 0) {
		receipts = append(receipts, m.Receipt)
	}
	qMust(t, b, "POST", "/v1/queues/"+queue+"/nack", map[string]any{"receipts": receipts, "dead_letter": true}, 200)
	if d := qStats(t, b, queue)["dead_letter_depth"]; d != float64(n) {
		t.Fatalf("dead_letter_depth %v, want %d", d, n)
	}
}

// TestDLQRedriveWaitProgress: `broker dlq redrive --wait` returns once the
// task is done, with its counts, the DLQ empty; the progress bar goes to
// stderr only when it is a terminal (run under script(1) for a pty).
func TestDLQRedriveWaitProgress(t *testing.T) {
	b := startBroker(t)
	deadLetters(t, b, "waited", 40)
	code, out, errOut := brokerCLI(t, "dlq", "redrive", "--server", b.HTTPAddr(), "--rate", "100", "--wait", "waited")
	if code != 0 || !strings.Contains(out, "done: moved 40, failed 0") {
		t.Fatalf("redrive --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "[") {
		t.Errorf("a progress bar on a stderr that is not a terminal: %q", errOut)
	}
	if st := qStats(t, b, "waited"); st["dead_letter_depth"] != float64(0) || st["available"] != float64(40) {
		t.Errorf("after redrive --wait: dead_letter_depth %v, available %v", st["dead_letter_depth"], st["available"])
	}

	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is missing (util-linux): cannot give the CLI a terminal")
	}
	deadLetters(t, b, "bar", 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmdline := brokerBin + " dlq redrive --server " + b.HTTPAddr() + " --wait bar"
	tty, err := exec.CommandContext(ctx, script, "-qec", cmdline, "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("%s under script: %v\n%s", cmdline, err, tty)
	}
	if !strings.Contains(string(tty), "redrive [##############################] 100%  5/5 messages") {
		t.Errorf("no progress bar on a terminal:\n%q", tty)
	}
}
