package queues

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// RedriveRequest moves messages out of a DLQ: to Destination, or by
// default back to each message's source queue.
type RedriveRequest struct {
	Destination    string
	IDs            []string
	Filter         *RedriveFilter
	RatePerSec     *int
	KeepDeliveries bool
	Limit          int64
}

// RedriveFilter selects dead-lettered messages by their headers; zero
// fields select any.
type RedriveFilter struct {
	Reason string
	Source string
	// FailedBefore selects messages dead-lettered before it.
	FailedBefore time.Time
}

// Task states.
const (
	taskRunning   = "running"
	taskDone      = "done"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// TaskInfo is a redrive task. A task moves at most min(rate, 500)
// messages per step; each step is one Pebble batch holding the deletions
// from the DLQ, the appends to the destinations and the task's new cursor,
// so a crash never loses or doubles a message and the task resumes where
// its last step ended. It is stored as a taskRow.
type TaskInfo struct {
	ID              uint64
	Kind            string
	DLQ             string
	DLQID           uint32
	Destination     string
	IDs             []string
	Filter          RedriveFilter
	RatePerSec      int
	KeepDeliveries  bool
	Limit           int64
	State           string
	Moved           int64
	Failed          int64
	SkippedInflight int64
	Cursor          []int64 // next offset per partition, or the next index of IDs
	End             []int64 // high watermarks when the task began
	CreatedMs       int64
	UpdatedMs       int64
	Error           string
}

// taskRow is the stored form of a TaskInfo (pebblestore 0x3a): JSON, part
// of the file format, so its member names never change with the API's.
type taskRow struct {
	ID              uint64        `json:"id"`
	Kind            string        `json:"kind"`
	DLQ             string        `json:"dlq"`
	DLQID           uint32        `json:"dlq_id"`
	Destination     string        `json:"destination,omitempty"`
	IDs             []string      `json:"ids,omitempty"`
	Filter          taskFilterRow `json:"filter"`
	FailedBeforeMs  int64         `json:"failed_before_ms,omitempty"`
	RatePerSec      int           `json:"rate_per_sec"`
	KeepDeliveries  bool          `json:"keep_deliveries,omitempty"`
	Limit           int64         `json:"limit,omitempty"`
	State           string        `json:"state"`
	Moved           int64         `json:"moved"`
	Failed          int64         `json:"failed"`
	SkippedInflight int64         `json:"skipped_inflight"`
	Cursor          []int64       `json:"cursor"`
	End             []int64       `json:"end"`
	CreatedMs       int64         `json:"created_ms"`
	UpdatedMs       int64         `json:"updated_ms"`
	Error           string        `json:"error,omitempty"`
}

// taskFilterRow is the stored filter; failed_before is kept as text for
// readers of old rows, failed_before_ms is the value.
type taskFilterRow struct {
	Reason       string `json:"reason,omitempty"`
	Source       string `json:"source,omitempty"`
	FailedBefore string `json:"failed_before,omitempty"`
}

func (t *TaskInfo) row() taskRow {
	r := taskRow{ID: t.ID, Kind: t.Kind, DLQ: t.DLQ, DLQID: t.DLQID, Destination: t.Destination, IDs: t.IDs,
		Filter:     taskFilterRow{Reason: t.Filter.Reason, Source: t.Filter.Source},
		RatePerSec: t.RatePerSec, KeepDeliveries: t.KeepDeliveries, Limit: t.Limit, State: t.State, Moved: t.Moved,
		Failed: t.Failed, SkippedInflight: t.SkippedInflight, Cursor: t.Cursor, End: t.End,
		CreatedMs: t.CreatedMs, UpdatedMs: t.UpdatedMs, Error: t.Error}
	if !t.Filter.FailedBefore.IsZero() {
		r.FailedBeforeMs = t.Filter.FailedBefore.UnixMilli()
		r.Filter.FailedBefore = formatHeaderTime(r.FailedBeforeMs)
	}
	return r
}

func (r *taskRow) info() TaskInfo {
	t := TaskInfo{ID: r.ID, Kind: r.Kind, DLQ: r.DLQ, DLQID: r.DLQID, Destination: r.Destination, IDs: r.IDs,
		Filter:     RedriveFilter{Reason: r.Filter.Reason, Source: r.Filter.Source},
		RatePerSec: r.RatePerSec, KeepDeliveries: r.KeepDeliveries, Limit: r.Limit, State: r.State, Moved: r.Moved,
		Failed: r.Failed, SkippedInflight: r.SkippedInflight, Cursor: r.Cursor, End: r.End,
		CreatedMs: r.CreatedMs, UpdatedMs: r.UpdatedMs, Error: r.Error}
	if r.FailedBeforeMs > 0 {
		t.Filter.FailedBefore = time.UnixMilli(r.FailedBeforeMs)
	}
	return t
}

// failedBeforeMs is the filter's bound in Unix ms, 0 for none.
func (t *TaskInfo) failedBeforeMs() int64 {
	if t.Filter.FailedBefore.IsZero() {
		return 0
	}
	return t.Filter.FailedBefore.UnixMilli()
}

type task struct {
	rec      TaskInfo
	deleted  bool
	lastStep int64
	credit   float64
}

func (e *Engine) loadTasks() error {
	prefix := []byte{pebblestore.PrefixQueueTask}
	it, err := e.store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		var row taskRow
		if err := json.Unmarshal(v, &row); err != nil {
			return fmt.Errorf("%w: redrive task %x: %v", pebblestore.ErrCorruption, it.Key(), err)
		}
		rec := row.info()
		e.mu.tasks[rec.ID] = &task{rec: rec}
		if rec.ID >= e.mu.nextTask {
			e.mu.nextTask = rec.ID + 1
		}
	}
	return it.Close()
}

func taskValue(rec *TaskInfo) []byte {
	v, _ := json.Marshal(rec.row())
	return v
}

// Redrive starts a redrive task on the DLQ dlqName and returns it (the
// HTTP API answers 202). The task runs in Tick at RatePerSec.
func (e *Engine) Redrive(dlqName string, req RedriveRequest, now time.Time) (TaskInfo, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(dlqName)
	if qerr != nil {
		return TaskInfo{}, qerr
	}
	if len(req.IDs) > 0 && req.Filter != nil {
		return TaskInfo{}, withField(errf(CodeConflictingFields, "give ids or filter, not both"), "ids")
	}
	rate := RedriveRateDefault
	if req.RatePerSec != nil {
		rate = *req.RatePerSec
	}
	if rate < 1 || rate > RedriveRateMax {
		return TaskInfo{}, rangeErr("rate_per_sec", 1, RedriveRateMax)
	}
	if req.Limit < 0 {
		return TaskInfo{}, rangeErr("limit", 0, 1<<53)
	}
	if len(req.IDs) > BatchMessagesMax {
		return TaskInfo{}, rangeErr("ids", 0, BatchMessagesMax)
	}
	for _, id := range req.IDs {
		if _, err := parseID(id); err != nil {
			return TaskInfo{}, withField(err, "ids")
		}
	}
	rec := TaskInfo{Kind: "redrive", DLQ: dlqName, DLQID: q.id, Destination: req.Destination, IDs: req.IDs,
		RatePerSec: rate, KeepDeliveries: req.KeepDeliveries, Limit: req.Limit, State: taskRunning, CreatedMs: nowMs, UpdatedMs: nowMs}
	if req.Filter != nil {
		rec.Filter = *req.Filter
	}
	// A redrive appends every message it moves: not while the disk is
	// almost full (running tasks pause, see runTasks).
	if err := e.store.Space().Check(); err != nil {
		return TaskInfo{}, errStorage(err)
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	if req.Destination != "" {
		if d, _ := e.queueByName(req.Destination); d == nil {
			return TaskInfo{}, withField(errf(CodeDestinationNotFound, "destination queue %q does not exist", req.Destination), "destination")
		}
	}
	e.mu.Lock()
	for _, t := range e.mu.tasks {
		if t.rec.DLQID == q.id && t.rec.State == taskRunning && !t.deleted {
			e.mu.Unlock()
			return TaskInfo{}, &Error{Code: CodeTaskAlreadyRunning, Message: fmt.Sprintf("redrive task %d is running on %q; wait for it or cancel it", t.rec.ID, dlqName),
				Details: map[string]any{"task_id": t.rec.ID}}
		}
	}
	rec.ID = e.mu.nextTask
	e.mu.nextTask++
	e.mu.Unlock()
	if len(rec.IDs) > 0 {
		rec.Cursor = []int64{0}
	} else {
		for _, p := range q.topic.Partitions() {
			rec.Cursor = append(rec.Cursor, 0)
			rec.End = append(rec.End, p.HighWatermark())
		}
	}
	b := e.store.NewBatch()
	b.Set(taskKey(rec.ID), taskValue(&rec))
	b.Set(singletonKey("next-task-id"), binary.BigEndian.AppendUint64(nil, rec.ID+1))
	if err := b.Commit(); err != nil {
		return TaskInfo{}, errStorage(err)
	}
	e.mu.Lock()
	e.mu.tasks[rec.ID] = &task{rec: rec}
	e.mu.Unlock()
	e.log.Info().Uint64("task", rec.ID).Str("dlq", dlqName).Str("destination", req.Destination).Int("rate", rate).Msg("redrive started")
	return rec, nil
}

// Tasks lists every task, newest first.
func (e *Engine) Tasks() []TaskInfo {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]TaskInfo, 0, len(e.mu.tasks))
	for _, t := range e.mu.tasks {
		out = append(out, t.rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out
}

// Task returns one task.
func (e *Engine) Task(id uint64) (TaskInfo, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.mu.tasks[id]
	if !ok {
		return TaskInfo{}, errf(CodeTaskNotFound, "task %d does not exist", id)
	}
	return t.rec, nil
}

// CancelTask stops a running task; what it moved stays moved.
func (e *Engine) CancelTask(id uint64, now time.Time) (TaskInfo, error) {
	nowMs := now.UnixMilli()
	e.tickMu.Lock() // no step of the task runs meanwhile
	defer e.tickMu.Unlock()
	e.mu.RLock()
	t, ok := e.mu.tasks[id]
	e.mu.RUnlock()
	if !ok {
		return TaskInfo{}, errf(CodeTaskNotFound, "task %d does not exist", id)
	}
	if t.rec.State != taskRunning {
		return t.rec, nil
	}
	rec := t.rec
	rec.State, rec.UpdatedMs = taskCancelled, nowMs
	b := e.store.NewBatch()
	b.Set(taskKey(id), taskValue(&rec))
	if err := b.Commit(); err != nil {
		return TaskInfo{}, errStorage(err)
	}
	e.mu.Lock()
	t.rec = rec
	e.mu.Unlock()
	return rec, nil
}

// runTasks runs one step of every running task. While the disk is almost
// full (pebblestore.SpaceGuard) no step runs: each moves messages by
// appending them; the tasks stay running and go on once space is back.
// REQUIRES: tickMu held.
func (e *Engine) runTasks(now int64, rep *TickReport) {
	if e.store.Space().Low() {
		return
	}
	e.mu.RLock()
	var running []*task
	for _, t := range e.mu.tasks {
		if t.rec.State == taskRunning {
			running = append(running, t)
		}
	}
	e.mu.RUnlock()
	sort.Slice(running, func(i, j int) bool { return running[i].rec.ID < running[j].rec.ID })
	for _, t := range running {
		moved, err := e.redriveStep(t, now)
		rep.RedriveMoved += moved
		if err != nil {
			rep.Errors++
			e.log.Error().Err(err).Uint64("task", t.rec.ID).Msg("redrive step failed; retrying at the next tick")
		}
	}
}

type redriveCandidate struct {
	m    msgKey
	st   deliveryState
	rec  storedRecord
	dest string
}

// redriveStep moves up to the task's rate budget. It returns the number moved.
func (e *Engine) redriveStep(t *task, now int64) (int, error) {
	if t.lastStep == 0 {
		t.credit = float64(t.rec.RatePerSec) // the first second's budget
	} else if now > t.lastStep {
		t.credit += float64(t.rec.RatePerSec) * float64(now-t.lastStep) / 1000
	}
	t.credit = min(t.credit, float64(t.rec.RatePerSec))
	t.lastStep = now
	budget := min(int(t.credit), redriveStepMax)
	if budget < 1 {
		return 0, nil
	}
	e.mu.RLock()
	dlq := e.mu.byID[t.rec.DLQID]
	e.mu.RUnlock()
	rec := t.rec
	if dlq == nil || t.deleted {
		rec.State, rec.Error, rec.UpdatedMs = taskFailed, "the dead-letter queue was deleted", now
		return 0, e.saveTask(t, rec)
	}
	if rec.Limit > 0 && rec.Moved >= rec.Limit {
		rec.State, rec.UpdatedMs = taskDone, now
		return 0, e.saveTask(t, rec)
	}
	if rec.Limit > 0 {
		budget = int(min(int64(budget), rec.Limit-rec.Moved))
	}

	// Phase 1: pick candidates under the DLQ's lock.
	dlq.mu.Lock()
	rr := newRecordReader(dlq.topic)
	var cands []redriveCandidate
	examined := 0
	done := true
	visit := func(m msgKey) (stop bool) {
		if examined >= 4*redriveStepMax || len(cands) >= budget {
			done = false
			return true
		}
		examined++
		st, ok, err := e.getState(dlq, m)
		if err != nil || !ok {
			return false
		}
		if st.State == stateInflight {
			rec.SkippedInflight++
			return false
		}
		if st.State != stateAvailable {
			return false
		}
		r, err := rr.read(m)
		if err != nil {
			rec.Failed++
			return false
		}
		hdr := map[string]string{}
		for _, h := range r.Headers {
			hdr[h.Key] = string(h.Value)
		}
		if f := rec.Filter; f.Reason != "" && hdr[HeaderDLQReason] != f.Reason || f.Source != "" && hdr[HeaderDLQSourceQueue] != f.Source {
			return false
		}
		if before := rec.failedBeforeMs(); before > 0 {
			if at, ok := parseHeaderTime(hdr[HeaderDLQFailedAt]); !ok || at >= before {
				return false
			}
		}
		dest := rec.Destination
		if dest == "" {
			dest = hdr[HeaderDLQSourceQueue]
		}
		cands = append(cands, redriveCandidate{m: m, st: st, rec: r, dest: dest})
		return false
	}
	if len(rec.IDs) > 0 {
		rec.Cursor = append([]int64(nil), rec.Cursor...)
		for rec.Cursor[0] < int64(len(rec.IDs)) {
			m, _ := parseID(rec.IDs[rec.Cursor[0]])
			if visit(m) {
				break
			}
			rec.Cursor[0]++
		}
	} else {
		rec.Cursor = append([]int64(nil), rec.Cursor...)
		for p := range rec.Cursor {
			if rec.Cursor[p] >= rec.End[p] {
				continue
			}
			it, err := e.store.NewIter(stateKey(dlq.id, msgKey{part: int32(p), off: rec.Cursor[p]}), stateKey(dlq.id, msgKey{part: int32(p), off: rec.End[p]}))
			if err != nil {
				dlq.mu.Unlock()
				return 0, err
			}
			stopped := false
			for ok := it.First(); ok; ok = it.Next() {
				m := msgFromKeyTail(it.Key())
				if visit(m) {
					stopped = true
					break
				}
				rec.Cursor[p] = m.off + 1
			}
			_ = it.Close()
			if stopped {
				break
			}
			rec.Cursor[p] = rec.End[p]
		}
	}
	dlq.mu.Unlock()

	// Phase 2: lock the DLQ and the destinations, re-check, move in one batch.
	dests := map[string]*queue{}
	lockList := []*queue{dlq}
	var moves []redriveCandidate
	for _, c := range cands {
		d, ok := dests[c.dest]
		if !ok {
			d, _ = e.queueByName(c.dest)
			dests[c.dest] = d
			if d != nil {
				lockList = append(lockList, d)
			}
		}
		if d == nil || d == dlq {
			rec.Failed++ // the destination is gone (or is the DLQ itself): the message stays
			continue
		}
		moves = append(moves, c)
	}
	unlock := lockQueues(lockList...)
	w := &write{e: e, now: now}
	moved := 0
	for _, c := range moves {
		d := dests[c.dest]
		if d.deleted || dlq.deleted {
			rec.Failed++
			continue
		}
		st, ok, err := e.getState(dlq, c.m)
		if err != nil {
			unlock()
			return 0, err
		}
		if !ok || st.State != stateAvailable || st.Deliveries != c.st.Deliveries {
			if ok && st.State == stateInflight {
				rec.SkippedInflight++
			}
			continue
		}
		m, old := c.m, st
		w.op(func(b *pebblestore.Batch) { dlq.removeRows(b, m, &old) })
		w.onApplied = append(w.onApplied, func() { dlq.forgetLocked(m, &old) })
		headers := make([]topics.RecordHeader, 0, len(c.rec.Headers)+2)
		count := 0
		deliveries := uint32(0)
		for _, h := range c.rec.Headers {
			switch {
			case h.Key == HeaderRedriveCount:
				count, _ = strconv.Atoi(string(h.Value))
				continue
			case h.Key == HeaderDLQDeliveries && rec.KeepDeliveries:
				if n, err := strconv.ParseUint(string(h.Value), 10, 32); err == nil {
					deliveries = uint32(n)
				}
			case h.Key == HeaderRedrivenFrom:
				continue
			}
			if strings.HasPrefix(h.Key, "x-q-dlq-") {
				continue
			}
			headers = append(headers, h)
		}
		headers = append(headers,
			topics.RecordHeader{Key: HeaderRedrivenFrom, Value: []byte(dlq.rec.Name)},
			topics.RecordHeader{Key: HeaderRedriveCount, Value: []byte(strconv.Itoa(count + 1))})
		out := storedRecord{Key: c.rec.Key, Value: c.rec.Value, Headers: headers}
		size := len(out.Key) + len(out.Value)
		for _, h := range headers {
			size += len(h.Key) + len(h.Value)
		}
		part := c.m.part % d.topic.NumPartitions()
		if sp, err := strconv.Atoi(headerOf(c.rec.Headers, HeaderDLQSourcePart)); err == nil && sp >= 0 && int32(sp) < d.topic.NumPartitions() && c.dest == headerOf(c.rec.Headers, HeaderDLQSourceQueue) {
			part = int32(sp)
		}
		dq := d
		w.target(d, part).addRecord(out, deliveryState{State: stateAvailable, Due: now, Enqueued: now, Size: uint32(size), Deliveries: deliveries}, nil)
		w.onApplied = append(w.onApplied, func() { dq.totals.Redriven++ })
		moved++
	}
	rec.Moved += int64(moved)
	if done && (len(rec.IDs) == 0 || rec.Cursor[0] >= int64(len(rec.IDs))) {
		rec.State = taskDone
	}
	if rec.Limit > 0 && rec.Moved >= rec.Limit {
		rec.State = taskDone
	}
	rec.UpdatedMs = now
	final := rec
	w.op(func(b *pebblestore.Batch) { b.Set(taskKey(final.ID), taskValue(&final)) })
	w.onApplied = append(w.onApplied, func() {
		e.mu.Lock()
		t.rec = final
		e.mu.Unlock()
	})
	if err := w.commitUnlock(func() {
		if invariantsEnabled {
			for _, q := range lockList {
				q.checkQueueLocked()
			}
		}
		unlock()
	}); err != nil {
		return 0, err
	}
	t.credit -= float64(moved)
	if final.State == taskDone {
		e.log.Info().Uint64("task", final.ID).Int64("moved", final.Moved).Int64("failed", final.Failed).
			Int64("skipped_inflight", final.SkippedInflight).Msg("redrive finished")
	}
	return moved, nil
}

func headerOf(hs []topics.RecordHeader, k string) string {
	for _, h := range hs {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func (e *Engine) saveTask(t *task, rec TaskInfo) error {
	b := e.store.NewBatch()
	b.Set(taskKey(rec.ID), taskValue(&rec))
	if err := b.Commit(); err != nil {
		return err
	}
	e.mu.Lock()
	t.rec = rec
	e.mu.Unlock()
	return nil
}
