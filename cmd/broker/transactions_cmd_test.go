package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTransactionsCommand(t *testing.T) {
	addr := startServing(t)
	cli := func(args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		full := append([]string{"broker", "transactions", args[0], "--bootstrap-server", addr}, args[1:]...)
		code := realMain(full, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		code, out := cli(args...)
		if code != wantCode || !strings.Contains(out, want) {
			t.Fatalf("broker transactions %v: exit %d, output:\n%s\nwant exit %d and %q", args, code, out, wantCode, want)
		}
		return out
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-txn"), kgo.DefaultProduceTopic("txn-topic"),
		kgo.AllowAutoTopicCreation(), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	expect(0, "cli-txn", "list", "--state", "Ongoing")
	out := expect(0, "State: Ongoing", "describe", "cli-txn")
	if !strings.Contains(out, "txn-topic[0]") && !strings.Contains(out, "txn-topic") {
		t.Fatalf("describe shows no partition:\n%s", out)
	}
	expect(3, "not found", "describe", "no-such-txn")
	expect(3, "not found", "abort", "no-such-txn")
	expect(2, "at least one", "abort")
	// Partition mode (kafka-transactions abort): the transaction starts at 0.
	expect(2, "go together", "abort", "--topic", "txn-topic")
	expect(2, "not both", "abort", "--topic", "txn-topic", "--partition", "0", "--start-offset", "0", "cli-txn")
	expect(3, "no open transaction starts at offset 5", "abort", "--topic", "txn-topic", "--partition", "0", "--start-offset", "5")
	expect(3, "not found", "abort", "--topic", "no-such-topic", "--partition", "0", "--start-offset", "0")
	expect(0, "aborted the transaction of producer id", "abort", "--topic", "txn-topic", "--partition", "0", "--start-offset", "0")
	expect(3, "no open transaction starts at offset 0", "abort", "--topic", "txn-topic", "--partition", "0", "--start-offset", "0")
	expect(0, "any open transaction was aborted", "abort", "cli-txn")
	expect(0, "State: Empty", "describe", "cli-txn") // fenced: a new epoch, no transaction
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	out = expect(0, "TRANSACTIONAL ID", "list", "--state", "Ongoing")
	if strings.Contains(out, "cli-txn") {
		t.Fatalf("list --state Ongoing after abort:\n%s", out)
	}
}
