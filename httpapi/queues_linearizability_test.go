package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of one native queue (TESTING.md, "Linearizability
// of the native queue"). The state is, per message ID, whether it is
// acked, whether it is leased, and the receipt of its latest delivery.
// A message is available when it is neither acked nor leased.
//
//   - send -> id: id is new; it becomes available.
//   - receive -> id, receipt: id is available; it becomes leased under
//     receipt (a receipt never issued for it before). receive -> nothing:
//     no message is available.
//   - ack(id, receipt) succeeds iff id is not acked and receipt is its
//     latest delivery's (leased, or released by a nack and not received
//     again: the engine's late ack); id becomes acked. Otherwise it fails
//     and nothing changes.
//   - nack(id, receipt) with delay 0 succeeds iff id is leased under
//     receipt; id becomes available (the receipt stays its latest).
//     Otherwise it fails and nothing changes.
//   - extend(id, receipt) succeeds iff id is leased under receipt;
//     nothing changes.
//
// So a message is held by one receipt at a time: a receive may return only
// an available message, and no receive returns it again before a nack
// releases it.
type queueModelState map[string]queueModelMessage

type queueModelMessage struct {
	Acked   bool
	Leased  bool
	Receipt string
}

// queueOp is a porcupine input; queueResult its output.
type queueOp struct {
	Kind    string // send, receive, ack, nack, extend
	ID      string // ack, nack, extend: the message the receipt was issued for
	Receipt string
}

type queueResult struct {
	ID      string // send, receive: the message ("" for an empty receive)
	Receipt string // receive
	OK      bool   // ack, nack, extend: the item succeeded
	Detail  string // the status or error code answered, for the report
}

func (s queueModelState) with(id string, m queueModelMessage) queueModelState {
	n := maps.Clone(s)
	n[id] = m
	return n
}

func queueModelStep(state, input, output any) (bool, any) {
	s, in, out := state.(queueModelState), input.(queueOp), output.(queueResult)
	m, known := s[in.ID]
	switch in.Kind {
	case "send":
		if _, dup := s[out.ID]; dup || out.ID == "" {
			return false, s
		}
		return true, s.with(out.ID, queueModelMessage{})
	case "receive":
		if out.ID == "" {
			for _, m := range s {
				if !m.Acked && !m.Leased {
					return false, s
				}
			}
			return true, s
		}
		m, known = s[out.ID]
		if !known || m.Acked || m.Leased || out.Receipt == "" || out.Receipt == m.Receipt {
			return false, s
		}
		return true, s.with(out.ID, queueModelMessage{Leased: true, Receipt: out.Receipt})
	case "ack":
		can := known && !m.Acked && m.Receipt == in.Receipt
		if can != out.OK {
			return false, s
		}
		if !can {
			return true, s
		}
		return true, s.with(in.ID, queueModelMessage{Acked: true, Receipt: m.Receipt})
	case "nack", "extend":
		can := known && m.Leased && m.Receipt == in.Receipt
		if can != out.OK {
			return false, s
		}
		if !can || in.Kind == "extend" {
			return true, s
		}
		return true, s.with(in.ID, queueModelMessage{Receipt: m.Receipt})
	}
	return false, s
}

var queueModel = porcupine.Model{
	Init: func() any { return queueModelState{} },
	Step: queueModelStep,
	Equal: func(a, b any) bool {
		return maps.Equal(a.(queueModelState), b.(queueModelState))
	},
	Hash: func(state any) uint64 {
		var sum uint64 // order-independent: a sum of per-entry hashes
		for id, m := range state.(queueModelState) {
			h := fnv.New64a()
			fmt.Fprintf(h, "%s|%v|%v|%s", id, m.Acked, m.Leased, m.Receipt)
			sum += h.Sum64()
		}
		return sum
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(queueOp), output.(queueResult)
		switch in.Kind {
		case "send":
			return "send -> " + out.ID
		case "receive":
			if out.ID == "" {
				return "receive -> nothing"
			}
			return fmt.Sprintf("receive -> %s %.8s", out.ID, out.Receipt)
		}
		return fmt.Sprintf("%s(%s %.8s) -> %v %s", in.Kind, in.ID, in.Receipt, out.OK, out.Detail)
	},
}

// TestQueueModelRejectsBadHistories: the model is not vacuous. Each
// hand-made history breaks one rule and porcupine finds it not
// linearizable; the same history with the violation removed passes.
func TestQueueModelRejectsBadHistories(t *testing.T) {
	op := func(client int, call, ret int64, in queueOp, out queueResult) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	send := op(0, 0, 1, queueOp{Kind: "send"}, queueResult{ID: "m1"})
	recvA := op(1, 2, 3, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rA"})
	cases := []struct {
		name string
		bad  []porcupine.Operation
		good []porcupine.Operation
	}{
		{"a message held by two receipts at once",
			[]porcupine.Operation{send, recvA, op(2, 4, 5, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rB"})},
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "nack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(2, 6, 7, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rB"})}},
		{"an empty receive while a message is available",
			[]porcupine.Operation{send, op(1, 2, 3, queueOp{Kind: "receive"}, queueResult{})},
			[]porcupine.Operation{op(1, 0, 3, queueOp{Kind: "receive"}, queueResult{}), op(0, 1, 2, queueOp{Kind: "send"}, queueResult{ID: "m1"})}},
		{"an ack with a stale receipt succeeds",
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "nack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(2, 6, 7, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rB"}),
				op(1, 8, 9, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{OK: true})},
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "nack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(2, 6, 7, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rB"}),
				op(1, 8, 9, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{})}},
		{"an ack with the current receipt fails",
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{})},
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{OK: true})}},
		{"an acked message received again",
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(2, 6, 7, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rB"})},
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "ack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(2, 6, 7, queueOp{Kind: "receive"}, queueResult{})}},
		{"a nack of a message no longer leased succeeds",
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "nack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(1, 6, 7, queueOp{Kind: "extend", ID: "m1", Receipt: "rA"}, queueResult{OK: true})},
			[]porcupine.Operation{send, recvA, op(1, 4, 5, queueOp{Kind: "nack", ID: "m1", Receipt: "rA"}, queueResult{OK: true}),
				op(1, 6, 7, queueOp{Kind: "extend", ID: "m1", Receipt: "rA"}, queueResult{})}},
		{"a message received before any send",
			[]porcupine.Operation{recvA, op(0, 4, 5, queueOp{Kind: "send"}, queueResult{ID: "m1"})},
			[]porcupine.Operation{op(1, 2, 6, queueOp{Kind: "receive"}, queueResult{ID: "m1", Receipt: "rA"}), op(0, 4, 5, queueOp{Kind: "send"}, queueResult{ID: "m1"})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if porcupine.CheckOperations(queueModel, tc.bad) {
				t.Fatal("porcupine accepted the bad history")
			}
			if !porcupine.CheckOperations(queueModel, tc.good) {
				t.Fatal("porcupine refused the corrected history")
			}
		})
	}
}

// linClient runs one client's random operations and records them.
type linClient struct {
	t      *testing.T
	base   string
	start  time.Time
	id     int
	rng    *rand.Rand
	shared *linReceipts
	http   *http.Client
}

// linReceipts are every receipt any client was given, with its message,
// so that clients use each other's receipts, current and stale.
type linReceipts struct {
	mu   sync.Mutex
	list []queueOp
}

func (r *linReceipts) add(id, receipt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, queueOp{ID: id, Receipt: receipt})
}

// pick is a recent receipt most of the time, any older one otherwise.
func (r *linReceipts) pick(rng *rand.Rand) (queueOp, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return queueOp{}, false
	}
	if rng.IntN(4) > 0 {
		return r.list[max(0, len(r.list)-1-rng.IntN(6))], true
	}
	return r.list[rng.IntN(len(r.list))], true
}

func (c *linClient) post(path string, body any, out any) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := c.http.Post(c.base+"/v1/queues/lin/"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Errorf("%s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Errorf("%s: status %d", path, resp.StatusCode)
		return
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		c.t.Errorf("%s: %v", path, err)
	}
}

type linItems struct {
	Results []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	} `json:"results"`
	Messages []struct {
		ID      string `json:"id"`
		Receipt string `json:"receipt"`
	} `json:"messages"`
}

// one runs one random operation and returns it as porcupine records it.
func (c *linClient) one(seq int) porcupine.Operation {
	in := queueOp{Kind: "receive"}
	switch n := c.rng.IntN(20); {
	case n < 4:
		in.Kind = "send"
	case n < 11:
	default:
		r, ok := c.shared.pick(c.rng)
		if ok {
			in = r
			in.Kind = []string{"ack", "ack", "ack", "nack", "nack", "nack", "extend", "extend", "ack"}[n-11]
		}
	}
	var res linItems
	call := time.Since(c.start).Nanoseconds()
	switch in.Kind {
	case "send":
		c.post("messages", map[string]any{"messages": []map[string]any{{"body": fmt.Sprintf("c%d-%d", c.id, seq)}}}, &res)
	case "receive":
		c.post("receive", map[string]any{"max_messages": 1}, &res)
	case "ack":
		c.post("ack", map[string]any{"receipts": []string{in.Receipt}}, &res)
	case "nack":
		c.post("nack", map[string]any{"receipts": []string{in.Receipt}, "delay_ms": 0}, &res)
	case "extend":
		c.post("extend", map[string]any{"receipts": []string{in.Receipt}, "visibility_timeout_ms": 600000}, &res)
	}
	ret := time.Since(c.start).Nanoseconds()
	var out queueResult
	switch {
	case in.Kind == "receive" && len(res.Messages) > 0:
		out.ID, out.Receipt = res.Messages[0].ID, res.Messages[0].Receipt
		c.shared.add(out.ID, out.Receipt)
	case in.Kind == "receive":
	case len(res.Results) != 1:
		c.t.Errorf("%s: %d results", in.Kind, len(res.Results))
	case in.Kind == "send":
		out.ID = res.Results[0].ID
	case res.Results[0].Error != nil:
		out.Detail = res.Results[0].Error.Code
	default:
		out.Detail = res.Results[0].Status
		out.OK = out.Detail == map[string]string{"ack": "acked", "nack": "requeued", "extend": "extended"}[in.Kind]
	}
	return porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret}
}

// TestQueueLinearizable: six clients send, receive, ack, nack (delay 0)
// and extend concurrently on one queue of a real server (HTTP over TCP,
// Pebble in a temp dir), using each other's receipts, current and stale;
// the server's clock is frozen, so no lease expires. Porcupine must find
// the history linearizable under the model above.
func TestQueueLinearizable(t *testing.T) {
	env := newQueueEnv(t)
	checkQueueLinearizable(t, env, []string{env.base})
}

// TestQueueLinearizableTwoListeners: the same over two HTTP servers (two
// listeners) of one engine, each client on one of them.
func TestQueueLinearizableTwoListeners(t *testing.T) {
	env := newQueueEnv(t)
	_, second := startServer(t, Config{}, func(s *Server) {
		s.RegisterQueues(QueuesConfig{Engine: env.e, Now: func() time.Time { return env.now }})
	})
	checkQueueLinearizable(t, env, []string{env.base, second})
}

func checkQueueLinearizable(t *testing.T, env *queueEnv, bases []string) {
	env.mustJSON("PUT", "/v1/queues/lin", `{"max_receives":0,"visibility_timeout_ms":600000,"dead_letter":"none"}`, 201)
	const clients, opsPerClient = 6, 150
	shared := &linReceipts{}
	start := time.Now()
	history := make([][]porcupine.Operation, clients)
	var wg sync.WaitGroup
	for id := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &linClient{t: t, base: bases[id%len(bases)], start: start, id: id, rng: rand.New(rand.NewPCG(uint64(id), 7)), shared: shared,
				http: &http.Client{Timeout: 10 * time.Second}}
			for seq := range opsPerClient {
				history[id] = append(history[id], c.one(seq))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	all := slices.Concat(history...)
	kinds := map[string]int{}
	for _, op := range all {
		in, out := op.Input.(queueOp), op.Output.(queueResult)
		key := in.Kind
		if in.Kind == "receive" && out.ID == "" {
			key = "receive-empty"
		} else if in.Kind != "send" && in.Kind != "receive" {
			key += ":" + map[bool]string{true: "ok", false: "refused"}[out.OK]
		}
		kinds[key]++
	}
	ran := time.Since(start)
	res, info := porcupine.CheckOperationsVerbose(queueModel, all, 8*time.Second)
	t.Logf("%d operations in %v: %v; porcupine: %v in %v", len(all), ran.Round(time.Millisecond), kinds, res, (time.Since(start) - ran).Round(time.Millisecond))
	if res != porcupine.Ok {
		var b strings.Builder
		for _, part := range info.PartialLinearizationsOperations() {
			for _, lin := range part {
				for _, op := range lin {
					b.WriteString(queueModel.DescribeOperation(op.Input, op.Output) + "; ")
				}
				b.WriteString("\n")
				break
			}
		}
		t.Fatalf("the queue's history is not linearizable (%v); longest partial linearization:\n%s", res, b.String())
	}
	// The history exercised every rule: refusals of stale receipts and
	// successes of each kind.
	for _, k := range []string{"send", "receive", "receive-empty", "ack:ok", "ack:refused", "nack:ok", "nack:refused", "extend:ok"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the history: the test did not exercise it", k)
		}
	}
}
