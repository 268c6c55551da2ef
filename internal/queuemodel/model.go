// Package queuemodel is the sequential specification of one native queue
// as porcupine (github.com/anishathalye/porcupine) checks histories
// against it (TESTING.md, "Linearizability of the native queue"). Only
// tests use it: httpapi's concurrent clients and clustertests' receive and
// ack racing a kill -9 of the broker.
//
// The state is, per message (identified by its body, unique per send),
// whether it is acked, whether it is leased, and the receipt of its
// latest delivery. A message is available when neither acked nor leased.
//
//   - send(body): body is new; it becomes available.
//   - receive -> body, receipt: body is available; it becomes leased under
//     receipt, one never issued for it before. receive -> nothing: no
//     message is available.
//   - ack(body, receipt) succeeds iff body is not acked and receipt is its
//     latest delivery's (leased, or released by a nack and not received
//     again: the engine's late ack, DESIGN.md "Epoch fencing"); body
//     becomes acked. Otherwise it fails and nothing changes.
//   - nack(body, receipt), delay 0, succeeds iff body is leased under
//     receipt; body becomes available (the receipt stays its latest).
//     Otherwise it fails and nothing changes.
//   - extend(body, receipt) succeeds iff body is leased under receipt;
//     nothing changes.
//
// An operation whose outcome the client does not know (the connection
// broke, the broker was killed) may have happened or not: both successor
// states are kept (a nondeterministic model); an unknown receive may have
// leased any available message under a receipt nobody holds.
//
// So a message is held by one receipt at a time: a receive returns only an
// available message, and no receive returns it again before a nack
// releases it. Abstracted away: which available message a receive picks
// (ordering, priorities, partitions, FIFO groups), lease deadlines (the
// tests use leases that cannot lapse), delivery counts and limits, the
// DLQ, TTLs and deduplication.
package queuemodel

import (
	"fmt"
	"hash/fnv"
	"maps"

	"github.com/anishathalye/porcupine"
)

// Kinds of operations.
const (
	Send    = "send"
	Receive = "receive"
	Ack     = "ack"
	Nack    = "nack"
	Extend  = "extend"
)

// unknownReceipt stands for the receipt of a receive whose answer was lost:
// no client holds it, no input names it.
const unknownReceipt = "?"

// Op is an operation's input.
type Op struct {
	Kind string
	// Body is the message sent, or the message the receipt was issued for
	// (ack, nack, extend).
	Body    string
	Receipt string
}

// Result is an operation's output.
type Result struct {
	// Unknown: the client got no answer; the operation may or may not have
	// taken effect.
	Unknown bool
	Body    string // receive: the message ("" for nothing)
	Receipt string // receive
	OK      bool   // ack, nack, extend: the item succeeded
	Detail  string // the status or error code answered, for reports
}

// State is the model's state; never modified in place.
type State map[string]Message

// Message is one message's state.
type Message struct {
	Acked   bool
	Leased  bool
	Receipt string
}

func (s State) with(body string, m Message) State {
	n := maps.Clone(s)
	n[body] = m
	return n
}

// step is the deterministic step of an operation whose result is known:
// ok false when the result is impossible from s.
func step(s State, in Op, out Result) (State, bool) {
	m, known := s[in.Body]
	switch in.Kind {
	case Send:
		if known {
			return s, false
		}
		return s.with(in.Body, Message{}), true
	case Receive:
		if out.Body == "" {
			for _, m := range s {
				if !m.Acked && !m.Leased {
					return s, false
				}
			}
			return s, true
		}
		m, known = s[out.Body]
		if !known || m.Acked || m.Leased || out.Receipt == "" || out.Receipt == m.Receipt {
			return s, false
		}
		return s.with(out.Body, Message{Leased: true, Receipt: out.Receipt}), true
	case Ack:
		can := known && !m.Acked && m.Receipt == in.Receipt
		if can != out.OK {
			return s, false
		}
		if !can {
			return s, true
		}
		return s.with(in.Body, Message{Acked: true, Receipt: m.Receipt}), true
	case Nack, Extend:
		can := known && m.Leased && m.Receipt == in.Receipt
		if can != out.OK {
			return s, false
		}
		if !can || in.Kind == Extend {
			return s, true
		}
		return s.with(in.Body, Message{Receipt: m.Receipt}), true
	}
	return s, false
}

// effects are the states an operation of unknown outcome may have left
// besides s itself.
func effects(s State, in Op) []any {
	var out []any
	switch in.Kind {
	case Send:
		if n, ok := step(s, in, Result{}); ok {
			out = append(out, n)
		}
	case Receive:
		for body, m := range s {
			if !m.Acked && !m.Leased {
				out = append(out, s.with(body, Message{Leased: true, Receipt: unknownReceipt}))
			}
		}
	case Ack, Nack:
		if n, ok := step(s, in, Result{OK: true}); ok {
			out = append(out, n)
		}
	}
	return out
}

func nondeterministicStep(state, input, output any) []any {
	s, in, out := state.(State), input.(Op), output.(Result)
	if out.Unknown {
		return append([]any{s}, effects(s, in)...)
	}
	if n, ok := step(s, in, out); ok {
		return []any{n}
	}
	return nil
}

func equal(a, b any) bool { return maps.Equal(a.(State), b.(State)) }

// hash is order-independent: a sum of per-message hashes.
func hash(state any) uint64 {
	var sum uint64
	for body, m := range state.(State) {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s|%v|%v|%s", body, m.Acked, m.Leased, m.Receipt)
		sum += h.Sum64()
	}
	return sum
}

// Describe is an operation in one line, for reports.
func Describe(input, output any) string {
	in, out := input.(Op), output.(Result)
	suffix := ""
	if out.Unknown {
		suffix = " (outcome unknown)"
	}
	switch in.Kind {
	case Send:
		return "send " + in.Body + suffix
	case Receive:
		if out.Unknown {
			return "receive" + suffix
		}
		if out.Body == "" {
			return "receive -> nothing"
		}
		return fmt.Sprintf("receive -> %s %.12s", out.Body, out.Receipt)
	}
	if out.Unknown {
		return fmt.Sprintf("%s(%s %.12s)%s", in.Kind, in.Body, in.Receipt, suffix)
	}
	return fmt.Sprintf("%s(%s %.12s) -> %v %s", in.Kind, in.Body, in.Receipt, out.OK, out.Detail)
}

// Model is the porcupine model of one queue.
var Model = (&porcupine.NondeterministicModel{
	Init:              func() []any { return []any{State{}} },
	Step:              nondeterministicStep,
	Equal:             equal,
	Hash:              hash,
	DescribeOperation: Describe,
}).ToModel()
