package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

// dlqCommand is `broker dlq ...`: browse and redrive dead-letter queues.
// QUEUE may name a source queue (its DLQ is used) or a DLQ itself.
func dlqCommand() *cli.Command {
	return &cli.Command{
		Name:        "dlq",
		Usage:       "list, peek at, redrive and purge dead-letter queues",
		Description: "QUEUE is a queue (its dead-letter queue is used) or a dead-letter queue. " + queueExitCodes,
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list dead-letter queues and their depth", Flags: clientFlags(), Action: dlqList},
			{
				Name: "peek", Usage: "show dead-lettered messages without consuming them", ArgsUsage: "QUEUE",
				Flags: append(clientFlags(),
					&cli.IntFlag{Name: "limit", Value: 20, Usage: "messages to show (1..1000)"},
					&cli.StringFlag{Name: "reason", Usage: "only this reason (max_receives, max_expiries, rejected, expired)"},
					&cli.StringFlag{Name: "after", Usage: "start after this message id"},
				),
				Action: dlqPeek,
			},
			{
				Name: "redrive", Usage: "move dead-lettered messages back (to their source, or --to)", ArgsUsage: "QUEUE",
				Flags: append(clientFlags(),
					&cli.StringFlag{Name: "to", Usage: "destination queue (default: each message's source)"},
					&cli.IntFlag{Name: "rate", Value: 500, Usage: "messages per second (1..10000)"},
					&cli.StringSliceFlag{Name: "id", Usage: "only these message ids (repeatable)"},
					&cli.StringFlag{Name: "reason", Usage: "only this dead-letter reason"},
					&cli.Int64Flag{Name: "limit", Usage: "move at most this many"},
					&cli.BoolFlag{Name: "keep-deliveries", Usage: "keep the delivery count instead of starting at 0"},
					&cli.BoolFlag{Name: "wait", Usage: "wait until the redrive ends, with a progress bar when stderr is a terminal; exit 1 if it failed"},
				),
				Action: dlqRedrive,
			},
			{Name: "purge", Usage: "delete every message of a dead-letter queue, or those --state/--older-than select", ArgsUsage: "QUEUE", Flags: append(clientFlags(), purgeFlags()...), Action: dlqPurge},
		},
	}
}

// resolveDLQ returns the DLQ of name (or name when it is a DLQ) and the
// client that asked.
func resolveDLQ(cCtx *cli.Context, name string) (string, *apiClient, error) {
	c, err := newAPIClient(cCtx)
	if err != nil {
		return "", nil, err
	}
	var info cliQueueInfo
	if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: queuePath(name), query: nil, body: nil}, &info); err != nil {
		return "", nil, err
	}
	if info.Kind == "dlq" {
		return info.Name, c, nil
	}
	if info.DeadLetterQueue == "" {
		return "", nil, &exitError{code: exitNotFound, err: fmt.Errorf("queue %s has no dead-letter queue (dead_letter is none)", name)}
	}
	return info.DeadLetterQueue, c, nil
}

func dlqList(cCtx *cli.Context) error {
	if _, err := queueArgs(cCtx, 0, 0, "broker dlq list"); err != nil {
		return err
	}
	return listQueues(cCtx, "", "dlq")
}

func dlqPeek(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker dlq peek QUEUE [--limit N --reason R]")
	if err != nil {
		return err
	}
	out, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	dlq, c, err := resolveDLQ(cCtx, args[0])
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(cCtx.Int("limit"))}}
	if r := cCtx.String("reason"); r != "" {
		q.Set("reason", r)
	}
	if a := cCtx.String("after"); a != "" {
		q.Set("after", a)
	}
	var res struct {
		Messages []cliMessage `json:"messages"`
		Next     string       `json:"next"`
	}
	if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: queuePath(dlq, "messages"), query: q, body: nil}, &res); err != nil {
		return err
	}
	if out == "json" {
		if res.Messages == nil {
			res.Messages = []cliMessage{}
		}
		return printJSON(cCtx.App.Writer, res)
	}
	tw := newTable(cCtx.App.Writer)
	fmt.Fprintln(tw, "ID\tREASON\tSOURCE\tDELIVERIES\tFAILED_AT\tLAST_ERROR\tBODY")
	for _, m := range res.Messages {
		reason, source, failed, detail := "-", "-", "-", ""
		deliveries := m.Deliveries
		if d := m.DeadLetter; d != nil {
			reason, source, failed, detail = d.Reason, d.SourceQueue+" "+d.SourceID, d.FailedAt, d.Detail
			deliveries = d.Deliveries
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, reason, source, deliveries, failed, oneLine(detail, 40), oneLine(m.bodyText(), 40))
	}
	return tw.Flush()
}

func dlqRedrive(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker dlq redrive QUEUE [--to Q --rate N --id ID --reason R]")
	if err != nil {
		return err
	}
	out, err := outputFormat(cCtx)
	if err != nil {
		return err
	}
	if ids := cCtx.StringSlice("id"); len(ids) > 0 && cCtx.IsSet("reason") {
		return usageErrorf("give --id or --reason, not both")
	}
	dlq, c, err := resolveDLQ(cCtx, args[0])
	if err != nil {
		return err
	}
	body := map[string]any{"rate_per_sec": cCtx.Int("rate"), "keep_deliveries": cCtx.Bool("keep-deliveries")}
	if to := cCtx.String("to"); to != "" {
		body["destination"] = to
	}
	if ids := cCtx.StringSlice("id"); len(ids) > 0 {
		body["ids"] = ids
	}
	if r := cCtx.String("reason"); r != "" {
		body["filter"] = map[string]any{"reason": r}
	}
	if l := cCtx.Int64("limit"); l > 0 {
		body["limit"] = l
	}
	var raw json.RawMessage
	if _, err := c.call(cCtx.Context, apiCall{method: "POST", path: queuePath(dlq, "redrive"), query: nil, body: body}, &raw); err != nil {
		return err
	}
	var task map[string]any
	if err := json.Unmarshal(raw, &task); err != nil {
		return err
	}
	if cCtx.Bool("wait") {
		var started redriveTask
		if err := json.Unmarshal(raw, &started); err != nil {
			return err
		}
		return waitRedrive(cCtx, c, dlq, started, out)
	}
	if out == "json" {
		return printJSON(cCtx.App.Writer, task)
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "redrive task %v started on %s at %v messages/s; follow it with GET /v1/tasks/%v\n", task["id"], dlq, task["rate_per_sec"], task["id"])
	return err
}

// redriveTask is what `dlq redrive --wait` reads of a task (GET /v1/tasks/ID).
type redriveTask struct {
	ID              int64   `json:"id"`
	State           string  `json:"state"`
	Moved           int64   `json:"moved"`
	Failed          int64   `json:"failed"`
	SkippedInflight int64   `json:"skipped_inflight"`
	Cursor          []int64 `json:"cursor"`
	End             []int64 `json:"end"`
	Error           string  `json:"error"`
}

// redriveTaskPoll is how often `dlq redrive --wait` asks for the task.
const redriveTaskPoll = 250 * time.Millisecond

// waitRedrive follows the task until it is no longer running. The bar
// counts the DLQ offsets the task went through, per partition from its
// cursor at the start to the end it was given (fixed when it started).
func waitRedrive(cCtx *cli.Context, c *apiClient, dlq string, t redriveTask, out string) error {
	start := append([]int64(nil), t.Cursor...)
	var total int64
	for i := range t.End {
		if i < len(start) {
			total += max(t.End[i]-start[i], 0)
		}
	}
	bar := newProgressBar(stderrOf(cCtx), "redrive", "messages")
	for t.State == "running" {
		var done int64
		for i := range t.Cursor {
			if i < len(start) {
				done += max(t.Cursor[i]-start[i], 0)
			}
		}
		bar.update(done, total)
		select {
		case <-cCtx.Context.Done():
			bar.done()
			return cCtx.Context.Err()
		case <-time.After(redriveTaskPoll):
		}
		if _, err := c.call(cCtx.Context, apiCall{method: "GET", path: fmt.Sprintf("/v1/tasks/%d", t.ID), query: nil, body: nil}, &t); err != nil {
			bar.done()
			return err
		}
	}
	bar.update(total, total)
	bar.done()
	if out == "json" {
		if err := printJSON(cCtx.App.Writer, t); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(cCtx.App.Writer, "redrive task %d on %s %s: moved %d, failed %d, skipped in flight %d\n", t.ID, dlq, t.State, t.Moved, t.Failed, t.SkippedInflight); err != nil {
		return err
	}
	if t.State != "done" {
		return fmt.Errorf("redrive task %d on %s ended %s: %s", t.ID, dlq, t.State, t.Error)
	}
	return nil
}

func dlqPurge(cCtx *cli.Context) error {
	args, err := queueArgs(cCtx, 1, 1, "broker dlq purge QUEUE [--state S]... [--older-than D]")
	if err != nil {
		return err
	}
	body, desc, err := purgeRequest(cCtx)
	if err != nil {
		return err
	}
	dlq, _, err := resolveDLQ(cCtx, args[0])
	if err != nil {
		return err
	}
	return purgeQueue(cCtx, dlq, body, desc)
}
