package queuemodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// Workload is concurrent clients running random operations on one queue
// over the native HTTP API, using each other's receipts, current and
// stale. The queue must exist with leases that cannot lapse during the
// run and no delivery limit (max_receives 0).
type Workload struct {
	// Bases are the servers' URLs ("http://host:port"); client i uses
	// Bases[i % len(Bases)].
	Bases   []string
	Queue   string
	Clients int
	// Ops is each client's number of operations, or 0 to run until Stop.
	Ops int
	// Seed makes the choice of operations repeatable (not the interleaving).
	Seed uint64
	// Epoch is time zero of the history's call and return times (Run's
	// start when zero); set it to relate other events to them.
	Epoch time.Time

	start    time.Time
	stop     chan struct{}
	initOnce sync.Once
	stopOnce sync.Once
	mu       sync.Mutex
	receipts []Op
	errs     []error
}

// Run runs the clients until each did Ops operations (or Stop), and
// returns the history: every operation with its call and return times;
// an operation without an answer (outcome unknown) returns "never", and
// one refused at connect (it never reached the broker) is left out. Errors
// are answers no client should get (a bad status, an undecodable body).
func (w *Workload) Run() ([]porcupine.Operation, []error) {
	w.start = w.Epoch
	if w.start.IsZero() {
		w.start = time.Now()
	}
	stop := w.stopChannel()
	history := make([][]porcupine.Operation, w.Clients)
	var wg sync.WaitGroup
	for id := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &client{w: w, id: id, base: w.Bases[id%len(w.Bases)], rng: rand.New(rand.NewPCG(w.Seed, uint64(id))),
				http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
			for seq := 0; w.Ops == 0 || seq < w.Ops; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if op, ok := c.one(seq); ok {
					history[id] = append(history[id], op)
				} else {
					time.Sleep(20 * time.Millisecond) // the broker is down
				}
			}
		}()
	}
	wg.Wait()
	return slices.Concat(history...), w.errs
}

// Stop ends Run's loops after their current operation.
func (w *Workload) Stop() {
	stop := w.stopChannel()
	w.stopOnce.Do(func() { close(stop) })
}

func (w *Workload) stopChannel() chan struct{} {
	w.initOnce.Do(func() { w.stop = make(chan struct{}) })
	return w.stop
}

func (w *Workload) addReceipt(body, receipt string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.receipts = append(w.receipts, Op{Body: body, Receipt: receipt})
}

// pick is a recent receipt most of the time, any older one otherwise.
func (w *Workload) pick(rng *rand.Rand) (Op, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.receipts) == 0 {
		return Op{}, false
	}
	if rng.IntN(4) > 0 {
		return w.receipts[max(0, len(w.receipts)-1-rng.IntN(6))], true
	}
	return w.receipts[rng.IntN(len(w.receipts))], true
}

func (w *Workload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

type client struct {
	w    *Workload
	id   int
	base string
	rng  *rand.Rand
	http *http.Client
}

type itemsJSON struct {
	Results []struct {
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	} `json:"results"`
	Messages []struct {
		Body    string `json:"body"`
		Receipt string `json:"receipt"`
	} `json:"messages"`
}

// choose draws an operation: 20% sends, 35% receives, 45% ack, nack or
// extend of a known receipt (a receive while none is known).
func (c *client) choose(seq int) Op {
	switch n := c.rng.IntN(20); {
	case n < 4:
		return Op{Kind: Send, Body: fmt.Sprintf("c%d-%d", c.id, seq)}
	case n < 11:
		return Op{Kind: Receive}
	default:
		in, ok := c.w.pick(c.rng)
		if !ok {
			return Op{Kind: Receive}
		}
		in.Kind = []string{Ack, Ack, Ack, Ack, Nack, Nack, Nack, Extend, Extend}[n-11]
		return in
	}
}

// one runs one operation; ok is false when it never reached the broker.
func (c *client) one(seq int) (porcupine.Operation, bool) {
	in := c.choose(seq)
	var body any
	path := map[string]string{Send: "messages", Receive: "receive", Ack: "ack", Nack: "nack", Extend: "extend"}[in.Kind]
	switch in.Kind {
	case Send:
		body = map[string]any{"messages": []map[string]any{{"body": in.Body}}}
	case Receive:
		body = map[string]any{"max_messages": 1}
	case Ack:
		body = map[string]any{"receipts": []string{in.Receipt}}
	case Nack:
		body = map[string]any{"receipts": []string{in.Receipt}, "delay_ms": 0}
	case Extend:
		body = map[string]any{"receipts": []string{in.Receipt}, "visibility_timeout_ms": 600000}
	}
	var res itemsJSON
	call := time.Since(c.w.start).Nanoseconds()
	err := c.post(path, body, &res)
	ret := time.Since(c.w.start).Nanoseconds()
	if errors.Is(err, syscall.ECONNREFUSED) {
		return porcupine.Operation{}, false
	}
	op := porcupine.Operation{ClientId: c.id, Input: in, Call: call, Return: ret}
	var out Result
	switch {
	case err != nil:
		if !errors.Is(err, errTransport) {
			c.w.fail(err)
		}
		out.Unknown, op.Return = true, 1<<62
	case in.Kind == Receive && len(res.Messages) > 0:
		out.Body, out.Receipt = res.Messages[0].Body, res.Messages[0].Receipt
		c.w.addReceipt(out.Body, out.Receipt)
	case in.Kind == Receive:
	case len(res.Results) != 1:
		c.w.fail(fmt.Errorf("%s: %d results", in.Kind, len(res.Results)))
	case in.Kind == Send:
		if e := res.Results[0].Error; e != nil {
			c.w.fail(fmt.Errorf("send refused: %s", e.Code))
		}
	case res.Results[0].Error != nil:
		out.Detail = res.Results[0].Error.Code
	default:
		out.Detail = res.Results[0].Status
		out.OK = out.Detail == map[string]string{Ack: "acked", Nack: "requeued", Extend: "extended"}[in.Kind]
	}
	op.Output = out
	return op, true
}

// errTransport marks an answer that did not arrive (outcome unknown).
var errTransport = errors.New("no answer")

func (c *client) post(path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := c.http.Post(c.base+"/v1/queues/"+c.w.Queue+"/"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return err
		}
		return fmt.Errorf("%w: %s: %v", errTransport, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := readAll(resp)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errTransport, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, raw)
	}
	return nil
}

func readAll(resp *http.Response) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

// Check checks history against Model within timeout; when it is not Ok,
// the report names the operations of the longest partial linearization.
func Check(history []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, string) {
	return CheckSaved(history, timeout, "")
}

// CheckSaved is Check that, when the result is not Ok and dir is not "",
// also writes the history (history.json: one operation a line, times in
// ns) and porcupine's visualization (porcupine.html, open it in a
// browser) into dir, and names them in the report.
func CheckSaved(history []porcupine.Operation, timeout time.Duration, dir string) (porcupine.CheckResult, string) {
	res, info := porcupine.CheckOperationsVerbose(Model, history, timeout)
	if res == porcupine.Ok {
		return res, ""
	}
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "longest partial linearization (%d operations):", len(longest))
	for _, op := range longest {
		b.WriteString("\n  " + Describe(op.Input, op.Output))
	}
	if dir != "" {
		if err := saveHistory(filepath.Join(dir, "history.json"), history); err != nil {
			fmt.Fprintf(&b, "\nsave the history: %v", err)
		}
		if err := porcupine.VisualizePath(Model, info, filepath.Join(dir, "porcupine.html")); err != nil {
			fmt.Fprintf(&b, "\nsave the visualization: %v", err)
		}
		fmt.Fprintf(&b, "\nhistory and visualization: %s/{history.json,porcupine.html}", dir)
	}
	return res, b.String()
}

// savedOp is one line of history.json.
type savedOp struct {
	Client int    `json:"client"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Input  Op     `json:"input"`
	Output Result `json:"output"`
}

func saveHistory(path string, history []porcupine.Operation) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, op := range history {
		if err := enc.Encode(savedOp{op.ClientId, op.Call, op.Return, op.Input.(Op), op.Output.(Result)}); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// LoadHistory reads a history.json written by CheckSaved, to check it
// again or cut it down by hand.
func LoadHistory(path string) ([]porcupine.Operation, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var history []porcupine.Operation
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var op savedOp
		if err := dec.Decode(&op); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		history = append(history, porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return})
	}
	return history, nil
}

// Summary counts a history's operations by kind and outcome.
func Summary(history []porcupine.Operation) map[string]int {
	kinds := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(Op), op.Output.(Result)
		key := in.Kind
		switch {
		case out.Unknown:
			key += ":unknown"
		case in.Kind == Receive && out.Body == "":
			key += ":empty"
		case in.Kind != Send && in.Kind != Receive:
			key += map[bool]string{true: ":ok", false: ":refused"}[out.OK]
		}
		kinds[key]++
	}
	return kinds
}
