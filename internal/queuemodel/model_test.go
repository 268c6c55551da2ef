package queuemodel

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, in Op, out Result) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

// unknown is an operation without an answer: it may take effect at any
// time after its call.
func unknown(client int, call int64, in Op) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: 1 << 62, Input: in, Output: Result{Unknown: true}}
}

var (
	send  = op(0, 0, 1, Op{Kind: Send, Body: "m1"}, Result{})
	recvA = op(1, 2, 3, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rA"})
	nackA = op(1, 4, 5, Op{Kind: Nack, Body: "m1", Receipt: "rA"}, Result{OK: true})
	ackA  = op(1, 4, 5, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{OK: true})
)

// TestModelRejectsBadHistories: the model is not vacuous. Each hand-made
// history breaks one rule and porcupine finds it not linearizable; the
// same history with the violation corrected passes.
func TestModelRejectsBadHistories(t *testing.T) {
	cases := []struct {
		name      string
		bad, good []porcupine.Operation
	}{
		{"a message held by two receipts at once",
			[]porcupine.Operation{send, recvA, op(2, 4, 5, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"})},
			[]porcupine.Operation{send, recvA, nackA, op(2, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"})}},
		{"an empty receive while a message is available",
			[]porcupine.Operation{send, op(1, 2, 3, Op{Kind: Receive}, Result{})},
			[]porcupine.Operation{op(1, 0, 3, Op{Kind: Receive}, Result{}), op(0, 1, 2, Op{Kind: Send, Body: "m1"}, Result{})}},
		{"an ack with a stale receipt succeeds",
			[]porcupine.Operation{send, recvA, nackA, op(2, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"}),
				op(1, 8, 9, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{OK: true})},
			[]porcupine.Operation{send, recvA, nackA, op(2, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"}),
				op(1, 8, 9, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{Detail: "lease_lost"})}},
		{"an ack with the current receipt fails",
			[]porcupine.Operation{send, recvA, op(1, 4, 5, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{})},
			[]porcupine.Operation{send, recvA, ackA}},
		{"an acked message received again",
			[]porcupine.Operation{send, recvA, ackA, op(2, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"})},
			[]porcupine.Operation{send, recvA, ackA, op(2, 6, 7, Op{Kind: Receive}, Result{})}},
		{"a nack of a message no longer leased succeeds",
			[]porcupine.Operation{send, recvA, nackA, op(1, 6, 7, Op{Kind: Extend, Body: "m1", Receipt: "rA"}, Result{OK: true})},
			[]porcupine.Operation{send, recvA, nackA, op(1, 6, 7, Op{Kind: Extend, Body: "m1", Receipt: "rA"}, Result{})}},
		{"a message received before any send",
			[]porcupine.Operation{recvA, op(0, 4, 5, Op{Kind: Send, Body: "m1"}, Result{})},
			[]porcupine.Operation{op(1, 2, 6, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rA"}), op(0, 4, 5, Op{Kind: Send, Body: "m1"}, Result{})}},
		// Unknown outcomes: a lost receive may have leased the only message,
		// so an empty receive after it is fine, but a receive returning it
		// twice is not, and a lease taken before a crash keeps the message
		// from everyone else.
		{"an unknown receive does not allow a second holder",
			[]porcupine.Operation{send, unknown(2, 2, Op{Kind: Receive}), recvA, op(3, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rC"})},
			[]porcupine.Operation{send, unknown(2, 2, Op{Kind: Receive}), recvA, op(3, 6, 7, Op{Kind: Receive}, Result{})}},
		{"an unknown send: received or not, but only once",
			[]porcupine.Operation{unknown(0, 0, Op{Kind: Send, Body: "m1"}), recvA, op(2, 4, 5, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"})},
			[]porcupine.Operation{unknown(0, 0, Op{Kind: Send, Body: "m1"}), recvA, op(2, 4, 5, Op{Kind: Receive}, Result{})}},
		{"an unknown ack never releases the message",
			[]porcupine.Operation{send, recvA, unknown(1, 4, Op{Kind: Ack, Body: "m1", Receipt: "rA"}), op(2, 6, 7, Op{Kind: Receive}, Result{Body: "m1", Receipt: "rB"})},
			[]porcupine.Operation{send, recvA, unknown(1, 4, Op{Kind: Ack, Body: "m1", Receipt: "rA"}), op(2, 6, 7, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{OK: true})}},
		// TestQueueLeasesSurviveKill's failure (TESTING.md): a receive cut by
		// a kill (its return bounded by the kill, at 10) leased the message
		// before an ack of the previous receipt was refused, and after the
		// restart that receipt acked: the lease was seen, then lost.
		{"a lease seen by a refusal, then lost",
			[]porcupine.Operation{send, recvA, nackA, op(2, 6, 10, Op{Kind: Receive}, Result{Unknown: true}),
				op(1, 7, 8, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{Detail: "lease_lost"}),
				op(1, 11, 12, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{OK: true})},
			[]porcupine.Operation{send, recvA, nackA, op(2, 6, 10, Op{Kind: Receive}, Result{Unknown: true}),
				op(1, 7, 8, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{Detail: "lease_lost"}),
				op(1, 11, 12, Op{Kind: Ack, Body: "m1", Receipt: "rA"}, Result{Detail: "lease_lost"})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if porcupine.CheckOperations(Model, tc.bad) {
				t.Fatal("porcupine accepted the bad history")
			}
			if !porcupine.CheckOperations(Model, tc.good) {
				t.Fatal("porcupine refused the corrected history")
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		in   Op
		out  Result
		want string
	}{
		{Op{Kind: Send, Body: "m1"}, Result{}, "send m1"},
		{Op{Kind: Receive}, Result{}, "receive -> nothing"},
		{Op{Kind: Receive}, Result{Unknown: true}, "receive (outcome unknown)"},
		{Op{Kind: Ack, Body: "m1", Receipt: "r"}, Result{Detail: "lease_lost"}, "ack(m1 r) -> false lease_lost"},
	} {
		if got := Describe(c.in, c.out); got != c.want {
			t.Errorf("Describe(%+v, %+v) = %q, want %q", c.in, c.out, got, c.want)
		}
	}
}
