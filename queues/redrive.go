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
	budget := t.stepBudget(now)
	if budget < 1 {
		return 0, nil
	}
	e.mu.RLock()
	dlq := e.mu.byID[t.rec.DLQID]
	e.mu.RUnlock()
	run := &redriveRun{e: e, t: t, dlq: dlq, rec: t.rec, now: now}
	if dlq == nil || t.deleted {
		run.rec.State, run.rec.Error, run.rec.UpdatedMs = taskFailed, "the dead-letter queue was deleted", now
		return 0, e.saveTask(t, run.rec)
	}
	if run.rec.Limit > 0 && run.rec.Moved >= run.rec.Limit {
		run.rec.State, run.rec.UpdatedMs = taskDone, now
		return 0, e.saveTask(t, run.rec)
	}
	if run.rec.Limit > 0 {
		budget = int(min(int64(budget), run.rec.Limit-run.rec.Moved))
	}
	cands, done, err := run.pick(budget)
	if err != nil {
		return 0, err
	}
	moves, dests, lockList := run.destinations(cands)
	unlock := lockQueues(lockList...)
	w := &write{e: e, now: now}
	moved, err := run.moveLocked(w, moves, dests)
	if err != nil {
		unlock()
		return 0, err
	}
	final := run.finishLocked(w, moved, done)
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

// stepBudget refills the task's credit for the time since its last step
// (RatePerSec, at most one second's worth) and returns how many messages
// this step may move.
func (t *task) stepBudget(now int64) int {
	if t.lastStep == 0 {
		t.credit = float64(t.rec.RatePerSec) // the first second's budget
	} else if now > t.lastStep {
		t.credit += float64(t.rec.RatePerSec) * float64(now-t.lastStep) / 1000
	}
	t.credit = min(t.credit, float64(t.rec.RatePerSec))
	t.lastStep = now
	return min(int(t.credit), redriveStepMax)
}

// redriveRun is one step of a redrive task: rec is the task as the step
// leaves it (cursor, counters), saved with the moves in one batch.
type redriveRun struct {
	e   *Engine
	t   *task
	dlq *queue
	rec TaskInfo
	now int64
}

// pick is the step's first phase, under the DLQ's lock: it walks the task's
// ids or partitions from its cursor and picks up to budget available
// messages that match the filter. done is false when the walk stopped
// before the end (budget or examination bound reached).
func (r *redriveRun) pick(budget int) (cands []redriveCandidate, done bool, err error) {
	r.dlq.mu.Lock()
	defer r.dlq.mu.Unlock()
	rr := newRecordReader(r.dlq.topic)
	examined := 0
	done = true
	visit := func(m msgKey) (stop bool) {
		if examined >= 4*redriveStepMax || len(cands) >= budget {
			done = false
			return true
		}
		examined++
		if c, ok := r.candidate(rr, m); ok {
			cands = append(cands, c)
		}
		return false
	}
	r.rec.Cursor = append([]int64(nil), r.rec.Cursor...)
	if len(r.rec.IDs) > 0 {
		for r.rec.Cursor[0] < int64(len(r.rec.IDs)) {
			m, _ := parseID(r.rec.IDs[r.rec.Cursor[0]])
			if visit(m) {
				break
			}
			r.rec.Cursor[0]++
		}
		return cands, done, nil
	}
	for p := range r.rec.Cursor {
		if r.rec.Cursor[p] >= r.rec.End[p] {
			continue
		}
		stopped, err := r.walkPartition(int32(p), visit)
		if err != nil {
			return nil, false, err
		}
		if stopped {
			break
		}
		r.rec.Cursor[p] = r.rec.End[p]
	}
	return cands, done, nil
}

// walkPartition visits the DLQ's state rows of partition p from the
// task's cursor to its end, advancing the cursor past each visited one.
// REQUIRES: r.dlq.mu held.
func (r *redriveRun) walkPartition(p int32, visit func(m msgKey) (stop bool)) (stopped bool, err error) {
	it, err := r.e.store.NewIter(stateKey(r.dlq.id, msgKey{part: p, off: r.rec.Cursor[p]}), stateKey(r.dlq.id, msgKey{part: p, off: r.rec.End[p]}))
	if err != nil {
		return false, err
	}
	defer func() { _ = it.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		m := msgFromKeyTail(it.Key())
		if visit(m) {
			return true, nil
		}
		r.rec.Cursor[p] = m.off + 1
	}
	return false, nil
}

// candidate says whether the DLQ's message m is to be moved: available
// (a leased one is counted as skipped), its record readable (else counted
// as failed) and matching the task's filter.
// REQUIRES: r.dlq.mu held.
func (r *redriveRun) candidate(rr *recordReader, m msgKey) (redriveCandidate, bool) {
	st, ok, err := r.e.getState(r.dlq, m)
	if err != nil || !ok {
		return redriveCandidate{}, false
	}
	if st.State == stateInflight {
		r.rec.SkippedInflight++
		return redriveCandidate{}, false
	}
	if st.State != stateAvailable {
		return redriveCandidate{}, false
	}
	rec, err := rr.read(m)
	if err != nil {
		r.rec.Failed++
		return redriveCandidate{}, false
	}
	hdr := map[string]string{}
	for _, h := range rec.Headers {
		hdr[h.Key] = string(h.Value)
	}
	if !r.rec.Filter.matches(hdr, r.rec.failedBeforeMs()) {
		return redriveCandidate{}, false
	}
	dest := r.rec.Destination
	if dest == "" {
		dest = hdr[HeaderDLQSourceQueue]
	}
	return redriveCandidate{m: m, st: st, rec: rec, dest: dest}, true
}

// matches says whether a dead-lettered record with headers hdr passes the
// filter (failedBeforeMs: its bound in Unix ms, 0 for none).
func (f *RedriveFilter) matches(hdr map[string]string, failedBeforeMs int64) bool {
	if f.Reason != "" && hdr[HeaderDLQReason] != f.Reason || f.Source != "" && hdr[HeaderDLQSourceQueue] != f.Source {
		return false
	}
	if failedBeforeMs > 0 {
		if at, ok := parseHeaderTime(hdr[HeaderDLQFailedAt]); !ok || at >= failedBeforeMs {
			return false
		}
	}
	return true
}

// destinations resolves the candidates' destination queues: moves are the
// candidates whose destination exists and is not the DLQ itself (the
// others are counted as failed and stay), lockList the DLQ and the
// destinations, to lock together for the second phase.
func (r *redriveRun) destinations(cands []redriveCandidate) (moves []redriveCandidate, dests map[string]*queue, lockList []*queue) {
	dests = map[string]*queue{}
	lockList = []*queue{r.dlq}
	for _, c := range cands {
		d, ok := dests[c.dest]
		if !ok {
			d, _ = r.e.queueByName(c.dest)
			dests[c.dest] = d
			if d != nil {
				lockList = append(lockList, d)
			}
		}
		if d == nil || d == r.dlq {
			r.rec.Failed++ // the destination is gone (or is the DLQ itself): the message stays
			continue
		}
		moves = append(moves, c)
	}
	return moves, dests, lockList
}

// moveLocked is the step's second phase: each move still available with
// the same deliveries (re-checked under the locks) leaves the DLQ and is
// appended to its destination within w.
// REQUIRES: the locks of r.dlq and of every destination held.
func (r *redriveRun) moveLocked(w *write, moves []redriveCandidate, dests map[string]*queue) (int, error) {
	moved := 0
	for _, c := range moves {
		d := dests[c.dest]
		if d.deleted || r.dlq.deleted {
			r.rec.Failed++
			continue
		}
		st, ok, err := r.e.getState(r.dlq, c.m)
		if err != nil {
			return 0, err
		}
		if !ok || st.State != stateAvailable || st.Deliveries != c.st.Deliveries {
			if ok && st.State == stateInflight {
				r.rec.SkippedInflight++
			}
			continue
		}
		m, old, dlq := c.m, st, r.dlq
		w.op(func(b *pebblestore.Batch) { dlq.removeRows(b, m, &old) })
		w.onApplied = append(w.onApplied, func() { dlq.forgetLocked(m, &old) })
		out, deliveries := redrivenRecord(c.rec, dlq.rec.Name, r.rec.KeepDeliveries)
		w.target(d, redrivePartition(&c, d)).addRecord(out,
			deliveryState{State: stateAvailable, Due: r.now, Enqueued: r.now, Size: uint32(out.size()), Deliveries: deliveries}, nil)
		w.onApplied = append(w.onApplied, func() { d.totals.Redriven++ })
		moved++
	}
	return moved, nil
}

// redrivenRecord is the record a redrive appends: the dead-letter headers
// dropped, x-q-redriven-from set and x-q-redrive-count raised by one; with
// keepDeliveries, the delivery count the message had when it died.
func redrivenRecord(rec storedRecord, dlqName string, keepDeliveries bool) (storedRecord, uint32) {
	headers := make([]topics.RecordHeader, 0, len(rec.Headers)+2)
	count := 0
	deliveries := uint32(0)
	for _, h := range rec.Headers {
		switch {
		case h.Key == HeaderRedriveCount:
			count, _ = strconv.Atoi(string(h.Value))
			continue
		case h.Key == HeaderDLQDeliveries && keepDeliveries:
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
		topics.RecordHeader{Key: HeaderRedrivenFrom, Value: []byte(dlqName)},
		topics.RecordHeader{Key: HeaderRedriveCount, Value: []byte(strconv.Itoa(count + 1))})
	return storedRecord{Key: rec.Key, Value: rec.Value, Headers: headers}, deliveries
}

// redrivePartition is the destination partition of a move: the source
// partition when the message goes back to its source queue and that
// partition exists, else its DLQ partition modulo the destination's.
func redrivePartition(c *redriveCandidate, d *queue) int32 {
	part := c.m.part % d.topic.NumPartitions()
	if sp, err := strconv.Atoi(headerOf(c.rec.Headers, HeaderDLQSourcePart)); err == nil && sp >= 0 && int32(sp) < d.topic.NumPartitions() && c.dest == headerOf(c.rec.Headers, HeaderDLQSourceQueue) {
		part = int32(sp)
	}
	return part
}

// finishLocked counts the step's moves, decides whether the task is done
// and adds the task row to w; the in-memory task follows once applied.
// REQUIRES: the step's locks held.
func (r *redriveRun) finishLocked(w *write, moved int, done bool) TaskInfo {
	rec := &r.rec
	rec.Moved += int64(moved)
	if done && (len(rec.IDs) == 0 || rec.Cursor[0] >= int64(len(rec.IDs))) {
		rec.State = taskDone
	}
	if rec.Limit > 0 && rec.Moved >= rec.Limit {
		rec.State = taskDone
	}
	rec.UpdatedMs = r.now
	final := *rec
	w.op(func(b *pebblestore.Batch) { b.Set(taskKey(final.ID), taskValue(&final)) })
	w.onApplied = append(w.onApplied, func() {
		r.e.mu.Lock()
		r.t.rec = final
		r.e.mu.Unlock()
	})
	return final
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
