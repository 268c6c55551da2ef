package queues_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// TestDataDriven runs the scripts in testdata/ (STYLE.md rule 12) against
// the engine's public API on an in-memory filesystem, with an explicit
// clock: nothing sleeps, and time moves only by advance and tick now=.
// go test ./queues/ -run TestDataDriven -rewrite regenerates the expected
// output; commit a rewrite only if you can explain it.
//
// Messages are named by their body (keep bodies unique per queue). Times
// print relative to the clock's start: t+1.5s. Commands:
//
//	create-queue name=Q            input: attribute=value lines (the JSON
//	                               names of queues.AttributesPatch; a value
//	                               that is not JSON is a string; backoff.F
//	                               sets a backoff field)
//	send queue=Q [atomic]          input: one message per line, its body then
//	                               options: priority=P delay=MS dedup=ID ttl=MS
//	receive queue=Q [max=N] [vis=MS] [ack=A,B]
//	                               leases; ack= settles those first (AckAndReceive)
//	ack queue=Q                    input: receipts, one per line: NAME (the
//	nack queue=Q [delay=MS] [reason=R] [dead-letter]
//	extend queue=Q vis=MS          latest receipt of message NAME) or NAME#D
//	                               (the receipt of its delivery D); OTHER/NAME
//	                               a receipt of queue OTHER; raw:STRING a string
//	advance by=MS                  moves the clock
//	tick [now=MS]                  Tick at the clock (now= first sets it: ms after
//	                               the start)
//	stats queue=Q                  counters
//	dump queue=Q                   every live message (Browse): state, priority,
//	                               deliveries, due or lease end, dead-letter story
//	dlq queue=Q                    dump of Q's dead-letter queue
//	redrive queue=DLQ [dest=Q] [ids=ID,ID] [limit=N] [rate=N] [keep-deliveries]
//	tasks                          the redrive tasks
//	purge queue=Q [states=S,S]
//	restart                        close and reopen the store and the engine
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			continue // testdata/fuzz holds fuzz corpora
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := newHarness(t)
			datadriven.RunTest(t, path, h.run)
		})
	}
}

// start is the clock's origin (Unix ms).
const start = int64(1_800_000_000_000)

type harness struct {
	t     *testing.T
	fs    vfs.FS
	store *pebblestore.Store
	e     *queues.Engine
	now   int64
	// receipts[queue][name][delivery] is the receipt of that delivery.
	receipts map[string]map[string]map[uint32]string
	// ids["Q/NAME"] is the id of the message NAME's receipts are of.
	ids      map[string]string
	panicked bool
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, fs: vfs.NewMem(), now: start, receipts: map[string]map[string]map[uint32]string{}, ids: map[string]string{}}
	h.open()
	t.Cleanup(func() {
		// After a panic (an invariants check fails with a queue's mutex
		// held) Close would block: leak instead.
		if !h.panicked {
			h.close()
		}
	})
	return h
}

func (h *harness) open() {
	s, err := pebblestore.Open("data", pebblestore.Options{FS: h.fs, Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		h.t.Fatal(err)
	}
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := queues.Open(s, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(h.now))
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.e = s, e
}

func (h *harness) close() {
	if h.e != nil {
		h.e.Close()
		_ = h.store.Close()
		h.e = nil
	}
}

// rel prints a time relative to the clock's start.
func rel(ms int64) string {
	d := ms - start
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return "t" + sign + strconv.FormatFloat(float64(d)/1000, 'f', -1, 64) + "s"
}

// relTime prints a time relative to the clock's start.
func relTime(tm time.Time) string {
	return rel(tm.UnixMilli())
}

func errText(err error) string {
	var qe *queues.Error
	if errors.As(err, &qe) {
		return "error " + qe.Code + ": " + qe.Message
	}
	return "error: " + err.Error()
}

func args(td *datadriven.TestData) map[string]string {
	out := map[string]string{}
	for _, a := range td.CmdArgs {
		out[a.Key] = strings.Join(a.Vals, ",")
	}
	return out
}

func i64(t *testing.T, td *datadriven.TestData, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", td.Pos, s)
	}
	return v
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	defer func() {
		if r := recover(); r != nil {
			h.panicked = true
			panic(r)
		}
	}()
	a := args(td)
	q := a["queue"]
	switch td.Cmd {
	case "create-queue":
		return h.createQueue(t, td, a["name"])
	case "send":
		return h.send(t, td, q, td.HasArg("atomic"))
	case "receive":
		return h.receive(t, td, q, a)
	case "ack", "nack", "extend":
		return h.settle(t, td, q, a)
	case "advance":
		h.now += i64(t, td, a["by"])
		return "now " + rel(h.now)
	case "tick":
		if at, ok := a["now"]; ok {
			h.now = start + i64(t, td, at)
		}
		return h.tick()
	case "stats":
		s, err := h.e.Stats(q, time.UnixMilli(h.now))
		if err != nil {
			return errText(err)
		}
		var dead []string
		for _, k := range sortedKeys(s.Totals.DeadLettered) {
			dead = append(dead, fmt.Sprintf("%s=%d", k, s.Totals.DeadLettered[k]))
		}
		return fmt.Sprintf("available=%d ready=%d delayed=%d inflight=%d retained=%d dlq=%s dlq_depth=%d\n"+
			"totals: sent=%d received=%d acked=%d nacked=%d reaped=%d expired=%d discarded=%d redriven=%d dead_lettered=[%s]",
			s.Available, s.Ready, s.Delayed, s.Inflight, s.Retained, s.DLQ, s.DLQDepth,
			s.Totals.Sent, s.Totals.Received, s.Totals.Acked, s.Totals.Nacked, s.Totals.Reaped, s.Totals.Expired,
			s.Totals.Discarded, s.Totals.Redriven, strings.Join(dead, " "))
	case "dump":
		return h.dump(q)
	case "dlq":
		info, err := h.e.GetQueue(q)
		if err != nil {
			return errText(err)
		}
		if info.DeadLetterQueue == "" {
			return "no dead-letter queue"
		}
		return info.DeadLetterQueue + ":\n" + h.dump(info.DeadLetterQueue)
	case "redrive":
		req := queues.RedriveRequest{Destination: a["dest"], KeepDeliveries: td.HasArg("keep-deliveries")}
		if ids, ok := a["ids"]; ok {
			req.IDs = strings.Split(ids, ",")
		}
		if l, ok := a["limit"]; ok {
			req.Limit = i64(t, td, l)
		}
		if r, ok := a["rate"]; ok {
			n := int(i64(t, td, r))
			req.RatePerSec = &n
		}
		task, err := h.e.Redrive(q, req, time.UnixMilli(h.now))
		if err != nil {
			return errText(err)
		}
		return fmtTask(task)
	case "tasks":
		var out []string
		for _, task := range h.e.Tasks() {
			out = append(out, fmtTask(task))
		}
		return strings.Join(out, "\n")
	case "purge":
		var n int64
		var err error
		if s, ok := a["states"]; ok {
			n, err = h.e.PurgeMatching(q, queues.PurgeRequest{States: strings.Split(s, ",")}, time.UnixMilli(h.now))
		} else {
			n, err = h.e.Purge(q, time.UnixMilli(h.now))
		}
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("purged %d", n)
	case "restart":
		h.close()
		h.open()
		return "ok"
	}
	t.Fatalf("%s: unknown command %s", td.Pos, td.Cmd)
	return ""
}

func fmtTask(task queues.TaskInfo) string {
	return fmt.Sprintf("task %d %s on %s: moved=%d failed=%d skipped_inflight=%d", task.ID, task.State, task.DLQ, task.Moved, task.Failed, task.SkippedInflight)
}

// setPatchField sets the field of patch (an AttributesPatch or
// BackoffPatch) named like the attribute whose stored name (the catalog
// row's member, of stored) is name, to a pointer to value.
func setPatchField(t *testing.T, td *datadriven.TestData, stored reflect.Type, patch reflect.Value, name, value string) {
	for i := range stored.NumField() {
		f := stored.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != name {
			continue
		}
		dst := patch.FieldByName(f.Name)
		v := reflect.New(dst.Type().Elem())
		if err := json.Unmarshal([]byte(value), v.Interface()); err != nil {
			// A bare word is a string.
			if err := json.Unmarshal([]byte(strconv.Quote(value)), v.Interface()); err != nil {
				t.Fatalf("%s: attribute %s=%s: %v", td.Pos, name, value, err)
			}
		}
		dst.Set(v)
		return
	}
	t.Fatalf("%s: unknown attribute %s", td.Pos, name)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (h *harness) createQueue(t *testing.T, td *datadriven.TestData, name string) string {
	var p queues.AttributesPatch
	for _, l := range lines(td.Input) {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not attribute=value", td.Pos, l)
		}
		if f, ok := strings.CutPrefix(k, "backoff."); ok {
			if p.Backoff == nil {
				p.Backoff = &queues.BackoffPatch{}
			}
			setPatchField(t, td, reflect.TypeFor[queues.Backoff](), reflect.ValueOf(p.Backoff).Elem(), f, v)
			continue
		}
		setPatchField(t, td, reflect.TypeFor[queues.Attributes](), reflect.ValueOf(&p).Elem(), k, v)
	}
	info, created, err := h.e.CreateQueue(name, &p, time.UnixMilli(h.now))
	if err != nil {
		return errText(err)
	}
	out := fmt.Sprintf("created=%v %s", created, info.Name)
	if info.DeadLetterQueue != "" {
		out += " dead_letter_queue=" + info.DeadLetterQueue
	}
	return out
}

func (h *harness) send(t *testing.T, td *datadriven.TestData, q string, atomic bool) string {
	var msgs []queues.SendMessage
	var names []string
	for _, l := range lines(td.Input) {
		f := strings.Fields(l)
		body := f[0]
		m := queues.SendMessage{Body: []byte(body)}
		for _, opt := range f[1:] {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "priority":
				p := int32(i64(t, td, v))
				m.Priority = &p
			case "delay":
				d := i64(t, td, v)
				m.Delay = pms(d)
			case "ttl":
				d := i64(t, td, v)
				m.TTL = pms(d)
			case "dedup":
				id := v
				m.DedupID = &id
			default:
				t.Fatalf("%s: unknown message option %s", td.Pos, k)
			}
		}
		msgs = append(msgs, m)
		names = append(names, body)
	}
	res, err := h.e.Send(q, queues.SendRequest{Messages: msgs, Atomic: atomic}, time.UnixMilli(h.now))
	if err != nil {
		return errText(err)
	}
	var out []string
	for i, r := range res {
		switch {
		case r.Error != nil:
			out = append(out, fmt.Sprintf("%s: %s", names[i], errText(r.Error)))
		case r.Duplicate:
			out = append(out, fmt.Sprintf("%s: duplicate of %s", names[i], r.ID))
		default:
			s := fmt.Sprintf("%s: %s visible %s", names[i], r.ID, relTime(r.VisibleAt))
			if !r.ExpireAt.IsZero() {
				s += " expires " + relTime(r.ExpireAt)
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}

func (h *harness) receipt(t *testing.T, td *datadriven.TestData, q, ref string) string {
	if raw, ok := strings.CutPrefix(ref, "raw:"); ok {
		return raw
	}
	if other, r, ok := strings.Cut(ref, "/"); ok {
		q, ref = other, r
	}
	name, d, hasD := strings.Cut(ref, "#")
	byD := h.receipts[q][name]
	if hasD {
		r, ok := byD[uint32(i64(t, td, d))]
		if !ok {
			t.Fatalf("%s: no receipt of delivery %s of %s", td.Pos, d, name)
		}
		return r
	}
	var best uint32
	for k := range byD {
		best = max(best, k)
	}
	if best == 0 {
		t.Fatalf("%s: no receipt of %s", td.Pos, name)
	}
	return byD[best]
}

func (h *harness) receive(t *testing.T, td *datadriven.TestData, q string, a map[string]string) string {
	req := queues.ReceiveRequest{}
	if m, ok := a["max"]; ok {
		req.MaxMessages = int(i64(t, td, m))
	}
	if v, ok := a["vis"]; ok {
		vis := i64(t, td, v)
		req.VisibilityTimeout = pms(vis)
	}
	var ackNames []string
	if acks, ok := a["ack"]; ok {
		ackNames = strings.Split(acks, ",")
		for _, n := range ackNames {
			req.Ack = append(req.Ack, h.receipt(t, td, q, n))
		}
	}
	if _, err := h.e.CheckReceive(q, &req); err != nil {
		return errText(err)
	}
	msgs, acks, err := h.e.AckAndReceive(q, req.Ack, req, time.UnixMilli(h.now))
	if err != nil {
		return errText(err)
	}
	var out []string
	for i, r := range acks {
		out = append(out, "ack "+ackNames[i]+": "+itemText(r))
	}
	for _, m := range msgs {
		name := string(m.Body)
		if h.receipts[q] == nil {
			h.receipts[q] = map[string]map[uint32]string{}
		}
		if h.receipts[q][name] == nil || h.ids[q+"/"+name] != m.ID {
			// A new message of that name (a redriven copy has a new id).
			h.receipts[q][name] = map[uint32]string{}
			h.ids[q+"/"+name] = m.ID
		}
		h.receipts[q][name][m.Deliveries] = m.Receipt
		out = append(out, fmt.Sprintf("%s %s priority=%d deliveries=%d lease_until=%s", name, m.ID, m.Priority, m.Deliveries, relTime(m.LeaseUntil)))
	}
	if len(out) == 0 {
		return "no messages"
	}
	return strings.Join(out, "\n")
}

func itemText(r queues.ItemResult) string {
	if r.Error != nil {
		return errText(r.Error)
	}
	s := r.Status
	if !r.VisibleAt.IsZero() {
		s += " visible " + relTime(r.VisibleAt)
	}
	if !r.LeaseTill.IsZero() {
		s += " lease_until " + relTime(r.LeaseTill)
	}
	return s
}

func (h *harness) settle(t *testing.T, td *datadriven.TestData, q string, a map[string]string) string {
	refs := lines(td.Input)
	receipts := make([]string, len(refs))
	for i, ref := range refs {
		receipts[i] = h.receipt(t, td, q, ref)
	}
	var res []queues.ItemResult
	var err error
	switch td.Cmd {
	case "ack":
		res, err = h.e.Ack(q, receipts, time.UnixMilli(h.now))
	case "nack":
		req := queues.NackRequest{Receipts: receipts, Reason: a["reason"], DeadLetter: td.HasArg("dead-letter")}
		if d, ok := a["delay"]; ok {
			v := i64(t, td, d)
			req.Delay = pms(v)
		}
		res, err = h.e.Nack(q, req, time.UnixMilli(h.now))
	case "extend":
		res, err = h.e.Extend(q, queues.ExtendRequest{Receipts: receipts, VisibilityTimeout: time.Duration(i64(t, td, a["vis"])) * time.Millisecond}, time.UnixMilli(h.now))
	}
	if err != nil {
		return errText(err)
	}
	var out []string
	for i, r := range res {
		out = append(out, refs[i]+": "+itemText(r))
	}
	return strings.Join(out, "\n")
}

func (h *harness) tick() string {
	r := h.e.Tick(time.UnixMilli(h.now))
	var out []string
	add := func(k string, v int) {
		if v != 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, v))
		}
	}
	add("reaped", r.Reaped)
	add("requeued", r.Requeued)
	add("expired", r.Expired)
	add("discarded", r.Discarded)
	for _, k := range sortedKeys(r.DeadLettered) {
		add("dead_lettered."+k, r.DeadLettered[k])
	}
	add("dedup_swept", r.DedupSwept)
	add("acked_swept", r.AckedSwept)
	add("redrive_moved", r.RedriveMoved)
	add("errors", r.Errors)
	if len(out) == 0 {
		return "tick at " + rel(h.now) + ": nothing"
	}
	return "tick at " + rel(h.now) + ": " + strings.Join(out, " ")
}

// dump lists a queue's live messages (Browse, partition and offset order).
func (h *harness) dump(q string) string {
	var out []string
	after := ""
	for {
		msgs, next, err := h.e.Browse(q, queues.BrowseRequest{After: after, Limit: 1000}, time.UnixMilli(h.now))
		if err != nil {
			return errText(err)
		}
		for _, m := range msgs {
			body := "<no body>"
			if m.Body != nil {
				body = string(m.Body)
			}
			s := fmt.Sprintf("%s %s %s priority=%d deliveries=%d", m.ID, body, m.State, m.Priority, m.Deliveries)
			if m.Nacks > 0 {
				s += fmt.Sprintf(" nacks=%d", m.Nacks)
			}
			if m.Expiries > 0 {
				s += fmt.Sprintf(" expiries=%d", m.Expiries)
			}
			switch {
			case !m.LeaseUntil.IsZero():
				s += " lease_until=" + relTime(m.LeaseUntil)
			case !m.VisibleAt.IsZero():
				s += " visible=" + relTime(m.VisibleAt)
			}
			if m.LastError != "" {
				s += fmt.Sprintf(" last_error=%q", m.LastError)
			}
			if dl := m.DeadLetter; dl != nil {
				s += fmt.Sprintf(" dead_letter(reason=%s source=%s/%s deliveries=%d", dl.Reason, dl.SourceQueue, dl.SourceID, dl.Deliveries)
				if dl.Detail != "" {
					s += fmt.Sprintf(" detail=%q", dl.Detail)
				}
				s += ")"
			}
			if from, ok := m.Headers[queues.HeaderRedrivenFrom]; ok {
				s += fmt.Sprintf(" redriven_from=%s count=%s", from, m.Headers[queues.HeaderRedriveCount])
			}
			out = append(out, s)
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(out) == 0 {
		return "empty"
	}
	return strings.Join(out, "\n")
}

// pms is a duration of ms milliseconds, by pointer.
func pms(ms int64) *time.Duration {
	d := time.Duration(ms) * time.Millisecond
	return &d
}
