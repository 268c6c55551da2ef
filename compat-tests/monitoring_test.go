package compattests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"
)

// The monitoring files of deploy/ (README "Monitoring") checked against the
// real binary: every metric the Grafana dashboard and the alert rules use
// exists on /metrics with the type the query needs, and the broker's own
// metrics follow Prometheus' naming conventions.

const (
	dashboardPath = "../deploy/grafana/broker.json"
	alertsPath    = "../deploy/prometheus/alerts.yml"
)

// syntheticMetrics are series Prometheus adds itself (not on /metrics).
var syntheticMetrics = map[string]bool{"up": true}

// metricUse is one metric name in a PromQL expression, with the functions
// and aggregations it is nested in (innermost last).
type metricUse struct {
	name string
	fns  []string
}

// promqlLabelLists are keywords followed by a parenthesized label list.
var promqlLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promqlKeywords are identifiers that are not metric names.
var promqlKeywords = map[string]bool{"offset": true, "bool": true, "and": true, "or": true, "unless": true,
	"atan2": true, "inf": true, "nan": true, "Inf": true, "NaN": true}

// promqlAggregations may take a by/without list before their parenthesis.
var promqlAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true}

// promqlMetrics returns the metric names of a PromQL expression: a small
// tokenizer that skips strings, label matchers {...}, ranges [...], label
// lists (by, without, on, ...), numbers, durations and Grafana variables,
// and treats an identifier followed by "(" as a function.
func promqlMetrics(expr string) ([]metricUse, error) {
	var uses []metricUse
	var stack []string // function (or "") of every open parenthesis
	pending := ""      // aggregation seen, its "(" not yet
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
	}
	skipTo := func(i int, open, close byte) (int, error) {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				j := i + 1
				for j < len(expr) && expr[j] != c {
					if expr[j] == '\\' && c != '`' {
						j++
					}
					j++
				}
				i = j
			case c == open:
				depth++
			case c == close:
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\n' || expr[i] == '\t') {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '{':
			j, err := skipTo(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(':
			stack = append(stack, pending)
			pending = ""
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", expr)
			}
			stack = stack[:len(stack)-1]
			i++
		case c == '$': // Grafana variable
			i++
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			ident := expr[i:j]
			next := nextNonSpace(j)
			i = j
			switch {
			case promqlLabelLists[ident] && next < len(expr) && expr[next] == '(':
				end, err := skipTo(next, '(', ')')
				if err != nil {
					return nil, err
				}
				i = end
			case promqlKeywords[ident]:
			case next < len(expr) && expr[next] == '(', promqlAggregations[ident]:
				pending = ident
			default:
				var fns []string
				for _, f := range stack {
					if f != "" {
						fns = append(fns, f)
					}
				}
				uses = append(uses, metricUse{name: ident, fns: fns})
			}
		default:
			i++
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return uses, nil
}

// monitoringQuery is one PromQL expression of deploy/ and where it is.
type monitoringQuery struct {
	where string
	expr  string
}

// dashboardQueries returns every expression of the Grafana dashboard:
// panel targets (rows' nested panels included) and template variables
// (label_values(<selector>, label): the selector).
func dashboardQueries(t *testing.T) []monitoringQuery {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []monitoringQuery
	var walk func([]json.RawMessage)
	walk = func(raws []json.RawMessage) {
		for _, raw := range raws {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboardPath, err)
			}
			for i, target := range p.Targets {
				if target.Expr != "" {
					out = append(out, monitoringQuery{where: fmt.Sprintf("panel %q target %d", p.Title, i), expr: target.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		if inner, ok := strings.CutPrefix(q, "label_values("); ok {
			comma := strings.LastIndex(inner, ",")
			if comma < 0 {
				t.Fatalf("%s: variable %s: label_values without a label: %q", dashboardPath, v.Name, q)
			}
			out = append(out, monitoringQuery{where: "variable " + v.Name, expr: strings.TrimSpace(inner[:comma])})
		}
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d queries found; the parser lost panels", dashboardPath, len(out))
	}
	return out
}

// alertRule is one rule of alerts.yml.
type alertRule struct {
	Alert string `yaml:"alert"`
	Expr  string `yaml:"expr"`
	For   string `yaml:"for"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", alertsPath)
	}
	return rules
}

// monitoringQueries is every expression of the dashboard and the rules.
func monitoringQueries(t *testing.T) []monitoringQuery {
	qs := dashboardQueries(t)
	for _, r := range alertRules(t) {
		qs = append(qs, monitoringQuery{where: "alert " + r.Alert, expr: r.Expr})
	}
	return qs
}

// exposition is a parsed /metrics page.
type exposition struct {
	types  map[string]string // metric family -> counter, gauge, histogram, ...
	series map[string]int    // sample name -> number of series
	total  int               // samples
}

func scrapeMetrics(t testing.TB, b *brokerProc) exposition {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	e := exposition{types: map[string]string{}, series: map[string]int{}}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) == 2 {
				e.types[f[0]] = f[1]
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		e.series[name]++
		e.total++
	}
	return e
}

// typeOf resolves a sample name to its family's type; histogram and
// summary series are "histogram_bucket", "histogram_sum", ... .
func (e exposition) typeOf(name string) (string, bool) {
	if typ, ok := e.types[name]; ok {
		return typ, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ := e.types[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
				return typ + suffix, true
			}
		}
	}
	return "", false
}

// checkMetricUses returns what is wrong with the metrics of q on e: a
// metric missing from /metrics, a counter function (rate, increase, irate)
// over something that is not a counter, deriv or delta over something that
// is not a gauge, histogram_quantile over something that is not a
// histogram's _bucket series, a histogram used without its suffix.
func checkMetricUses(q monitoringQuery, e exposition) []string {
	uses, err := promqlMetrics(q.expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", q.where, err)}
	}
	if len(uses) == 0 {
		return []string{fmt.Sprintf("%s: no metric in %q", q.where, q.expr)}
	}
	var problems []string
	for _, u := range uses {
		if syntheticMetrics[u.name] {
			continue
		}
		typ, ok := e.typeOf(u.name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: metric %s is not on /metrics", q.where, u.name))
			continue
		}
		if typ == "histogram" || typ == "summary" {
			problems = append(problems, fmt.Sprintf("%s: %s is a %s; use its _bucket, _sum or _count series", q.where, u.name, typ))
		}
		// The innermost range function decides what the series must be.
		for i := len(u.fns) - 1; i >= 0; i-- {
			fn := u.fns[i]
			switch fn {
			case "rate", "irate", "increase", "resets":
				if typ != "counter" && !strings.HasPrefix(typ, "histogram_") && !strings.HasPrefix(typ, "summary_") {
					problems = append(problems, fmt.Sprintf("%s: %s(%s) needs a counter, /metrics has a %s", q.where, fn, u.name, typ))
				}
			case "deriv", "delta", "idelta", "predict_linear":
				if typ != "gauge" {
					problems = append(problems, fmt.Sprintf("%s: %s(%s) needs a gauge, /metrics has a %s", q.where, fn, u.name, typ))
				}
			default:
				continue
			}
			break
		}
		if slices.Contains(u.fns, "histogram_quantile") && typ != "histogram_bucket" {
			problems = append(problems, fmt.Sprintf("%s: histogram_quantile over %s, which is a %s, not a histogram's _bucket series", q.where, u.name, typ))
		}
	}
	return problems
}

// TestPromQLMetricNames pins the tokenizer the metric checks rely on.
func TestPromQLMetricNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want string
	}{
		{`up{job="broker"} == 0`, "up"},
		{`broker_disk_free_bytes / broker_disk_total_bytes < 0.10`, "broker_disk_free_bytes broker_disk_total_bytes"},
		{`sum by (instance, group) (deriv(broker_group_lag[15m])) > 0 and sum(broker_group_lag) by (group) > 1e3`, "broker_group_lag(sum,deriv) broker_group_lag(sum)"},
		{`histogram_quantile(0.99, sum by (le) (rate(x_bucket{a="}b", c=~"$v"}[$__rate_interval])))`, "x_bucket(histogram_quantile,sum,rate)"},
		{`topk(10, m{job=~"$job"}) or on (instance) group_left(x) vector(0) offset 5m`, "m(topk)"},
		{`a * 1024 ^ 3 - b offset 1h`, "a b"},
	} {
		uses, err := promqlMetrics(tc.expr)
		if err != nil {
			t.Fatalf("%q: %v", tc.expr, err)
		}
		var got []string
		for _, u := range uses {
			s := u.name
			if len(u.fns) > 0 {
				s += "(" + strings.Join(u.fns, ",") + ")"
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: metrics %q, want %q", tc.expr, strings.Join(got, " "), tc.want)
		}
	}
}

// monitoringTraffic makes the broker create the series that exist only
// after use (labelled by API, route, group, queue): produces to a topic,
// commits a group's offsets below the end (lag), creates a queue and
// dead-letters one of its messages. It returns the topic and group.
func monitoringTraffic(t *testing.T, b *brokerProc) (topic, group string) {
	t.Helper()
	adm := newAdmin(t, b.Addr())
	topic, group = topicName(t, "traffic"), "monitoring-group"
	createTopic(t, adm, topic, 3, nil)
	produceN(t, b, topic, 30)
	commitOffsets(t, adm, group, topic, map[int32]int64{0: 3, 1: 7, 2: 10})
	qMust(t, b, "PUT", "/v1/queues/monitoring", map[string]any{"max_receives": 3, "visibility_timeout_ms": 60000}, 201)
	qMust(t, b, "POST", "/v1/queues/monitoring/messages", map[string]any{"messages": []any{
		map[string]any{"body": "one"}, map[string]any{"body": "two"}}}, 200)
	return topic, group
}

// deadLetterOne receives one message of queue and dead-letters it.
func deadLetterOne(t *testing.T, b *brokerProc, queue string) {
	t.Helper()
	msgs := qReceive(t, b, queue, 1, 60000, 0)
	if len(msgs) != 1 {
		t.Fatalf("receive from %s: %d messages, want 1", queue, len(msgs))
	}
	r := qMust(t, b, "POST", "/v1/queues/"+queue+"/nack", map[string]any{"receipts": []string{msgs[0].Receipt}, "dead_letter": true, "reason": "monitoring test"}, 200)
	if s := qItemStatuses(r); len(s) != 1 || s[0] != "dead_lettered" {
		t.Fatalf("nack to the DLQ: %v", r.Raw)
	}
}

// produceN produces n records round-robin over the topic's partitions
// (n/partitions each when n is a multiple) and waits for their acks.
func produceN(t *testing.T, b *brokerProc, topic string, n int) {
	t.Helper()
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic(topic))
	ctx := testCtx(t, opTimeout)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("record-%d", i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
}

// commitOffsets commits offsets of topic for group (a group without
// members, as admin tools do).
func commitOffsets(t *testing.T, adm *kadm.Client, group, topic string, offsets map[int32]int64) {
	t.Helper()
	var os kadm.Offsets
	for p, o := range offsets {
		os.AddOffset(topic, p, o, -1)
	}
	resps, err := adm.CommitOffsets(testCtx(t, opTimeout), group, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of %s: %v", group, err)
	}
}

// TestMonitoringMetricsExist: every metric a panel of
// deploy/grafana/broker.json or a rule of deploy/prometheus/alerts.yml
// names is on a real broker's /metrics, with the type its query needs
// (counters under rate/increase, gauges under deriv/delta, histograms by
// their _bucket series under histogram_quantile).
func TestMonitoringMetricsExist(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	monitoringTraffic(t, b)
	deadLetterOne(t, b, "monitoring")
	e := scrapeMetrics(t, b)
	var problems []string
	for _, q := range monitoringQueries(t) {
		problems = append(problems, checkMetricUses(q, e)...)
	}
	if len(problems) > 0 {
		t.Fatalf("the monitoring files do not match /metrics:\n%s", strings.Join(problems, "\n"))
	}
}

// TestMetricNamingConventions: the broker's own metrics (broker_*) follow
// Prometheus' conventions: counters end in _total and nothing else does,
// histograms carry their unit (_seconds or _bytes), no family is a bare
// "broker_..._count/_sum/_bucket" that would clash with a histogram's
// series, and every family has a TYPE.
func TestMetricNamingConventions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	monitoringTraffic(t, b)
	e := scrapeMetrics(t, b)
	var problems []string
	for name, typ := range e.types {
		if !strings.HasPrefix(name, "broker_") {
			continue
		}
		switch typ {
		case "counter":
			if !strings.HasSuffix(name, "_total") {
				problems = append(problems, name+": a counter whose name does not end in _total")
			}
		case "histogram", "summary":
			if !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
				problems = append(problems, name+": a "+typ+" without a unit suffix (_seconds, _bytes)")
			}
		default:
			if strings.HasSuffix(name, "_total") {
				problems = append(problems, name+": a "+typ+" whose name ends in _total (reserved for counters)")
			}
		}
		for _, bad := range []string{"_milliseconds", "_ms", "_kb", "_mb", "_count", "_sum", "_bucket"} {
			if strings.HasSuffix(name, bad) {
				problems = append(problems, name+": ends in "+bad+" (use base units; _count/_sum/_bucket belong to histograms)")
			}
		}
	}
	for name := range e.series {
		if _, ok := e.typeOf(name); !ok {
			problems = append(problems, name+": a series without a TYPE line")
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("metric naming:\n%s", strings.Join(problems, "\n"))
	}
}

// perPartitionSeries are the metrics with one series per partition (and,
// for the group ones, per group with a committed offset on it). Everything
// else on /metrics must not grow with the number of topics.
var perPartitionSeries = map[string]int{
	"broker_partition_bytes":            1,
	"broker_partition_records":          1,
	"broker_partition_log_start_offset": 1,
	"broker_partition_log_end_offset":   1,
	"broker_group_lag":                  1, // one group commits on every partition
	"broker_group_committed_offset":     1,
}

// TestMetricsCardinality1000Topics: creating 1000 topics, and one group
// committing an offset on each, adds exactly the documented series (README
// "Monitoring": 4 per partition, 2 per group and partition with a committed
// offset) and nothing else; in particular no histogram or counter is
// labelled by topic.
func TestMetricsCardinality1000Topics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	monitoringTraffic(t, b)
	before := scrapeMetrics(t, b)
	const topics = 1000
	adm := newAdmin(t, b.Addr())
	prefix := topicName(t, "")
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("%s-%04d", prefix, i))
	}
	for len(names) > 0 {
		n := min(len(names), 100)
		resps, err := adm.CreateTopics(testCtx(t, opTimeout), 1, 1, nil, names[:n]...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Fatalf("create topics: %v", err)
		}
		names = names[n:]
	}
	var commits kadm.Offsets
	for i := range topics {
		commits.AddOffset(fmt.Sprintf("%s-%04d", prefix, i), 0, 0, -1)
	}
	resps, err := adm.CommitOffsets(testCtx(t, opTimeout), "cardinality-group", commits)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets on %d topics: %v", topics, err)
	}
	after := scrapeMetrics(t, b)
	var problems []string
	for name, n := range after.series {
		grew := n - before.series[name]
		switch want := perPartitionSeries[name] * topics; {
		case cardinalityExempt(name):
			// New API or route labels (CreateTopics), runtime statistics.
			if grew > 50 {
				problems = append(problems, fmt.Sprintf("%s: %d new series for %d new topics, want a few at most", name, grew, topics))
			}
		case grew != want:
			problems = append(problems, fmt.Sprintf("%s: %d new series for %d new topics, want %d", name, grew, topics, want))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("series that grow with the number of topics:\n%s", strings.Join(problems, "\n"))
	}
	if max := before.total + 6*topics + 200; after.total > max {
		t.Fatalf("/metrics has %d series with %d topics, want at most %d", after.total, topics, max)
	}
	t.Logf("/metrics: %d series before, %d with %d more topics", before.total, after.total, topics)
}

// cardinalityExempt are series whose labels are bounded by something other
// than topics: API names, HTTP routes, Go runtime statistics.
func cardinalityExempt(name string) bool {
	for _, prefix := range []string{"go_", "process_", "broker_kafka_request", "broker_http_request"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// TestMonitoringPromtoolCheckRules: promtool (Debian package prometheus)
// accepts deploy/prometheus/alerts.yml and the rule unit tests of
// deploy/prometheus/alerts_test.yml pass.
func TestMonitoringPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool := lookTool(t, "promtool", "apt-get install prometheus")
	for _, args := range [][]string{
		{"check", "rules", alertsPath},
		{"test", "rules", "../deploy/prometheus/alerts_test.yml"},
	} {
		out, err := runTool(t, promtool, args...)
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// lookTool finds an external program or skips the test saying how to get it.
func lookTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := execLookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (%s); skipping", name, install)
	}
	return p
}

var execLookPath = exec.LookPath

// runTool runs an external program (at most 2 minutes) and returns its
// combined output.
func runTool(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	return string(out), err
}

// absPath is path relative to this package, made absolute.
func absPath(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond every 200 ms until it returns "" or timeout passes,
// then fails with its last answer.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDashboardStructure: deploy/grafana/broker.json imports into Grafana
// as one dashboard: a Prometheus data source input that every panel and
// target uses, unique panel ids, unique refIds within a panel, panels
// inside the 24-column grid without overlapping, a uid and a title.
func TestDashboardStructure(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Inputs []struct {
			Name     string `json:"name"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		Panels []struct {
			ID         int         `json:"id"`
			Type       string      `json:"type"`
			Title      string      `json:"title"`
			Datasource *datasource `json:"datasource"`
			GridPos    struct{ H, W, X, Y int }
			Targets    []struct {
				RefID      string      `json:"refId"`
				Datasource *datasource `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q, title %q: both needed", dash.UID, dash.Title)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].PluginID != "prometheus" {
		t.Fatalf("__inputs %+v, want one Prometheus data source", dash.Inputs)
	}
	dsUID := "${" + dash.Inputs[0].Name + "}"
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range dash.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
					y, x = g.Y+g.H, g.X+g.W
					continue
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != dsUID {
			t.Errorf("panel %q: data source %+v, want uid %s", p.Title, p.Datasource, dsUID)
		}
		refs := map[string]bool{}
		for _, target := range p.Targets {
			if refs[target.RefID] || target.RefID == "" {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, target.RefID)
			}
			refs[target.RefID] = true
			if target.Datasource == nil || target.Datasource.UID != dsUID {
				t.Errorf("panel %q target %s: data source %+v, want uid %s", p.Title, target.RefID, target.Datasource, dsUID)
			}
		}
	}
}
