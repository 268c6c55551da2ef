package compattests

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Browser tests of the web console (/ui/): Debian's chromium, headless,
// driven over the DevTools protocol by chromedp, against the real binary
// holding real data. They skip where chromium is missing unless
// CONSOLE_BROWSER_REQUIRED is set (.ci/run sets it and installs chromium).
// Screenshots of every page go to $ARTIFACTS_DIR/console (else a directory
// under the test's temporary directory, named in the log).

// chromiumPath finds the browser, or skips (fails when required).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CONSOLE_BROWSER_REQUIRED") != "" {
		t.Fatal("chromium is required (CONSOLE_BROWSER_REQUIRED) but missing: apt-get install chromium")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the console's browser tests skip")
	return ""
}

// consoleBrowser is a headless chromium tab that records every console
// error, uncaught exception and browser log error (failed loads, CSP
// violations) of the pages it shows.
type consoleBrowser struct {
	t         *testing.T
	ctx       context.Context
	base      string
	artifacts string

	mu       sync.Mutex
	problems []string
}

func newConsoleBrowser(t *testing.T, httpAddr string) *consoleBrowser {
	chromium := chromiumPath(t)
	artifacts := os.Getenv("ARTIFACTS_DIR")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	artifacts = filepath.Join(artifacts, "console")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // CI runs as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs DOM events its protocol version does not know (newer
	// chromium); those are noise, anything else goes to the test log.
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			log.Print("chromedp: " + msg)
		}
	}))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	// Close the browser gracefully and wait for it to exit before the
	// test's temporary directories (its profile) are removed: a killed
	// chromium may still be writing the profile during RemoveAll.
	t.Cleanup(func() { _ = chromedp.Cancel(ctx); cancelTimeout(); cancelTab(); cancelAlloc() })
	b := &consoleBrowser{t: t, ctx: ctx, base: "http://" + httpAddr + "/ui/", artifacts: artifacts}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				b.problem("console.%s: %s", ev.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.problem("exception at %s:%d: %s", d.URL, d.LineNumber, msg)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				b.problem("browser log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("starting chromium (%s): %v", chromium, err)
	}
	t.Logf("console screenshots in %s", artifacts)
	return b
}

func (b *consoleBrowser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// checkClean fails the test for every console problem recorded since the
// last check, naming the page, except those containing one of expected
// (an API error the page is meant to show, which the browser logs too).
func (b *consoleBrowser) checkClean(page string, expected ...string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		ok := false
		for _, e := range expected {
			ok = ok || strings.Contains(p, e)
		}
		if !ok {
			b.t.Errorf("page %s: %s", page, p)
		}
	}
	b.problems = nil
}

func (b *consoleBrowser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open shows the page at fragment and waits until it has rendered and
// selector is visible.
func (b *consoleBrowser) open(fragment, selector string) {
	b.t.Helper()
	b.run("open "+fragment,
		chromedp.Navigate(b.base+"#/"+fragment),
		chromedp.WaitVisible(`main > div[data-loaded="true"]`, chromedp.ByQuery),
		chromedp.WaitVisible(selector, chromedp.ByQuery))
}

// screenshot writes the whole page as name.png.
func (b *consoleBrowser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(b.artifacts, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *consoleBrowser) text(selector string) string {
	b.t.Helper()
	var s string
	b.run("read "+selector, chromedp.Text(selector, &s, chromedp.ByQuery))
	return s
}

// confirm types word into the confirmation dialog and confirms.
func (b *consoleBrowser) confirm(word string) {
	b.t.Helper()
	b.run("confirm",
		chromedp.WaitVisible(`#confirm-input`, chromedp.ByQuery),
		chromedp.SendKeys(`#confirm-input`, word, chromedp.ByQuery),
		chromedp.Click(`#confirm-ok:not([disabled])`, chromedp.ByQuery))
}

// TestConsoleBrowser loads every page of the console in chromium over a
// broker with topics, a consumer group, a queue with dead letters, an
// event store and a transaction: no page logs an error; the message
// browser shows the produced records (JSON pretty-printed, binary as hex,
// headers); a reset of the group's offsets from the UI moves them (read
// back over Kafka); a redrive from the UI empties the DLQ; a share
// group's page shows its share-partitions and no reset-offsets form (the
// route answers 404 for a share group; the page showed an empty offsets
// table and the form before).
func TestConsoleBrowser(t *testing.T) {
	b := startBroker(t, withArgs("--group-initial-rebalance-delay", "0s",
		"--group-share-auto-offset-reset", "earliest", "--group-share-record-lock-duration", "10m"))
	ctx := testCtx(t, 2*time.Minute)
	adm := newAdmin(t, b.Addr())
	topic := "console-orders"
	createTopic(t, adm, topic, 2, nil)

	// Records: JSON values with headers, one binary value, on partition 0.
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Partition: 0, Key: []byte(fmt.Sprintf("order-%d", i)),
			Value:   []byte(fmt.Sprintf(`{"order":%d,"item":"widget-%d"}`, i, i)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("console-test")}}})
	}
	recs = append(recs, &kgo.Record{Partition: 0, Key: []byte("bin"), Value: []byte{0x00, 0xff, 0x10, 0x80}})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A transactional producer leaves a transactional ID behind.
	txn := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("console-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	// An empty consumer group committed at the end of partition 0 (6).
	group := "console-group"
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 6, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}

	// A live group: one consumer holding both partitions.
	live := newClient(t, b.Addr(), kgo.ConsumerGroup("console-live"), kgo.ConsumeTopics(topic), kgo.ClientID("console-consumer"))
	for assigned := false; !assigned; {
		fs := live.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the live consumer got no assignment: %v", err)
		}
		fs.EachPartition(func(kgo.FetchTopicPartition) { assigned = true })
	}

	// A queue whose three messages were rejected into its DLQ.
	queue := "console-jobs"
	qMust(t, b, "PUT", "/v1/queues/"+queue, map[string]any{"max_receives": 3}, 201)
	qSend(t, b, queue, "job-1", "job-2", "job-3")
	var receipts []string
	for _, m := range qReceive(t, b, queue, 3, 0, 0) {
		receipts = append(receipts, m.Receipt)
	}
	qMust(t, b, "POST", "/v1/queues/"+queue+"/nack", map[string]any{"receipts": receipts, "dead_letter": true, "reason": "bad input"}, 200)
	if d := qStats(t, b, queue)["dead_letter_depth"]; d != float64(3) {
		t.Fatalf("dead_letter_depth %v before the redrive, want 3", d)
	}

	// An event store with one stream.
	qMust(t, b, "PUT", "/v1/stores/console-store", map[string]any{}, 201)
	qMust(t, b, "POST", "/v1/stores/console-store/streams/cart-1/events", map[string]any{"events": []map[string]any{
		{"type": "ItemAdded", "data": map[string]any{"sku": "A-1"}}, {"type": "CheckedOut", "data": map[string]any{"total": 12}}}}, 201)

	// A share group (KIP-932) whose member holds 2 of 3 records.
	shared := "console-shared"
	createTopic(t, adm, shared, 1, nil)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: shared, Value: []byte("s-0")}, &kgo.Record{Topic: shared, Value: []byte("s-1")}, &kgo.Record{Topic: shared, Value: []byte("s-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	shareMember := newRawShareMember(t, b.Addr(), "console-share-group", shared, "console-share-member-01")
	if resp, got := shareMember.fetch([]int32{0}, nil, 2); len(got[0]) != 1 || got[0][0].LastOffset != 1 {
		t.Fatalf("share member acquired %+v (error %s), want offsets 0-1", got, errName(resp.ErrorCode))
	}

	br := newConsoleBrowser(t, b.HTTPAddr())

	// The share group's page: its share-partitions (start 0, 2 in flight,
	// lag 3), no committed offsets table and no reset-offsets form.
	br.open("groups/console-share-group", "#share-partitions table")
	if got := br.text("#share-partitions table"); !strings.Contains(got, shared) || !strings.Contains(got, "In flight") {
		t.Errorf("the share group's partitions table:\n%s", got)
	}
	var cells []string
	br.run("read the share partition's row", chromedp.Evaluate(`[...document.querySelectorAll('#share-partitions tbody tr:first-child td')].map((td) => td.textContent)`, &cells))
	if want := []string{shared, "0", "0", "2", "0", "3"}; strings.Join(cells, "|") != strings.Join(want, "|") {
		t.Errorf("share partition row %q, want %q (topic, partition, start offset, in flight, available, lag)", cells, want)
	}
	var absent bool
	br.run("look for the reset form", chromedp.Evaluate(`document.querySelector('#reset-offsets') === null && document.querySelector('#group-offsets') === null && document.querySelector('#share-reset-note') !== null`, &absent))
	if !absent {
		t.Errorf("the share group's page shows the reset-offsets form or the offsets table, or not the note on AlterShareGroupOffsets:\n%s", br.text("main"))
	}
	br.screenshot("group-share")
	br.checkClean("group-share")

	// Every page loads without an error.
	pages := []struct{ name, fragment, selector, want string }{
		{"overview", "overview", ".cards", "rec/s"},
		{"topics", "topics", "table", topic},
		{"topic", "topics/" + topic, "table", "cleanup.policy"},
		{"groups", "groups", "table", group},
		{"group", "groups/" + group, "#group-offsets table", topic},
		{"group-live", "groups/console-live", "main table", "console-orders: 0, 1"},
		{"queues", "queues", "table", queue + ".dlq"},
		{"queue", "queues/" + queue, "#dlq-list table", "rejected"},
		{"stores", "stores", "table", "console-store"},
		{"store", "stores/console-store", "#store-events table", "CheckedOut"},
		{"transactions", "transactions", "table", "console-txn"},
	}
	for _, p := range pages {
		br.open(p.fragment, p.selector)
		if got := br.text("main"); !strings.Contains(got, p.want) {
			t.Errorf("page %s does not show %q:\n%.1500s", p.name, p.want, got)
		}
		if p.name == "overview" {
			// Traffic across a few polls (every 2 s): the throughput
			// sparkline draws a line once it has two rates.
			for i := range 3 {
				batch := make([]*kgo.Record, 50*(i+1))
				for j := range batch {
					batch[j] = &kgo.Record{Partition: 1, Value: []byte("load")}
				}
				if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				br.run("let a poll see it", chromedp.Sleep(2100*time.Millisecond))
			}
			var points string
			br.run("read the sparkline", chromedp.WaitReady(`#spark-throughput polyline`, chromedp.ByQuery),
				chromedp.AttributeValue(`#spark-throughput polyline`, "points", &points, nil, chromedp.ByQuery))
			if strings.Count(points, ",") < 2 {
				t.Errorf("the throughput sparkline has points %q", points)
			}
		}
		br.screenshot(p.name)
		br.checkClean(p.name)
	}

	// The message browser shows the produced records.
	br.open("browse?topic="+topic+"&partition=0", "#records tbody tr")
	got := br.text("#records")
	for _, want := range []string{"order-0", `"item": "widget-4"`, "source: console-test", "000000  00 ff 10 80"} {
		if !strings.Contains(got, want) {
			t.Errorf("the message browser does not show %q:\n%.2000s", want, got)
		}
	}
	var rows []*cdp.Node
	br.run("count rows", chromedp.Nodes("#records tbody tr", &rows, chromedp.ByQueryAll))
	if len(rows) != 6 {
		t.Errorf("the message browser shows %d records of partition 0, want 6", len(rows))
	}
	br.screenshot("messages")
	// Follow: a record produced now appears without a reload.
	br.run("follow", chromedp.Click(`#browse input[name="follow"]`, chromedp.ByQuery))
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Key: []byte("late"), Value: []byte("followed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	br.run("wait for the followed record", chromedp.WaitVisible(`#records tr[data-offset="6"]`, chromedp.ByQuery))
	if got := br.text(`#records tr[data-offset="6"]`); !strings.Contains(got, "followed") {
		t.Errorf("followed row: %q", got)
	}
	br.checkClean("messages")

	// Topics: create from the form, alter a config, delete after typing
	// the name; each checked over Kafka.
	br.open("topics", "#create-topic")
	br.run("create a topic",
		chromedp.SetValue(`#create-topic input[name="name"]`, "console-made", chromedp.ByQuery),
		chromedp.SetValue(`#create-topic input[name="partitions"]`, "3", chromedp.ByQuery),
		chromedp.SetValue(`#create-topic textarea[name="configs"]`, "retention.ms=3600000", chromedp.ByQuery),
		chromedp.Click(`#create-topic button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//div[@role="status"][contains(., "console-made created")]`, chromedp.BySearch))
	details, err := adm.ListTopics(ctx, "console-made")
	if err != nil || details["console-made"].Err != nil || len(details["console-made"].Partitions) != 3 {
		t.Fatalf("topic created from the UI, over Kafka: %v %+v", err, details["console-made"])
	}
	br.open("topics/console-made", "#alter-config")
	br.run("alter a config",
		chromedp.SetValue(`#alter-config input[name="key"]`, "retention.ms", chromedp.ByQuery),
		chromedp.SetValue(`#alter-config input[name="value"]`, "7200000", chromedp.ByQuery),
		chromedp.Click(`#alter-config button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//div[@role="status"][contains(., "7200000")]`, chromedp.BySearch))
	rc, err := adm.DescribeTopicConfigs(ctx, "console-made")
	if err != nil {
		t.Fatal(err)
	}
	retention := ""
	if v, err := rc.On("console-made", nil); err == nil {
		for _, c := range v.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				retention = *c.Value
			}
		}
	}
	if retention != "7200000" {
		t.Errorf("retention.ms after the UI's alter, over Kafka: %q", retention)
	}
	br.run("delete", chromedp.Click(`#delete-topic`, chromedp.ByQuery))
	br.confirm("console-made")
	br.run("back on the list", chromedp.WaitVisible(`#create-topic`, chromedp.ByQuery))
	// A new client: kgo answers metadata requests from a cache for a while.
	if details, err := newAdmin(t, b.Addr()).ListTopics(ctx, "console-made"); err != nil || details["console-made"].Err == nil {
		t.Errorf("topic deleted from the UI still listed over Kafka: %v %+v", err, details["console-made"])
	}
	br.checkClean("topics")

	// A group with members is refused, with the broker's sentence.
	br.open("groups/console-live", "#reset-offsets")
	br.run("dry run on a live group",
		chromedp.SetValue(`#reset-offsets input[name="topics"]`, topic, chromedp.ByQuery),
		chromedp.Click(`#reset-dry-run`, chromedp.ByQuery),
		chromedp.WaitVisible(`//div[@role="alert"][contains(., "group_not_empty")]`, chromedp.BySearch))
	br.checkClean("live group reset", "status of 409 (Conflict) http://"+b.HTTPAddr()+"/v1/admin/groups/console-live/reset-offsets")

	// Resetting the group's offsets from the UI moves them: dry run, then
	// execute after typing the group's name.
	br.open("groups/"+group, "#reset-offsets")
	br.run("dry run",
		chromedp.SetValue(`#reset-offsets input[name="topics"]`, topic+":0", chromedp.ByQuery),
		chromedp.SetValue(`#reset-offsets select[name="target"]`, "offset", chromedp.ByQuery),
		chromedp.SetValue(`#reset-offsets input[name="target_value"]`, "2", chromedp.ByQuery),
		chromedp.Click(`#reset-dry-run`, chromedp.ByQuery),
		chromedp.WaitVisible(`#reset-preview table`, chromedp.ByQuery))
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup(topic, 0); o.At != 6 {
		t.Fatalf("after the dry run the group is at %d, want 6 (unchanged)", o.At)
	}
	br.run("execute", chromedp.Click(`#reset-execute:not([disabled])`, chromedp.ByQuery))
	br.confirm(group)
	br.run("wait for the reset", chromedp.WaitVisible(`//div[@role="status"][contains(., "reset")]`, chromedp.BySearch))
	br.screenshot("group-reset")
	fetched, err = adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup(topic, 0); o.At != 2 {
		t.Errorf("after the reset from the UI the group is at %d over Kafka, want 2", o.At)
	}
	br.checkClean("group reset")

	// A redrive from the UI empties the DLQ.
	br.open("queues/"+queue, "#redrive")
	br.run("redrive",
		chromedp.SetValue(`#redrive input[name="rate"]`, "1000", chromedp.ByQuery),
		chromedp.Click(`#redrive button[type="submit"]`, chromedp.ByQuery))
	br.confirm(queue + ".dlq")
	br.run("wait for the redrive", chromedp.WaitVisible(`#redrive-task [data-state="done"]`, chromedp.ByQuery))
	br.run("wait for the empty DLQ", chromedp.WaitVisible(`//div[@id="dlq-list"][contains(., "empty")]`, chromedp.BySearch))
	br.screenshot("queue-redriven")

	// An event store's streams: listed, and read from the list.
	br.open("stores/console-store", "#stream-list table")
	br.run("read a stream", chromedp.Click(`#stream-list button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#stream-events table`, chromedp.ByQuery))
	if got := br.text("#stream-events"); !strings.Contains(got, "ItemAdded") || !strings.Contains(got, "revisions 0 to 1") {
		t.Errorf("stream read from the list: %q", got)
	}
	br.screenshot("store-stream")
	br.checkClean("stream")
	br.checkClean("redrive")
	st := qStats(t, b, queue)
	if st["dead_letter_depth"] != float64(0) || st["available"] != float64(3) {
		t.Errorf("after the redrive from the UI: dead_letter_depth %v, available %v; want 0 and 3", st["dead_letter_depth"], st["available"])
	}
}
