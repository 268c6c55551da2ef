package compattests

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConnectExactlyOnceSource emulates, request by request, what a Kafka
// Connect cluster with exactly.once.source.support=enabled does with
// transactions (CONNECT-STREAMS.md §1.6, §6.1 step 18):
//
//	a. the config-topic leader's transactional ID connect-cluster-<group>:
//	   batched FindCoordinator, InitProducerId, AddPartitionsToTxn,
//	   Produce, EndTxn; while open the last stable offset stays at the
//	   record, after the commit it equals the high watermark, the COMMIT
//	   marker takes an offset, and a read_committed readToEnd reaches the
//	   high watermark although the last offset is a marker;
//	b. a second worker claiming leadership bumps the epoch; the first
//	   worker's requests get PRODUCER_FENCED or INVALID_PRODUCER_EPOCH and
//	   write nothing;
//	c. a zombie task transaction left open on the offsets topic blocks a
//	   read_committed readToEnd until Admin.fenceProducers (batched
//	   FindCoordinator + InitProducerId with producer ID -1 per task)
//	   aborts it: the LSO reaches the high watermark, the zombie's records
//	   are never shown, Fetch lists the transaction in AbortedTransactions,
//	   and the zombie is fenced;
//	d. the same with a 2 s transaction timeout and no fencing: the broker
//	   aborts it, the read ends, the producer's next EndTxn is fenced and
//	   it can re-initialize with its old epoch (KIP-360).
//
// TestTxnConnectFenceProducers covers fencing through the franz-go
// producer; this test pins the wire answers, the offsets and the aborted
// transaction index.
func TestConnectExactlyOnceSource(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	group := topicName(t, "connect-cluster")
	configsTopic, offsetsTopic, sourceTopic := group+"-configs", group+"-offsets", group+"-source"
	compact := map[string]*string{"cleanup.policy": strp("compact")}
	createTopic(t, adm, configsTopic, 1, compact)
	createTopic(t, adm, offsetsTopic, 5, compact)
	createTopic(t, adm, sourceTopic, 2, nil)
	c := dialRaw(t, b.Addr())

	// a. The leader claims write privileges on the config topic and writes
	// the session key in a transaction.
	leaderID := "connect-cluster-" + group
	eosFindTxnCoordinators(t, c, b.Addr(), leaderID)
	pid, epoch := eosInitOK(t, c, leaderID, 60000, -1, -1)
	if code := eosAddPartitions(t, c, leaderID, pid, epoch, configsTopic, 0); code != 0 {
		t.Fatalf("leader AddPartitionsToTxn: %s", errName(code))
	}
	sessionKey := `{"key":"c2VjcmV0","algorithm":"HmacSHA256","creation-timestamp":1}`
	if p := eosProduce(t, c, configsTopic, 0, pid, epoch, 0, "session-key", sessionKey); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("leader produce: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}
	if hwm, lso := eosListOffset(t, c, configsTopic, 0, -1, 0), eosListOffset(t, c, configsTopic, 0, -1, 1); hwm != 1 || lso != 0 {
		t.Fatalf("transaction open: high watermark %d, last stable offset %d; want 1 and 0", hwm, lso)
	}
	if fp := eosFetch(t, c, configsTopic, 0, 0, 1, 0); len(fp.RecordBatches) != 0 {
		t.Fatalf("read_committed fetch returned %d bytes of an open transaction", len(fp.RecordBatches))
	}
	if code := eosEndTxn(t, c, leaderID, pid, epoch, true); code != 0 {
		t.Fatalf("leader EndTxn commit: %s", errName(code))
	}
	if hwm, lso := eosListOffset(t, c, configsTopic, 0, -1, 0), eosListOffset(t, c, configsTopic, 0, -1, 1); hwm != 2 || lso != 2 {
		t.Fatalf("after the commit: high watermark %d, last stable offset %d; want 2 and 2 (record + COMMIT marker)", hwm, lso)
	}
	batches := parseBatches(t, eosFetch(t, c, configsTopic, 0, 0, 1, 0).RecordBatches)
	if len(batches) != 2 || batches[0].FirstOffset != 0 || batches[0].ProducerID != pid || batches[0].Attributes&0x10 == 0 || batches[1].FirstOffset != 1 {
		t.Fatalf("config topic after the commit: %d batches %+v; want the transactional record at 0 and the marker at 1", len(batches), batches)
	}
	if control, commit := eosMarker(t, batches[1]); !control || !commit || batches[1].ProducerID != pid || batches[1].ProducerEpoch != epoch {
		t.Fatalf("offset 1: control %v commit %v producer %d/%d; want the leader's COMMIT marker", control, commit, batches[1].ProducerID, batches[1].ProducerEpoch)
	}
	configs := newEOSReader(t, b.Addr(), configsTopic, 0, 0)
	configs.toEnd(eosListOffset(t, c, configsTopic, 0, -1, 0), 10*time.Second)
	if got := eosKeyValues(configs.records); len(got) != 1 || got[0] != "session-key="+sessionKey || configs.pos != 2 {
		t.Fatalf("readToEnd of the config topic: %v, position %d; want the session key and position 2", got, configs.pos)
	}

	// b. A second worker becomes leader: same producer ID, next epoch. The
	// first worker is a zombie now.
	pid2, epoch2 := eosInitOK(t, c, leaderID, 60000, -1, -1)
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("second leader: producer %d epoch %d, want %d epoch %d", pid2, epoch2, pid, epoch+1)
	}
	if code := eosAddPartitions(t, c, leaderID, pid, epoch, configsTopic, 0); !eosFenced(code) {
		t.Fatalf("old leader AddPartitionsToTxn: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(code))
	}
	if p := eosProduce(t, c, configsTopic, 0, pid, epoch, 1, "connector-zombie", "{}"); !eosFenced(p.ErrorCode) {
		t.Fatalf("old leader produce: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(p.ErrorCode))
	}
	if code := eosEndTxn(t, c, leaderID, pid, epoch, true); !eosFenced(code) {
		t.Fatalf("old leader EndTxn: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(code))
	}
	if code := eosAddPartitions(t, c, leaderID, pid2, epoch2, configsTopic, 0); code != 0 {
		t.Fatalf("new leader AddPartitionsToTxn: %s", errName(code))
	}
	if p := eosProduce(t, c, configsTopic, 0, pid2, epoch2, 0, "connector-c1", `{"properties":{"tasks.max":"2"}}`); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("new leader produce: %s at %d, want offset 2", errName(p.ErrorCode), p.BaseOffset)
	}
	if code := eosEndTxn(t, c, leaderID, pid2, epoch2, true); code != 0 {
		t.Fatalf("new leader EndTxn: %s", errName(code))
	}
	configs.toEnd(eosListOffset(t, c, configsTopic, 0, -1, 0), 10*time.Second)
	if got := eosKeyValues(configs.records[1:]); len(got) != 1 || !strings.HasPrefix(got[0], "connector-c1=") || configs.pos != 4 {
		t.Fatalf("readToEnd after the new leader's write: %v, position %d; want connector-c1 only and position 4", got, configs.pos)
	}

	// c. Zombie task c1-0: one committed transaction, then one left open on
	// the offsets topic and the source topic; a plain offsets write after it.
	task0, task1 := group+"-c1-0", group+"-c1-1"
	const offsetsPartition = 2
	zpid, zepoch := eosInitOK(t, c, task0, 60000, -1, -1)
	taskTxn := func(id string, pid int64, epoch int16, seq int32, position string) {
		t.Helper()
		if code := eosAddPartitions(t, c, id, pid, epoch, sourceTopic, 0); code != 0 {
			t.Fatalf("%s AddPartitionsToTxn source: %s", id, errName(code))
		}
		if code := eosAddPartitions(t, c, id, pid, epoch, offsetsTopic, offsetsPartition); code != 0 {
			t.Fatalf("%s AddPartitionsToTxn offsets: %s", id, errName(code))
		}
		if p := eosProduce(t, c, sourceTopic, 0, pid, epoch, seq, "line", "record-"+position); p.ErrorCode != 0 {
			t.Fatalf("%s produce source: %s", id, errName(p.ErrorCode))
		}
		if p := eosProduce(t, c, offsetsTopic, offsetsPartition, pid, epoch, seq, `["c1",{"file":"in.txt"}]`, `{"position":`+position+`}`); p.ErrorCode != 0 {
			t.Fatalf("%s produce offsets: %s", id, errName(p.ErrorCode))
		}
	}
	taskTxn(task0, zpid, zepoch, 0, "1")
	if code := eosEndTxn(t, c, task0, zpid, zepoch, true); code != 0 {
		t.Fatalf("task commit: %s", errName(code))
	}
	taskTxn(task0, zpid, zepoch, 1, "2") // left open: offset 2 on both partitions
	zombieFirst := int64(2)
	if p := eosProduce(t, c, offsetsTopic, offsetsPartition, -1, -1, -1, `["c2",{"file":"other.txt"}]`, `{"position":7}`); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("plain offsets write: %s at %d, want offset 3", errName(p.ErrorCode), p.BaseOffset)
	}
	end := eosListOffset(t, c, offsetsTopic, offsetsPartition, -1, 0)
	if lso := eosListOffset(t, c, offsetsTopic, offsetsPartition, -1, 1); end != 4 || lso != zombieFirst {
		t.Fatalf("offsets topic with the zombie's transaction open: high watermark %d, last stable offset %d; want 4 and %d", end, lso, zombieFirst)
	}
	offsets := newEOSReader(t, b.Addr(), offsetsTopic, offsetsPartition, 0)
	for range 4 { // the first answer moves past the committed transaction; the rest wait
		offsets.fetch(300)
	}
	if offsets.pos != zombieFirst || offsets.last.LastStableOffset != zombieFirst {
		t.Fatalf("read_committed readToEnd with a transaction open: position %d, last stable offset %d; want both at %d (blocked)", offsets.pos, offsets.last.LastStableOffset, zombieFirst)
	}

	// Admin.fenceProducers for the connector's tasks.
	eosFindTxnCoordinators(t, c, b.Addr(), task0, task1)
	fpid, fepoch := eosInitOK(t, c, task0, 30000, -1, -1)
	if fpid != zpid || fepoch <= zepoch {
		t.Fatalf("fencing %s: producer %d epoch %d; want %d with an epoch above %d", task0, fpid, fepoch, zpid, zepoch)
	}
	t1pid, t1epoch := eosInitOK(t, c, task1, 30000, -1, -1)
	if t1pid == zpid || t1pid == pid || t1epoch != 0 {
		t.Fatalf("fencing the unused %s: producer %d epoch %d; want a new producer at epoch 0", task1, t1pid, t1epoch)
	}
	for _, tp := range []struct {
		topic     string
		partition int32
	}{{offsetsTopic, offsetsPartition}, {sourceTopic, 0}} {
		hwm, lso := eosListOffset(t, c, tp.topic, tp.partition, -1, 0), eosListOffset(t, c, tp.topic, tp.partition, -1, 1)
		if lso != hwm {
			t.Fatalf("%s/%d after fencing: last stable offset %d, high watermark %d", tp.topic, tp.partition, lso, hwm)
		}
	}
	end = eosListOffset(t, c, offsetsTopic, offsetsPartition, -1, 0)
	if end != 5 {
		t.Fatalf("offsets topic after fencing: high watermark %d, want 5 (the ABORT marker at 4)", end)
	}
	offsets.toEnd(end, 10*time.Second)
	want := []string{`["c1",{"file":"in.txt"}]={"position":1}`, `["c2",{"file":"other.txt"}]={"position":7}`}
	if got := eosKeyValues(offsets.records); !slices.Equal(got, want) {
		t.Fatalf("read_committed offsets after fencing: %v, want %v", got, want)
	}
	if !offsets.abortedBy(zpid, zombieFirst) {
		t.Fatalf("read_committed fetches listed aborted transactions %+v; want producer %d from offset %d", offsets.aborted, zpid, zombieFirst)
	}
	if control, commit := eosMarker(t, parseBatches(t, eosFetch(t, c, offsetsTopic, offsetsPartition, 4, 1, 0).RecordBatches)[0]); !control || commit {
		t.Fatalf("offset 4 of the offsets topic: control %v commit %v; want an ABORT marker", control, commit)
	}
	source := newEOSReader(t, b.Addr(), sourceTopic, 0, 0)
	source.toEnd(eosListOffset(t, c, sourceTopic, 0, -1, 0), 10*time.Second)
	if got := eosKeyValues(source.records); !slices.Equal(got, []string{"line=record-1"}) || !source.abortedBy(zpid, zombieFirst) {
		t.Fatalf("read_committed source topic: %v, aborted %+v; want record-1 only and the zombie's transaction aborted", got, source.aborted)
	}
	if code := eosEndTxn(t, c, task0, zpid, zepoch, true); !eosFenced(code) {
		t.Fatalf("zombie EndTxn: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(code))
	}
	if p := eosProduce(t, c, offsetsTopic, offsetsPartition, zpid, zepoch, 2, `["c1",{"file":"in.txt"}]`, `{"position":3}`); !eosFenced(p.ErrorCode) {
		t.Fatalf("zombie produce: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(p.ErrorCode))
	}

	// d. Task c1-1 with a 2 s transaction timeout leaves a transaction open
	// on another offsets partition; nobody fences it.
	const timeoutPartition = 4
	tpid, tepoch := eosInitOK(t, c, task1, 2000, -1, -1)
	if code := eosAddPartitions(t, c, task1, tpid, tepoch, offsetsTopic, timeoutPartition); code != 0 {
		t.Fatalf("task c1-1 AddPartitionsToTxn: %s", errName(code))
	}
	if p := eosProduce(t, c, offsetsTopic, timeoutPartition, tpid, tepoch, 0, `["c1",{"file":"b.txt"}]`, `{"position":1}`); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("task c1-1 produce: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}
	if p := eosProduce(t, c, offsetsTopic, timeoutPartition, -1, -1, -1, `["c3",{"file":"c.txt"}]`, `{"position":1}`); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("plain offsets write: %s at %d", errName(p.ErrorCode), p.BaseOffset)
	}
	timed := newEOSReader(t, b.Addr(), offsetsTopic, timeoutPartition, 0)
	timed.fetch(300)
	if timed.pos != 0 || timed.last.LastStableOffset != 0 || timed.last.HighWatermark != 2 {
		t.Fatalf("read_committed with the transaction open: position %d, last stable offset %d, high watermark %d; want 0, 0, 2",
			timed.pos, timed.last.LastStableOffset, timed.last.HighWatermark)
	}
	retWaitFor(t, 20*time.Second, "the broker to abort the timed-out transaction", func() (bool, string) {
		lso := eosListOffset(t, c, offsetsTopic, timeoutPartition, -1, 1)
		return lso == 3, "last stable offset " + strconv.FormatInt(lso, 10)
	})
	timed.toEnd(3, 10*time.Second)
	if got := eosKeyValues(timed.records); !slices.Equal(got, []string{`["c3",{"file":"c.txt"}]={"position":1}`}) || !timed.abortedBy(tpid, 0) {
		t.Fatalf("read_committed after the timeout: %v, aborted %+v; want the plain write only and the transaction aborted", got, timed.aborted)
	}
	if code := eosEndTxn(t, c, task1, tpid, tepoch, true); !eosFenced(code) {
		t.Fatalf("EndTxn after the timeout abort: %s, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", errName(code))
	}
	if rpid, repoch := eosInitOK(t, c, task1, 2000, tpid, tepoch); rpid != tpid || repoch <= tepoch+1 {
		t.Fatalf("re-initializing with the old epoch after a timeout (KIP-360): producer %d epoch %d; want %d above epoch %d", rpid, repoch, tpid, tepoch+1)
	}
}
