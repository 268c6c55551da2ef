package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// exitEmpty is the exit code of `broker queue receive --require` when no
// message came (the other client exit codes are in apiclient.go).
const exitEmpty = 5

const queueExitCodes = "Exit codes: 0 ok, 1 error, 2 usage (nothing was sent), 3 queue or message not found,\n" +
	"4 conflict (queue exists or is not empty, lease lost), 5 receive --require got nothing,\n" +
	"6 broker unreachable or unavailable."

// queueCommand is `broker queue ...`: the native work queue over the HTTP API.
func queueCommand() *cli.Command {
	return &cli.Command{
		Name:        "queue",
		Usage:       "create, feed and consume native work queues through a running broker",
		Description: "Talks to the broker's HTTP API (--server). " + queueExitCodes,
		Subcommands: []*cli.Command{
			{
				Name: "create", Usage: "create a queue (idempotent with the same attributes)", ArgsUsage: "NAME",
				Flags: append(clientFlags(),
					&cli.DurationFlag{Name: "visibility", Usage: "lease of a received message (1s..12h)"},
					&cli.IntFlag{Name: "max-receives", Usage: "receives before the dead-letter queue (0: never)"},
					&cli.StringFlag{Name: "dlq", Usage: "dead-letter queue: auto (NAME.dlq), none, or a queue name"},
					&cli.DurationFlag{Name: "retention", Usage: "how long a message may wait (0: forever)"},
					&cli.DurationFlag{Name: "delay", Usage: "default delivery delay"},
					&cli.IntFlag{Name: "max-message-bytes", Usage: "largest message (key, value, headers)"},
					&cli.DurationFlag{Name: "dedup-window", Usage: "how long a dedup id is remembered"},
					&cli.IntFlag{Name: "priority-levels", Usage: "priorities 0..N-1 (1..16)"},
					&cli.IntFlag{Name: "partitions", Usage: "partitions of the queue's topic (1..64)"},
					&cli.StringFlag{Name: "backoff", Usage: "nack backoff INITIAL,xMULT,MAX[,JITTER%], e.g. 1s,x2,5m,10%"},
					&cli.BoolFlag{Name: "content-dedup", Usage: "deduplicate messages without a dedup id on the SHA-256 of their body"},
					&cli.StringFlag{Name: "dedup-conflict", Usage: "a dedup id sent again with another body: accept (a duplicate) or reject (dedup_conflict)"},
					&cli.StringFlag{Name: "dedup-scope", Usage: "window (dedup-window from the send) or in_queue (also while the original is queued)"},
					&cli.DurationFlag{Name: "max-unclaimed-age", Usage: "dead-letter (unclaimed) a message ready this long and never received (0: off)"},
				),
				Action: queueCreate,
			},
			{Name: "list", Usage: "list queues", Flags: append(clientFlags(), &cli.StringFlag{Name: "prefix", Usage: "only names starting with this"}), Action: queueList},
			{Name: "describe", Usage: "show a queue's attributes", ArgsUsage: "NAME", Flags: clientFlags(), Action: queueDescribe},
			{Name: "delete", Usage: "delete a queue", ArgsUsage: "NAME", Flags: append(clientFlags(), &cli.BoolFlag{Name: "force", Usage: "delete even when not empty or used as a DLQ"}), Action: queueDelete},
			{
				Name: "send", Usage: "send a message (BODY, or - for stdin)", ArgsUsage: "NAME [BODY|-]",
				Flags: append(clientFlags(),
					&cli.StringFlag{Name: "key", Usage: "message key"},
					&cli.StringSliceFlag{Name: "header", Aliases: []string{"H"}, Usage: "header k=v (repeatable)"},
					&cli.DurationFlag{Name: "delay", Usage: "deliver after this long"},
					&cli.IntFlag{Name: "priority", Usage: "priority (0..levels-1)"},
					&cli.StringFlag{Name: "dedup-id", Usage: "deduplication id"},
					&cli.DurationFlag{Name: "ttl", Usage: "expire after this long"},
					&cli.BoolFlag{Name: "base64", Usage: "BODY is base64"},
				),
				Action: queueSend,
			},
			{
				Name: "receive", Usage: "receive (lease) messages", ArgsUsage: "NAME",
				Flags: append(clientFlags(),
					&cli.IntFlag{Name: "max", Value: 1, Usage: "messages to receive (1..1000)"},
					&cli.DurationFlag{Name: "visibility", Usage: "lease (default: the queue's)"},
					&cli.DurationFlag{Name: "wait", Usage: "long-poll up to this long (≤20s by default)"},
					&cli.BoolFlag{Name: "ack", Usage: "ack what was received (printed only once acked)"},
					&cli.BoolFlag{Name: "require", Usage: "exit 5 when nothing was received"},
				),
				Action: queueReceive,
			},
			{Name: "ack", Usage: "ack receipts", ArgsUsage: "NAME RECEIPT...", Flags: clientFlags(), Action: queueAck},
			{
				Name: "nack", Usage: "return receipts to the queue (or to the DLQ)", ArgsUsage: "NAME RECEIPT...",
				Flags: append(clientFlags(),
					&cli.DurationFlag{Name: "delay", Usage: "visible again after this long (default: the queue's backoff)"},
					&cli.StringFlag{Name: "reason", Usage: "why (kept as last error)"},
					&cli.BoolFlag{Name: "dead-letter", Usage: "reject: move to the dead-letter queue now"},
				),
				Action: queueNack,
			},
			{Name: "purge", Usage: "delete every message of a queue, or those --state/--older-than select", ArgsUsage: "NAME", Flags: append(clientFlags(), purgeFlags()...), Action: queuePurge},
			{Name: "stats", Usage: "show counts, DLQ depth and rates", ArgsUsage: "NAME", Flags: clientFlags(), Action: queueStats},
		},
	}
}

// queueArgs checks the positional arguments: exactly min..max (max -1: any).
func queueArgs(cCtx *cli.Context, minArgs, maxArgs int, usage string) ([]string, error) {
	args := cCtx.Args().Slice()
	if len(args) < minArgs || (maxArgs >= 0 && len(args) > maxArgs) {
		return nil, usageErrorf("broker %s: usage: %s", cCtx.Command.FullName(), usage)
	}
	return args, nil
}

func queuePath(name string, rest ...string) string {
	p := "/v1/queues/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

type cliQueueInfo struct {
	Name            string         `json:"name"`
	Kind            string         `json:"kind"`
	Attributes      map[string]any `json:"attributes"`
	DeadLetterQueue string         `json:"dead_letter_queue"`
	Available       json.Number    `json:"available"`
	Inflight        json.Number    `json:"inflight"`
}

func queueCreate(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue create NAME [flags]")
	if err != nil {
		return err
	}
	out, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	attrs := map[string]any{}
	ms := func(flag, key string) {
		if cCtx.IsSet(flag) {
			attrs[key] = cCtx.Duration(flag).Milliseconds()
		}
	}
	ms("visibility", "visibility_timeout_ms")
	ms("retention", "retention_ms")
	ms("delay", "default_delay_ms")
	ms("dedup-window", "dedup_window_ms")
	ms("max-unclaimed-age", "max_unclaimed_age_ms")
	if cCtx.IsSet("content-dedup") {
		attrs["content_dedup"] = cCtx.Bool("content-dedup")
	}
	for flag, key := range map[string]string{"dlq": "dead_letter", "dedup-conflict": "dedup_conflict", "dedup-scope": "dedup_scope"} {
		if cCtx.IsSet(flag) {
			attrs[key] = cCtx.String(flag)
		}
	}
	for flag, key := range map[string]string{"max-receives": "max_receives", "max-message-bytes": "max_message_bytes", "priority-levels": "priority_levels", "partitions": "partitions"} {
		if cCtx.IsSet(flag) {
			attrs[key] = cCtx.Int(flag)
		}
	}
	if cCtx.IsSet("backoff") {
		b, err := parseBackoff(cCtx.String("backoff"))
		if err != nil {
			return err
		}
		attrs["backoff"] = b
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	var info cliQueueInfo
	status, err := c.call(cCtx.Context, apiCall{method: "PUT", path: queuePath(args[0]), query: nil, body: attrs}, &info)
	if err != nil {
		return err
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, info)
	}
	verb := "created"
	if status == 200 {
		verb = "exists (same attributes)"
	}
	dlq := info.DeadLetterQueue
	if dlq == "" {
		dlq = "none"
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "queue %s %s; dead-letter queue: %s\n", info.Name, verb, dlq)
	return err
}

// parseBackoff parses "1s,x2,5m,10%".
func parseBackoff(s string) (map[string]any, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 3 || len(parts) > 4 {
		return nil, usageErrorf("--backoff %q: want INITIAL,xMULT,MAX[,JITTER%%], e.g. 1s,x2,5m,10%%", s)
	}
	initial, err1 := time.ParseDuration(parts[0])
	var mult float64
	_, err2 := fmt.Sscanf(strings.TrimPrefix(parts[1], "x"), "%g", &mult)
	maximum, err3 := time.ParseDuration(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, usageErrorf("--backoff %q: want INITIAL,xMULT,MAX[,JITTER%%], e.g. 1s,x2,5m,10%%", s)
	}
	b := map[string]any{"initial_ms": initial.Milliseconds(), "multiplier": mult, "max_ms": maximum.Milliseconds()}
	if len(parts) == 4 {
		var j float64
		if _, err := fmt.Sscanf(strings.TrimSuffix(parts[3], "%"), "%g", &j); err != nil {
			return nil, usageErrorf("--backoff jitter %q is not a percentage", parts[3])
		}
		b["jitter"] = j / 100
	}
	return b, nil
}

func queueList(cCtx *cli.Context) error {
	if _, err := queueArgs(cCtx, 0, 0, "broker queue list [--prefix P]"); err != nil {
		return err
	}
	return listQueues(cCtx, cCtx.String("prefix"), "")
}

// listQueues prints every queue (of kind, when not empty), page by page.
func listQueues(cCtx *cli.Context, prefix, kind string) error {
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var all []cliQueueInfo
	after := ""
	for {
		var page struct {
			Queues []cliQueueInfo `json:"queues"`
			Next   string         `json:"next"`
		}
		q := url.Values{"prefix": {prefix}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: "/v1/queues", query: q, body: nil}, &page); err != nil {
			return err
		}
		for _, qi := range page.Queues {
			if kind == "" || qi.Kind == kind {
				all = append(all, qi)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if out == "json" {
		if all == nil {
			all = []cliQueueInfo{}
		}
		return printJSON(cCtx.App.Writer, all)
	}
	tw := newTable(cCtx.App.Writer)
	fmt.Fprintln(tw, "NAME\tKIND\tAVAILABLE\tINFLIGHT\tDLQ")
	for _, qi := range all {
		dlq := qi.DeadLetterQueue
		if dlq == "" {
			dlq = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", qi.Name, qi.Kind, qi.Available, qi.Inflight, dlq)
	}
	return tw.Flush()
}

func queueDescribe(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue describe NAME")
	if err != nil {
		return err
	}
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var info cliQueueInfo
	if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: queuePath(args[0]), query: nil, body: nil}, &info); err != nil {
		return err
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, info)
	}
	tw := newTable(cCtx.App.Writer)
	fmt.Fprintf(tw, "name\t%s\nkind\t%s\ndead_letter_queue\t%s\navailable\t%s\ninflight\t%s\n", info.Name, info.Kind, info.DeadLetterQueue, info.Available, info.Inflight)
	keys := make([]string, 0, len(info.Attributes))
	for k := range info.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := json.Marshal(info.Attributes[k])
		fmt.Fprintf(tw, "%s\t%s\n", k, v)
	}
	return tw.Flush()
}

func queueDelete(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue delete NAME [--force]")
	if err != nil {
		return err
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	q := url.Values{}
	if cCtx.Bool("force") {
		q.Set("force", "true")
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "DELETE", path: queuePath(args[0]), query: q, body: nil}, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "queue %s deleted\n", args[0])
	return err
}

func queueSend(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 2, "broker queue send NAME [BODY|-]")
	if err != nil {
		return err
	}
	out, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	var data []byte
	if len(args) == 1 || args[1] == "-" {
		if data, err = io.ReadAll(io.LimitReader(os.Stdin, 17<<20)); err != nil {
			return err
		}
	} else {
		data = []byte(args[1])
	}
	msg := map[string]any{}
	if cCtx.Bool("base64") {
		msg["body_base64"] = strings.TrimSpace(string(data))
	} else {
		msg["body"] = string(data)
	}
	if cCtx.IsSet("key") {
		msg["key"] = cCtx.String("key")
	}
	if hs := cCtx.StringSlice("header"); len(hs) > 0 {
		headers := map[string]string{}
		for _, h := range hs {
			k, v, ok := strings.Cut(h, "=")
			if !ok {
				return usageErrorf("--header %q is not k=v", h)
			}
			headers[k] = v
		}
		msg["headers"] = headers
	}
	if cCtx.IsSet("delay") {
		msg["delay_ms"] = cCtx.Duration("delay").Milliseconds()
	}
	if cCtx.IsSet("ttl") {
		msg["ttl_ms"] = cCtx.Duration("ttl").Milliseconds()
	}
	if cCtx.IsSet("priority") {
		msg["priority"] = cCtx.Int("priority")
	}
	if cCtx.IsSet("dedup-id") {
		msg["dedup_id"] = cCtx.String("dedup-id")
	}
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	var res struct {
		Results []map[string]any `json:"results"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(args[0], "messages"), query: nil, body: map[string]any{"messages": []any{msg}}}, &res); err != nil {
		return err
	}
	if len(res.Results) == 1 {
		if e, ok := res.Results[0]["error"].(map[string]any); ok {
			return itemError(e)
		}
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, res.Results)
	}
	r := res.Results[0]
	dup := ""
	if r["duplicate"] == true {
		dup = " (duplicate of an earlier send)"
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "sent %v%s\n", r["id"], dup)
	return err
}

// itemError turns a per-item {code, message} into an error with its exit code.
func itemError(e map[string]any) error {
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	status := 400
	switch code {
	case "lease_lost", "not_inflight", "visibility_too_long", "dedup_conflict":
		status = 409
	case "not_found":
		status = 404
	case "message_too_large":
		status = 413
	}
	ae := &apiError{Status: status, Code: code, Message: msg}
	return &exitError{code: ae.ExitCode(), err: ae}
}

type cliMessage struct {
	ID         string            `json:"id"`
	Receipt    string            `json:"receipt,omitempty"`
	State      string            `json:"state,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 *string           `json:"body_base64,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Deliveries json.Number       `json:"deliveries"`
	EnqueuedAt string            `json:"enqueued_at"`
	DeadLetter *struct {
		Reason      string      `json:"reason"`
		Detail      string      `json:"detail"`
		FailedAt    string      `json:"failed_at"`
		SourceQueue string      `json:"source_queue"`
		SourceID    string      `json:"source_id"`
		Deliveries  json.Number `json:"deliveries"`
	} `json:"dead_letter,omitempty"`
}

func (m *cliMessage) bodyText() string {
	switch {
	case m.Body != nil:
		return *m.Body
	case m.BodyBase64 != nil:
		if raw, err := base64.StdEncoding.DecodeString(*m.BodyBase64); err == nil {
			return fmt.Sprintf("(%d bytes, base64 %s)", len(raw), *m.BodyBase64)
		}
	}
	return ""
}

func queueReceive(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue receive NAME [--max N --visibility D --wait D --ack --require]")
	if err != nil {
		return err
	}
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	req := map[string]any{"max_messages": cCtx.Int("max")}
	if cCtx.IsSet("visibility") {
		req["visibility_timeout_ms"] = cCtx.Duration("visibility").Milliseconds()
	}
	if cCtx.IsSet("wait") {
		req["wait_ms"] = cCtx.Duration("wait").Milliseconds()
	}
	c.timeout = longPollTimeout(cCtx.Duration("wait"), c.timeout)
	var res struct {
		Messages []cliMessage `json:"messages"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(args[0], "receive"), query: nil, body: req}, &res); err != nil {
		return err
	}
	if cCtx.Bool("ack") && len(res.Messages) > 0 {
		var receipts []string
		for _, m := range res.Messages {
			receipts = append(receipts, m.Receipt)
		}
		var ack struct {
			Results []map[string]any `json:"results"`
		}
		if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(args[0], "ack"), query: nil, body: map[string]any{"receipts": receipts}}, &ack); err != nil {
			return err
		}
		for _, r := range ack.Results {
			if e, ok := r["error"].(map[string]any); ok {
				return itemError(e)
			}
		}
	}
	if out == "json" {
		if res.Messages == nil {
			res.Messages = []cliMessage{}
		}
		if err := printJSON(cCtx.App.Writer, res.Messages); err != nil {
			return err
		}
	} else {
		tw := newTable(cCtx.App.Writer)
		fmt.Fprintln(tw, "ID\tDELIVERIES\tBODY\tRECEIPT")
		for _, m := range res.Messages {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, m.Deliveries, oneLine(m.bodyText(), 60), m.Receipt)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(res.Messages) == 0 && cCtx.Bool("require") {
		return &exitError{code: exitEmpty, err: errors.New("no message was received (--require)")}
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", `\n`), "\t", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// settle sends receipts to ack or nack and prints one line per receipt.
func settle(cCtx *cli.Context, verb string, body map[string]any) error {
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	args := cCtx.Args().Slice()
	body["receipts"] = args[1:]
	var res struct {
		Results []map[string]any `json:"results"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(args[0], verb), query: nil, body: body}, &res); err != nil {
		return err
	}
	if out == "json" {
		if err := printJSON(cCtx.App.Writer, res.Results); err != nil {
			return err
		}
	}
	var firstErr error
	for _, r := range res.Results {
		if r["id"] == nil {
			r["id"] = fmt.Sprintf("receipt #%v", r["index"])
		}
		if e, ok := r["error"].(map[string]any); ok {
			if out == "table" {
				fmt.Fprintf(cCtx.App.Writer, "%v\t%v: %v\n", r["id"], e["code"], e["message"])
			}
			if firstErr == nil {
				firstErr = itemError(e)
			}
			continue
		}
		if out == "table" {
			fmt.Fprintf(cCtx.App.Writer, "%v\t%v\n", r["id"], r["status"])
		}
	}
	return firstErr
}

func queueAck(cCtx *cli.Context) error {
	if _, err := queueArgs(cCtx, 2, -1, "broker queue ack NAME RECEIPT..."); err != nil {
		return err
	}
	return settle(cCtx, "ack", map[string]any{})
}

func queueNack(cCtx *cli.Context) error {
	if _, err := queueArgs(cCtx, 2, -1, "broker queue nack NAME RECEIPT... [--delay D --reason R --dead-letter]"); err != nil {
		return err
	}
	body := map[string]any{"dead_letter": cCtx.Bool("dead-letter")}
	if cCtx.IsSet("delay") {
		body["delay_ms"] = cCtx.Duration("delay").Milliseconds()
	}
	if cCtx.IsSet("reason") {
		body["reason"] = cCtx.String("reason")
	}
	return settle(cCtx, "nack", body)
}

func queuePurge(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue purge NAME [--state S]... [--older-than D]")
	if err != nil {
		return err
	}
	body, desc, err := purgeRequest(cCtx)
	if err != nil {
		return err
	}
	return purgeQueue(cCtx, args[0], body, desc)
}

// purgeStates are the states `purge --state` accepts (the API's names).
var purgeStates = []string{"ready", "delayed", "inflight", "acked"}

// purgeFlags select what `queue purge` and `dlq purge` delete.
func purgeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "state", Usage: "only messages in this state: " + strings.Join(purgeStates, ", ") + " (repeatable or comma-separated; leased messages only with inflight)"},
		&cli.DurationFlag{Name: "older-than", Usage: "only messages sent at least this long ago"},
	}
}

// purgeRequest builds the purge body from --state and --older-than: {}
// (everything) when neither is given.
func purgeRequest(cCtx *cli.Context) (map[string]any, string, error) {
	body := map[string]any{}
	var what []string
	if cCtx.IsSet("state") {
		states := cCtx.StringSlice("state")
		for _, st := range states {
			if !slices.Contains(purgeStates, st) {
				return nil, "", usageErrorf("--state %q: want one of %s", st, strings.Join(purgeStates, ", "))
			}
		}
		body["states"] = states
		what = append(what, strings.Join(states, "/"))
	}
	if cCtx.IsSet("older-than") {
		d := cCtx.Duration("older-than")
		if d < 0 {
			return nil, "", usageErrorf("--older-than %s is negative", d)
		}
		body["older_than_ms"] = d.Milliseconds()
		what = append(what, "older than "+d.String())
	}
	desc := ""
	if len(what) > 0 {
		desc = " (" + strings.Join(what, ", ") + ")"
	}
	return body, desc, nil
}

// purgeQueue sends a purge request built by purgeRequest; desc describes
// its filter for the table output.
func purgeQueue(cCtx *cli.Context, name string, body map[string]any, desc string) error {
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var res struct {
		Deleted json.Number `json:"deleted"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(name, "purge"), query: nil, body: body}, &res); err != nil {
		return err
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, res)
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "purged %s messages%s from %s\n", res.Deleted, desc, name)
	return err
}

func queueStats(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker queue stats NAME")
	if err != nil {
		return err
	}
	out, c, err := outputAndClient(cCtx)
	if err != nil {
		return err
	}
	var st map[string]any
	if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: queuePath(args[0], "stats"), query: nil, body: nil}, &st); err != nil {
		return err
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, st)
	}
	tw := newTable(cCtx.App.Writer)
	for _, k := range []string{"queue", "kind", "ready", "delayed", "inflight", "available", "oldest_age_ms", "dead_letter_queue", "dead_letter_depth", "waiters"} {
		if v, ok := st[k]; ok {
			fmt.Fprintf(tw, "%s\t%v\n", k, v)
		}
	}
	if r, ok := st["rates_per_sec"].(map[string]any); ok {
		fmt.Fprintf(tw, "rates/s\tsent %v, received %v, acked %v, dead-lettered %v\n", r["sent"], r["received"], r["acked"], r["dead_lettered"])
	}
	return tw.Flush()
}
