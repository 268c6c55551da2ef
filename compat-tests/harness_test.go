// Package compattests runs real Kafka clients (franz-go, sarama,
// segmentio/kafka-go, kcat) against the real broker binary over TCP on
// 127.0.0.1. Nothing here imports the broker's packages: the broker is a
// black box started as a child process (STYLE rule 19).
//
// Environment:
//
//	BROKER_BIN    use this prebuilt broker binary instead of building one
//	CRASH_CYCLES  kill -9 cycles in TestCrashKill9 (default 5)
//	KAFKA_REFERENCE_LIB       Apache Kafka's jars for the tests that also run
//	                          against it (default reference/target/lib)
//	KAFKA_REFERENCE_REQUIRED  fail, rather than skip, those tests when the
//	                          jars or java are missing (set by .ci/run)
//	CONFLUENT_KAFKA_PYTHON    a python with confluent-kafka (librdkafka 2.12+)
//	                          for TestLibrdkafkaKIP848 (.ci/run makes a venv)
//	LIBRDKAFKA_KIP848_REQUIRED  fail, rather than skip, that test without it
package compattests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vibemq/broker/internal/testtools/freeaddr"
)

// brokerBin is the binary every test starts; set by TestMain.
var brokerBin string

const (
	readyTimeout    = 60 * time.Second // start until Kafka port accepts and /readyz is 200
	stopTimeout     = 30 * time.Second // SIGTERM until exit
	expectExitAfter = 30 * time.Second // a run that must fail on its own
	logTailBytes    = 64 << 10         // how much of a broker log a failing test prints
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("BROKER_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compat-tests: BROKER_BIN %q: %v\n", bin, err)
			return 2
		}
		brokerBin = abs
		defer stopReferenceKafka()
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "compat-tests-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat-tests: %v\n", err)
		return 2
	}
	defer os.RemoveAll(dir)
	brokerBin = filepath.Join(dir, "broker")
	cmd := exec.Command("go", "build", "-o", brokerBin, "github.com/vibemq/broker/cmd/broker")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "compat-tests: building the broker failed: %v\n", err)
		return 2
	}
	defer stopReferenceKafka()
	return m.Run()
}

// brokerOpt configures startBroker.
type brokerOpt func(*brokerConfig)

type brokerConfig struct {
	dataDir   string
	args      []string
	listeners string
}

// withListeners serves the Kafka listeners of tmpl (--listeners) instead of
// --kafka-addr: "{0}" is the address Addr returns (readiness dials it),
// "{1}".."{3}" are further free addresses (ExtraAddr).
func withListeners(tmpl string) brokerOpt { return func(c *brokerConfig) { c.listeners = tmpl } }

// withDataDir starts the broker on dir instead of a fresh t.TempDir().
func withDataDir(dir string) brokerOpt { return func(c *brokerConfig) { c.dataDir = dir } }

// withArgs appends extra flags to `broker serve`, e.g. "--default-partitions", "3".
func withArgs(args ...string) brokerOpt {
	return func(c *brokerConfig) { c.args = append(c.args, args...) }
}

// brokerProc is one broker child process, restartable on the same data
// directory and ports.
type brokerProc struct {
	t         testing.TB
	dataDir   string
	kafkaAddr string
	httpAddr  string
	args      []string
	logPath   string
	listeners string
	extra     [3]string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	waitErr error         // set before done is closed
	starts  int
}

// startBroker starts `broker serve` on free loopback ports and waits until it
// is ready. The broker is stopped (SIGTERM, then SIGKILL) when the test ends,
// and its log is printed if the test failed.
func startBroker(t testing.TB, opts ...brokerOpt) *brokerProc {
	t.Helper()
	var cfg brokerConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.dataDir == "" {
		cfg.dataDir = t.TempDir()
	}
	logDir := t.TempDir()
	b := &brokerProc{
		t:         t,
		dataDir:   cfg.dataDir,
		kafkaAddr: freeAddr(t),
		httpAddr:  freeAddr(t),
		args:      cfg.args,
		logPath:   filepath.Join(logDir, "broker.log"),
		listeners: cfg.listeners,
	}
	b.pickExtra()
	// Registered first, so it runs last: the log then includes shutdown.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (%s, last %d bytes):\n%s", b.logPath, logTailBytes, b.logTail())
		}
	})
	t.Cleanup(b.cleanup)
	// A port picked by freeAddr can be taken by a parallel test before the
	// broker binds it; only then, pick new ports and try again.
	for attempt := 1; ; attempt++ {
		if b.tryStart() || attempt == 3 || !strings.Contains(b.logSinceStart(), "address already in use") {
			break
		}
		b.kafkaAddr, b.httpAddr = freeAddr(t), freeAddr(t)
		b.pickExtra()
	}
	if !b.running() {
		t.Fatalf("broker exited before it was ready (%v); log:\n%s", b.exitErr(), b.logTail())
	}
	return b
}

// Addr is the Kafka listener, host:port.
func (b *brokerProc) Addr() string { return b.kafkaAddr }

// HTTPAddr is the HTTP listener, host:port.
func (b *brokerProc) HTTPAddr() string { return b.httpAddr }

// DataDir is the broker's --data-dir.
func (b *brokerProc) DataDir() string { return b.dataDir }

// PID is the current process id, 0 when not running.
func (b *brokerProc) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// pickExtra chooses the further listener addresses of withListeners.
func (b *brokerProc) pickExtra() {
	if b.listeners == "" {
		return
	}
	for i := range b.extra {
		b.extra[i] = freeAddr(b.t)
	}
}

// ExtraAddr is the listener address "{i}" (1-3) of withListeners.
func (b *brokerProc) ExtraAddr(i int) string { return b.extra[i-1] }

func (b *brokerProc) serveArgs() []string {
	listen := []string{"--kafka-addr", b.kafkaAddr}
	if b.listeners != "" {
		l := strings.ReplaceAll(b.listeners, "{0}", b.kafkaAddr)
		for i, a := range b.extra {
			l = strings.ReplaceAll(l, "{"+strconv.Itoa(i+1)+"}", a)
		}
		listen = []string{"--listeners", l}
	}
	args := []string{
		"serve",
		"--data-dir", b.dataDir,
		listen[0], listen[1],
		"--http-addr", b.httpAddr,
		"--log-level", "info",
		"--log-format", "json",
	}
	return append(args, b.args...)
}

func (b *brokerProc) start() {
	b.t.Helper()
	if !b.tryStart() {
		b.t.Fatalf("broker exited before it was ready (%v); log:\n%s", b.exitErr(), b.logTail())
	}
}

// logSinceStart is the log of the current (or last) run.
func (b *brokerProc) logSinceStart() string {
	log := b.Log()
	if i := strings.LastIndex(log, "=== compat-tests: start #"); i >= 0 {
		return log[i:]
	}
	return log
}

// tryStart starts the process and waits until it is ready; false means it
// exited first.
func (b *brokerProc) tryStart() bool {
	b.t.Helper()
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatalf("open broker log: %v", err)
	}
	b.mu.Lock()
	b.starts++
	fmt.Fprintf(f, "=== compat-tests: start #%d: %s %s\n", b.starts, brokerBin, strings.Join(b.serveArgs(), " "))
	cmd := exec.Command(brokerBin, b.serveArgs()...)
	cmd.Env = brokerEnv()
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		b.mu.Unlock()
		f.Close()
		b.t.Fatalf("start broker: %v", err)
	}
	done := make(chan struct{})
	b.cmd, b.done, b.waitErr = cmd, done, nil
	b.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(done)
	}()
	return b.waitReady(done)
}

// waitReady polls until the Kafka port accepts and GET /readyz returns 200.
func (b *brokerProc) waitReady(done chan struct{}) bool {
	b.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	httpClient := &http.Client{Timeout: 2 * time.Second}
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", b.kafkaAddr, time.Second)
		if err != nil {
			last = "kafka port: " + err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c.Close()
		resp, err := httpClient.Get("http://" + b.httpAddr + "/readyz")
		if err != nil {
			last = "GET /readyz: " + err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
		last = "GET /readyz: " + resp.Status
		time.Sleep(50 * time.Millisecond)
	}
	b.kill()
	b.t.Fatalf("broker not ready after %v (last: %s); log:\n%s", readyTimeout, last, b.logTail())
	return false
}

func (b *brokerProc) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitErr
}

// running reports whether the current process has not exited.
func (b *brokerProc) running() bool {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Alive fails the test if the broker process has exited.
func (b *brokerProc) Alive() {
	b.t.Helper()
	if !b.running() {
		b.t.Fatalf("broker process exited unexpectedly: %v", b.exitErr())
	}
}

// Stop sends SIGTERM, waits for the exit and asserts exit code 0.
func (b *brokerProc) Stop() {
	b.t.Helper()
	b.StopWithin(stopTimeout)
}

// StopWithin is Stop with a bound on the wait: past it the broker is killed
// and the test fails.
func (b *brokerProc) StopWithin(limit time.Duration) {
	b.t.Helper()
	if !b.running() {
		b.t.Fatalf("Stop: broker is not running (exit: %v)", b.exitErr())
	}
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		b.t.Fatalf("broker did not exit within %v of SIGTERM; killed it", limit)
	}
	if err := b.exitErr(); err != nil {
		b.t.Fatalf("broker exited uncleanly after SIGTERM: %v (want exit code 0)", err)
	}
}

// Kill sends SIGKILL (kill -9) and waits until the process is gone.
func (b *brokerProc) Kill() {
	b.t.Helper()
	if !b.running() {
		b.t.Fatalf("Kill: broker is not running (exit: %v)", b.exitErr())
	}
	b.kill()
}

func (b *brokerProc) kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart stops the broker cleanly if it runs, then starts it again on the
// same data directory and ports.
func (b *brokerProc) Restart() {
	b.t.Helper()
	if b.running() {
		b.Stop()
	}
	b.start()
}

// Start starts a stopped or killed broker again on the same data and ports.
func (b *brokerProc) Start() {
	b.t.Helper()
	if b.running() {
		b.t.Fatalf("Start: broker is already running")
	}
	b.start()
}

func (b *brokerProc) cleanup() {
	if !b.running() {
		return
	}
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-done
		b.t.Errorf("broker did not exit within %v of SIGTERM at the end of the test; killed it", stopTimeout)
		return
	}
	if d := time.Since(start); d > 2*time.Second {
		b.t.Logf("note: broker took %v to exit after SIGTERM", d.Round(time.Millisecond))
	}
}

func (b *brokerProc) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
	}
	return string(data)
}

// Log returns the whole broker log so far.
func (b *brokerProc) Log() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := unusedAddr()
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return addr
}

// unusedAddr returns a free 127.0.0.1 address that no earlier call of
// this process returned (freeaddr.Addr).
func unusedAddr() (string, error) { return freeaddr.Addr() }

// runBrokerExpectExit runs `broker serve` on dataDir with fresh ports and
// expects it to exit on its own. It returns the exit code (-1 for a signal)
// and the combined output. A broker still running after expectExitAfter is
// killed and the test fails.
func runBrokerExpectExit(t testing.TB, dataDir string, extra ...string) (int, string) {
	t.Helper()
	args := []string{
		"serve",
		"--data-dir", dataDir,
		"--kafka-addr", freeAddr(t),
		"--http-addr", freeAddr(t),
		"--log-level", "info",
		"--log-format", "json",
	}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), expectExitAfter)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, brokerBin, args...)
	cmd.Env = brokerEnv()
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("broker %v kept running for %v; it should have refused to start. Output:\n%s", args, expectExitAfter, out.String())
	}
	if err == nil {
		return 0, out.String()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("run broker: %v", err)
	return 0, ""
}

// envInt reads a positive integer from the environment or returns def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// brokerEnv is this process's environment without BROKER_* variables: the
// broker reads those as configuration and refuses unknown ones, and the
// harness's own BROKER_BIN must not reach it. Flags configure the broker.
func brokerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BROKER_") {
			env = append(env, kv)
		}
	}
	return env
}
