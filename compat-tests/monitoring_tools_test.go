package compattests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Real monitoring tools as clients of the real broker: Debian's Prometheus
// scrapes it and answers every dashboard query and alert rule; Debian's
// Burrow reads __consumer_offsets and reports the lag `broker groups lag`
// reports. Both skip when the tool is not installed (.ci/run installs them).

var toolHTTP = &http.Client{Timeout: 10 * time.Second}

// startTool starts an external program with its output in a log file,
// waits until GET readyURL answers 200 and stops it (SIGTERM, then SIGKILL)
// when the test ends. Its log is printed if the test failed.
func startTool(t *testing.T, name, readyURL string, path string, args ...string) {
	t.Helper()
	startProcess(t, name, readyURL, func() string {
		resp, err := toolHTTP.Get(readyURL)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return resp.Status
		}
		return ""
	}, path, args...)
}

func startProcess(t *testing.T, name, where string, ready func() string, path string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 16<<10 {
				out = out[len(out)-16<<10:]
			}
			t.Logf("%s log (%s):\n%s", name, logPath, out)
		}
	})
	waitFor(t, 60*time.Second, name+" ready at "+where, func() string {
		select {
		case <-done:
			t.Fatalf("%s exited before it was ready; see its log", name)
		default:
		}
		return ready()
	})
}

// promQuery is one instant query against the Prometheus HTTP API.
type promResult struct {
	Status    string `json:"status"`
	Error     string `json:"error"`
	ErrorType string `json:"errorType"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func promQuery(t *testing.T, promAddr, expr string) promResult {
	t.Helper()
	resp, err := toolHTTP.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatalf("query %q: %v", expr, err)
	}
	defer resp.Body.Close()
	var r promResult
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("query %q: %v: %s", expr, err, body)
	}
	return r
}

// grafanaToPromQL replaces the dashboard's variables by what Grafana sends
// with "All" selected and a 1 s scrape interval.
func grafanaToPromQL(expr string) string {
	return strings.NewReplacer("$__rate_interval", "30s", "$job", "broker", "$instance", ".+").Replace(expr)
}

// TestPrometheusScrapesDashboardAndRules: a real Prometheus (Debian's
// prometheus) scrapes the broker every second with deploy/prometheus/
// alerts.yml loaded. Every dashboard query returns at least one series;
// every alert rule is loaded, evaluates without error, and every metric it
// names has series. Three alerts are driven to their firing condition for
// real: ConsumerLagGrowing (a group's lag grows past 1000), DeadLetterQueue
// Growing (a message is dead-lettered) and BrokerDown (the broker stops).
// The other alerts (disk nearly full, fsync latency, compaction behind,
// write stalls, log compaction errors) need a sick disk; their firing is
// covered by promtool's rule unit tests (TestMonitoringPromtoolCheckRules).
func TestPrometheusScrapesDashboardAndRules(t *testing.T) {
	t.Parallel()
	prometheus := lookTool(t, "prometheus", "apt-get install prometheus")
	b := startBroker(t)
	topic, _ := monitoringTraffic(t, b)

	dir := t.TempDir()
	promAddr := freeAddr(t)
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: broker
    static_configs:
      - targets: [%q]
`, absPath(t, alertsPath), b.HTTPAddr())
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startTool(t, "prometheus", "http://"+promAddr+"/-/ready", prometheus,
		"--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	waitFor(t, 30*time.Second, "first scrapes", func() string {
		r := promQuery(t, promAddr, `count_over_time(up{job="broker"}[1m]) >= 3`)
		if len(r.Data.Result) == 0 {
			return "fewer than 3 scrapes"
		}
		return ""
	})

	// The lag of group on topic grows past 1000 over a few scrapes; the
	// queue's dead-letter queue grows by one.
	for range 4 {
		produceN(t, b, topic, 300)
		time.Sleep(1100 * time.Millisecond)
	}
	deadLetterOne(t, b, "monitoring")

	waitFor(t, 30*time.Second, "lag and dead-letter alerts' conditions", func() string {
		var missing []string
		for _, r := range alertRules(t) {
			if r.Alert != "ConsumerLagGrowing" && r.Alert != "DeadLetterQueueGrowing" {
				continue
			}
			if res := promQuery(t, promAddr, r.Expr); len(res.Data.Result) == 0 {
				missing = append(missing, r.Alert)
			}
		}
		return strings.Join(missing, ", ")
	})

	var problems []string
	for _, q := range dashboardQueries(t) {
		expr := grafanaToPromQL(q.expr)
		r := promQuery(t, promAddr, expr)
		switch {
		case r.Status != "success":
			problems = append(problems, fmt.Sprintf("%s: %s: %s %s", q.where, expr, r.ErrorType, r.Error))
		case len(r.Data.Result) == 0:
			problems = append(problems, fmt.Sprintf("%s: %s: no data", q.where, expr))
		}
	}
	for _, rule := range alertRules(t) {
		if r := promQuery(t, promAddr, rule.Expr); r.Status != "success" {
			problems = append(problems, fmt.Sprintf("alert %s: %s %s", rule.Alert, r.ErrorType, r.Error))
		}
		uses, err := promqlMetrics(rule.Expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range uses {
			if r := promQuery(t, promAddr, "count("+u.name+")"); len(r.Data.Result) == 0 {
				problems = append(problems, fmt.Sprintf("alert %s: metric %s has no series in Prometheus", rule.Alert, u.name))
			}
		}
	}
	problems = append(problems, checkRulesHealthy(t, promAddr)...)
	if len(problems) > 0 {
		t.Fatalf("Prometheus answers:\n%s", strings.Join(problems, "\n"))
	}

	// BrokerDown's condition holds once a scrape fails.
	b.Stop()
	for _, r := range alertRules(t) {
		if r.Alert != "BrokerDown" {
			continue
		}
		waitFor(t, 15*time.Second, "BrokerDown's condition after the broker stopped", func() string {
			if res := promQuery(t, promAddr, r.Expr); len(res.Data.Result) == 0 {
				return "up == 0 has no result"
			}
			return ""
		})
	}
}

// checkRulesHealthy reads /api/v1/rules: every rule of alerts.yml is
// loaded, has been evaluated and has health "ok".
func checkRulesHealthy(t *testing.T, promAddr string) []string {
	t.Helper()
	resp, err := toolHTTP.Get("http://" + promAddr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
					State     string `json:"state"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var problems []string
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			seen[rule.Name] = true
			if rule.Health != "ok" {
				problems = append(problems, fmt.Sprintf("rule %s: health %q: %s", rule.Name, rule.Health, rule.LastError))
			}
		}
	}
	for _, rule := range alertRules(t) {
		if !seen[rule.Alert] {
			problems = append(problems, "rule "+rule.Alert+" is not loaded by Prometheus")
		}
	}
	sort.Strings(problems)
	return problems
}

// burrowLag is the part of Burrow's /v3/kafka/<cluster>/consumer/<group>/lag
// answer the test compares.
type burrowLag struct {
	Error   bool   `json:"error"`
	Message string `json:"message"`
	Status  struct {
		Status     string `json:"status"`
		TotalLag   int64  `json:"totallag"`
		Partitions []struct {
			Topic      string `json:"topic"`
			Partition  int32  `json:"partition"`
			CurrentLag int64  `json:"current_lag"`
			End        *struct {
				Offset int64 `json:"offset"`
			} `json:"end"`
		} `json:"partitions"`
	} `json:"status"`
}

// TestBurrowLagMatchesCLI: Debian's Burrow (a lag monitor reading
// __consumer_offsets, and the partitions' end offsets by ListOffsets v0)
// reports for a group the same per-partition lag as `broker groups lag`,
// and both equal the end offsets minus the committed offsets.
func TestBurrowLagMatchesCLI(t *testing.T) {
	t.Parallel()
	burrow := lookBurrow(t)
	// Burrow refuses to start without ZooKeeper (it keeps its notifier lock
	// there): Debian's zookeeper, standalone.
	zookeeper := startZooKeeper(t)
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic, group := topicName(t, "lag"), "burrow-lag-group"
	createTopic(t, adm, topic, 3, nil)
	produceN(t, b, topic, 30) // 10 per partition
	commitOffsets(t, adm, group, topic, map[int32]int64{0: 3, 1: 7, 2: 10})
	want := map[int32]int64{0: 7, 1: 3, 2: 0}

	// The CLI's lag.
	code, out, errOut := brokerCLI(t, "groups", "lag", "-b", b.Addr(), "-o", "json", group)
	if code != 0 {
		t.Fatalf("broker groups lag: exit %d: %s", code, errOut)
	}
	var rows []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Lag       int64  `json:"lag"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("broker groups lag -o json: %v: %s", err, out)
	}
	cliLag := map[int32]int64{}
	for _, r := range rows {
		if r.Topic == topic {
			cliLag[r.Partition] = r.Lag
		}
	}
	if fmt.Sprint(cliLag) != fmt.Sprint(want) {
		t.Fatalf("broker groups lag: %v, want %v", cliLag, want)
	}

	dir := t.TempDir()
	httpAddr := freeAddr(t)
	config := fmt.Sprintf(`[general]
pidfile=%q

[logging]
level="info"

[zookeeper]
servers=[%q]
timeout=6
root-path="/burrow"

[client-profile.broker]
client-id="burrow-compat-test"
kafka-version="2.0.0"

[cluster.local]
class-name="kafka"
servers=[%q]
client-profile="broker"
topic-refresh=1
offset-refresh=1

[consumer.local]
class-name="kafka"
cluster="local"
servers=[%q]
client-profile="broker"
start-latest=false

[httpserver.default]
address=%q

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
`, filepath.Join(dir, "burrow.pid"), zookeeper, b.Addr(), b.Addr(), httpAddr)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startTool(t, "burrow", "http://"+httpAddr+"/burrow/admin", burrow, "-config-dir", dir)

	lagURL := "http://" + httpAddr + "/v3/kafka/local/consumer/" + group + "/lag"
	var last burrowLag
	waitFor(t, 60*time.Second, "Burrow's lag of "+group, func() string {
		resp, err := toolHTTP.Get(lagURL)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		last = burrowLag{}
		if err := json.Unmarshal(body, &last); err != nil {
			return fmt.Sprintf("%v: %s", err, body)
		}
		got := map[int32]int64{}
		for _, p := range last.Status.Partitions {
			if p.Topic == topic {
				got[p.Partition] = p.CurrentLag
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(cliLag) {
			return fmt.Sprintf("Burrow says %v, broker groups lag %v (%s)", got, cliLag, body)
		}
		return ""
	})
	t.Logf("Burrow (status %s) and broker groups lag agree: %v", last.Status.Status, cliLag)
	if last.Status.TotalLag != 10 {
		t.Fatalf("Burrow's total lag %d, want 10", last.Status.TotalLag)
	}
}

// startZooKeeper starts Debian's ZooKeeper standalone on a free port with
// a temporary data directory and returns its address.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	java := lookTool(t, "java", "apt-get install zookeeper")
	const jar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Skipf("ZooKeeper is not installed (%s: %v; apt-get install zookeeper), which Burrow needs; skipping", jar, err)
	}
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	// Ready when it serves: its port accepts connections a while before.
	startProcess(t, "zookeeper", addr, func() string {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("srvr")); err != nil {
			return err.Error()
		}
		out, _ := io.ReadAll(c)
		if !strings.Contains(string(out), "Mode: standalone") {
			return fmt.Sprintf("srvr: %q", out)
		}
		return ""
	}, java, "-Dzookeeper.admin.enableServer=false", "-Xmx256m",
		"-cp", jar, "org.apache.zookeeper.server.ZooKeeperServerMain", port, t.TempDir())
	return addr
}

// lookBurrow finds Burrow (Debian installs it as /usr/bin/Burrow).
func lookBurrow(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"Burrow", "burrow"} {
		if p, err := execLookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Burrow is not installed (apt-get install burrow); skipping")
	return ""
}
