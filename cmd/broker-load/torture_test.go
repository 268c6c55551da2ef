package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// goodLog is two partitions written by producers 0 and 1, every record
// acknowledged.
func goodLog() ([]loggedRecord, map[int32][]loggedRecord, map[int32]int64) {
	log := map[int32][]loggedRecord{
		0: {{0, 0, tortureValue(0, 0)}, {0, 1, tortureValue(1, 0)}, {0, 2, tortureValue(0, 2)}, {0, 3, tortureValue(1, 3)}},
		1: {{1, 0, tortureValue(0, 1)}, {1, 1, tortureValue(1, 1)}, {1, 2, tortureValue(1, 2)}},
	}
	var acked []loggedRecord
	for _, rs := range log {
		acked = append(acked, rs...)
	}
	return acked, log, map[int32]int64{0: 4, 1: 3}
}

func TestCheckLogPassesAGoodLog(t *testing.T) {
	acked, log, ends := goodLog()
	// A record in the log that was never acknowledged is fine.
	log[1] = append(log[1], loggedRecord{1, 3, tortureValue(0, 5)})
	ends[1] = 4
	c := checkLog(acked, log, ends)
	if !c.ok() || c.Acked != 7 || c.Read != 8 {
		t.Fatalf("good log judged bad: %+v", c)
	}
}

func TestCheckLogFindsALostRecord(t *testing.T) {
	acked, log, ends := goodLog()
	// The last record of partition 0 is gone (the log ends early).
	log[0] = log[0][:3]
	ends[0] = 3
	c := checkLog(acked, log, ends)
	if c.Lost != 1 || c.Gaps != 0 || c.ok() {
		t.Fatalf("lost record: %+v", c)
	}
	if !strings.Contains(strings.Join(c.Details, "\n"), "acknowledged offset 3") {
		t.Errorf("details do not name the lost offset: %q", c.Details)
	}
	// Another value at an acknowledged offset is a loss too.
	acked, log, ends = goodLog()
	log[1][2].Value = tortureValue(0, 9)
	if c := checkLog(acked, log, ends); c.Lost != 1 {
		t.Fatalf("changed record: %+v", c)
	}
}

func TestCheckLogFindsADuplicate(t *testing.T) {
	acked, log, ends := goodLog()
	// A retried batch appended again: its value at a second offset.
	log[1] = append(log[1], loggedRecord{1, 3, tortureValue(1, 2)})
	ends[1] = 4
	c := checkLog(acked, log, ends)
	if c.Duplicates != 1 || c.ok() {
		t.Fatalf("duplicate: %+v", c)
	}
}

func TestCheckLogFindsAGap(t *testing.T) {
	acked, log, ends := goodLog()
	// Offset 1 of partition 1 is missing, the rest is there.
	log[1] = []loggedRecord{log[1][0], log[1][2]}
	acked = acked[:0]
	c := checkLog(acked, log, ends)
	if c.Gaps != 1 || c.ok() {
		t.Fatalf("gap: %+v", c)
	}
	// A log shorter than its end offset is a gap as well.
	_, log, ends = goodLog()
	log[0] = log[0][:2]
	if c := checkLog(nil, log, ends); c.Gaps != 1 {
		t.Fatalf("short log: %+v", c)
	}
}

func TestCheckLogFindsDisorderAndForeignValues(t *testing.T) {
	_, log, ends := goodLog()
	// Producer 0's seq 2 before its seq 0 in partition 0 (nothing acked,
	// so that only the order is judged).
	log[0][0].Value, log[0][2].Value = log[0][2].Value, log[0][0].Value
	c := checkLog(nil, log, ends)
	if c.Disordered != 1 || c.ok() {
		t.Fatalf("disorder: %+v", c)
	}
	_, log, ends = goodLog()
	log[1][0].Value = "garbage"
	if c := checkLog(nil, log, ends); c.Foreign != 1 {
		t.Fatalf("foreign: %+v", c)
	}
}

func TestCheckQueue(t *testing.T) {
	ledger := func() *queueLedger {
		l := newQueueLedger()
		for _, b := range []string{"a", "b", "c", "d", "e"} {
			l.SentAcked[b] = true
		}
		l.SentUnknown["u"] = true
		l.Acked["a"] = 1
		l.Acked["b"] = 1
		l.AckUnknown["c"] = true // its ack went unanswered
		return l
	}
	remaining := map[string]int{"d": 1, "e": 1, "u": 1} // e.g. d in the queue, e in the DLQ
	if c := checkQueue(ledger(), remaining); !c.ok() {
		t.Fatalf("good queue judged bad: %+v", c)
	}

	// Lost: e acknowledged, never acked, not in the queue.
	c := checkQueue(ledger(), map[string]int{"d": 1})
	if c.Lost != 1 || c.ok() || !strings.Contains(strings.Join(c.Details, "\n"), "send e") {
		t.Fatalf("lost send: %+v", c)
	}
	// Acked twice.
	l := ledger()
	l.Acked["a"] = 2
	if c := checkQueue(l, remaining); c.AckedTwice != 1 || c.ok() {
		t.Fatalf("acked twice: %+v", c)
	}
	// Acked, yet still in the queue.
	if c := checkQueue(ledger(), map[string]int{"a": 1, "d": 1, "e": 1}); c.AckedAndLeft != 1 || c.ok() {
		t.Fatalf("acked and left: %+v", c)
	}
	// Never sent.
	if c := checkQueue(ledger(), map[string]int{"d": 1, "e": 1, "zz": 1}); c.Foreign != 1 || c.ok() {
		t.Fatalf("foreign: %+v", c)
	}
}

func TestParseProcStatusKiB(t *testing.T) {
	status := []byte("Name:\tbroker\nVmHWM:\t  204800 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n")
	if got, err := parseProcStatusKiB(status, "VmRSS"); err != nil || got != 51200 {
		t.Fatalf("VmRSS = %d, %v", got, err)
	}
	if got, err := parseProcStatusKiB(status, "VmHWM"); err != nil || got != 204800 {
		t.Fatalf("VmHWM = %d, %v", got, err)
	}
	if _, err := parseProcStatusKiB(status, "VmSwap"); err == nil {
		t.Fatal("a missing field parsed")
	}
}

func TestParseTortureFlagsSplitsTheDuration(t *testing.T) {
	cfg, err := parseTortureFlags([]string{"--duration", "100s", "--skip", "disk", "--http-duration", "7s"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.phases, ",") != "kill,frames,http" {
		t.Fatalf("phases %v", cfg.phases)
	}
	// kill and frames share 100s as 0.4 : 0.2; http has its own flag.
	if cfg.phaseDur["kill"] != 67*time.Second || cfg.phaseDur["frames"] != 33*time.Second || cfg.phaseDur["http"] != 7*time.Second {
		t.Fatalf("durations %v", cfg.phaseDur)
	}
	for _, bad := range [][]string{{"--phases", "kill,nope"}, {"--phases", "disk", "--skip", "disk"}, {"--rss-limit", "lots"}} {
		if _, err := parseTortureFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// The frame generator must never panic, whatever the kind and seed.
func TestHostileFrameAllKinds(t *testing.T) {
	templates := frameTemplates()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		kind := i % len(frameKinds)
		data, hold := hostileFrame(rng, kind, templates, int32(i))
		if len(data) == 0 || hold <= 0 || hold > framesHoldMax {
			t.Fatalf("kind %s: %d bytes, hold %v", frameKinds[kind], len(data), hold)
		}
	}
}

// TestTortureRunBoundCoversPhaseOverrides pins a bug: the run's hard bound
// was --duration (default 2m) plus 3 minutes a phase, so a long run given
// with --kill-duration 16m was cut at 8 minutes, mid-phase.
func TestTortureRunBoundCoversPhaseOverrides(t *testing.T) {
	cfg, err := parseTortureFlags([]string{"--phases", "kill,frames", "--kill-duration", "16m", "--frames-duration", "8m"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.runBound(), 30*time.Minute; got != want {
		t.Fatalf("run bound %v, want %v (16m + 8m + 3m per phase)", got, want)
	}
}
