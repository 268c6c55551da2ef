package compattests

import (
	"fmt"
	"strings"
	"testing"
)

// TestEventsConsumerKill9KeepsCheckpoint: a durable consumer over the real
// binary: created through the CLI, events appended, read with consumer=
// (the read does not move the checkpoint), committed; kill -9; the
// checkpoint, its start and the events are kept; a regression is refused
// (409 checkpoint_regression, CLI exit 4) and the next read starts at the
// checkpoint; a second kill -9 right after a forced rewind keeps the rewind.
func TestEventsConsumerKill9KeepsCheckpoint(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv := []string{"--server", "http://" + b.HTTPAddr()}
	run := func(want int, args ...string) string {
		t.Helper()
		args = append(append([]string{"events", "consumer", args[0]}, srv...), args[1:]...)
		code, out, errOut := brokerCLI(t, args...)
		if code != want {
			t.Fatalf("broker %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out
	}
	esMust(t, b, "PUT", "/v1/stores/ledger", nil, 201)
	run(0, "create", "--start", "first", "ledger", "projector")
	for i := range 5 {
		esMust(t, b, "POST", "/v1/stores/ledger/streams/acct-1/events", esAppendBody("any",
			map[string]any{"id": fmt.Sprintf("e-%d", i), "type": "Step", "data": map[string]any{"i": i}}), 201)
	}
	type page struct {
		Events       []esEvent `json:"events"`
		NextPosition int64     `json:"next_position"`
	}
	read := func() page {
		t.Helper()
		var p page
		esDecode(t, esMust(t, b, "GET", "/v1/stores/ledger/events?consumer=projector&limit=3", nil, 200).Raw, &p)
		return p
	}
	p := read()
	if len(p.Events) != 3 || p.Events[0].Position != 0 || p.NextPosition != 3 {
		t.Fatalf("first read with the consumer: %+v", p)
	}
	if again := read(); again.Events[0].Position != 0 {
		t.Fatalf("the read moved the checkpoint: %+v", again)
	}
	esMust(t, b, "POST", "/v1/stores/ledger/consumers/projector/commit", map[string]any{"position": p.NextPosition}, 200)

	b.Kill()
	b.Start()
	var c struct {
		Position     int64  `json:"position"`
		HeadPosition int64  `json:"head_position"`
		Lag          int64  `json:"lag"`
		Start        string `json:"start"`
	}
	esDecode(t, esMust(t, b, "GET", "/v1/stores/ledger/consumers/projector", nil, 200).Raw, &c)
	if c.Position != 3 || c.HeadPosition != 5 || c.Lag != 2 || c.Start != "first" {
		t.Fatalf("after kill -9: %+v", c)
	}
	if out := run(0, "describe", "ledger", "projector"); !strings.Contains(out, "at position 3; head 5, lag 2") {
		t.Fatalf("describe after kill -9: %s", out)
	}
	r := esMust(t, b, "POST", "/v1/stores/ledger/consumers/projector/commit", map[string]any{"position": 1}, 409)
	if code, _ := r.Body["code"].(string); code != "checkpoint_regression" {
		t.Fatalf("regression: %s", r.Raw)
	}
	run(4, "commit", "ledger", "projector", "2")
	run(4, "create", "--start", "new", "ledger", "projector")
	if p := read(); len(p.Events) != 2 || p.Events[0].Position != 3 {
		t.Fatalf("read after the restart: %+v", p)
	}
	esCheckGapFree(t, esReadAll(t, b, "ledger"))

	// A forced rewind acknowledged just before a kill -9 is kept.
	run(0, "commit", "--force", "ledger", "projector", "1")
	b.Kill()
	b.Start()
	esDecode(t, esMust(t, b, "GET", "/v1/stores/ledger/consumers/projector", nil, 200).Raw, &c)
	if c.Position != 1 {
		t.Fatalf("forced rewind after kill -9: %+v", c)
	}
	if out := run(0, "list", "ledger"); !strings.Contains(out, "projector") {
		t.Fatalf("list: %s", out)
	}
	run(0, "delete", "ledger", "projector")
	run(3, "describe", "ledger", "projector")
}
