package main

// The broker child process of the torture mode: started on free loopback
// ports with a data directory of its own, killed with SIGKILL and started
// again on the same directory and ports, its RSS read from /proc.

import (
	"bufio"
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
	"time"
)

const (
	brokerReadyTimeout = 60 * time.Second
	brokerStopTimeout  = 30 * time.Second
)

// brokerProcess is one `broker serve` child, restartable on its data
// directory and ports.
type brokerProcess struct {
	bin       string
	dataDir   string
	kafkaAddr string
	httpAddr  string
	args      []string // extra flags of `broker serve`
	logPath   string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	waitErr error
	starts  int
}

// newBrokerProcess prepares a broker on dataDir with fresh loopback ports;
// start runs it.
func newBrokerProcess(bin, dataDir, logPath string, args ...string) (*brokerProcess, error) {
	kafkaAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	return &brokerProcess{bin: bin, dataDir: dataDir, kafkaAddr: kafkaAddr, httpAddr: httpAddr, args: args, logPath: logPath}, nil
}

// freeLoopbackAddr is a 127.0.0.1 host:port that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startFresh starts the broker, picking new ports (at most twice) when a
// port was taken between freeLoopbackAddr and the broker's bind.
func (b *brokerProcess) startFresh(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if err = b.start(ctx); err == nil || !strings.Contains(b.logSinceStart(), "address already in use") {
			return err
		}
		if b.kafkaAddr, err = freeLoopbackAddr(); err != nil {
			return err
		}
		if b.httpAddr, err = freeLoopbackAddr(); err != nil {
			return err
		}
	}
	return err
}

// start runs `broker serve` and waits until its Kafka port accepts and
// GET /readyz answers 200.
func (b *brokerProcess) start(ctx context.Context) error {
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"serve",
		"--data-dir", b.dataDir,
		"--kafka-addr", b.kafkaAddr,
		"--http-addr", b.httpAddr,
		"--log-level", "warn",
		"--log-format", "json",
	}, b.args...)
	b.mu.Lock()
	b.starts++
	fmt.Fprintf(f, "=== broker-load torture: start #%d: %s %s\n", b.starts, b.bin, strings.Join(args, " "))
	cmd := exec.Command(b.bin, args...)
	cmd.Env = brokerChildEnv()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		b.mu.Unlock()
		f.Close()
		return fmt.Errorf("start broker: %w", err)
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
	return b.waitReady(ctx, done)
}

func (b *brokerProcess) waitReady(ctx context.Context, done chan struct{}) error {
	deadline := time.Now().Add(brokerReadyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	last := "not tried"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-done:
			return fmt.Errorf("broker exited before it was ready (%v); log tail:\n%s", b.exitErr(), b.logTail(4096))
		default:
		}
		if c, err := net.DialTimeout("tcp", b.kafkaAddr, time.Second); err != nil {
			last = "kafka port: " + err.Error()
		} else {
			c.Close()
			resp, err := client.Get("http://" + b.httpAddr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				last = "GET /readyz: " + resp.Status
			} else {
				last = "GET /readyz: " + err.Error()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.kill()
	return fmt.Errorf("broker not ready after %v (last: %s); log tail:\n%s", brokerReadyTimeout, last, b.logTail(4096))
}

func (b *brokerProcess) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitErr
}

// alive reports whether the current process has not exited.
func (b *brokerProcess) alive() bool {
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

// pid is the current process id, 0 before the first start.
func (b *brokerProcess) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// kill sends SIGKILL and waits until the process is gone.
func (b *brokerProcess) kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// stop sends SIGTERM and waits; past brokerStopTimeout it kills. It
// returns the exit error of a process that did not exit with code 0.
func (b *brokerProcess) stop() error {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-done:
		return b.exitErr()
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return b.exitErr()
	case <-time.After(brokerStopTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("broker did not exit within %v of SIGTERM; killed it", brokerStopTimeout)
	}
}

// logSinceStart is the log of the current (or last) run.
func (b *brokerProcess) logSinceStart() string {
	data, _ := os.ReadFile(b.logPath)
	log := string(data)
	if i := strings.LastIndex(log, "=== broker-load torture: start #"); i >= 0 {
		return log[i:]
	}
	return log
}

// logTail is the last n bytes of the whole log.
func (b *brokerProcess) logTail(n int) string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// panicInLog reports the first line of a Go panic or fatal error in the
// broker's log, "" when there is none.
func (b *brokerProcess) panicInLog() string {
	f, err := os.Open(b.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") || strings.Contains(line, `"panic"`) {
			return line
		}
	}
	return ""
}

// brokerChildEnv is this process's environment without BROKER_*
// variables: the broker reads those as configuration and refuses unknown
// ones. Flags configure the child.
func brokerChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BROKER_") {
			env = append(env, kv)
		}
	}
	return env
}

// buildBroker builds cmd/broker of the module in the current directory
// into dir.
func buildBroker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "broker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/vibemq/broker/cmd/broker")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/broker (run from the repository, or pass --broker-bin): %v\n%s", err, out.String())
	}
	return bin, nil
}

// procStatusKiB reads one "Name:   N kB" field of /proc/PID/status.
func procStatusKiB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatusKiB(data, field)
}

func parseProcStatusKiB(status []byte, field string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("proc status: bad %s line %q", field, line)
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	return 0, fmt.Errorf("proc status: no %s line", field)
}

// rssSampler reads the broker's VmRSS every interval until stopped.
type rssSampler struct {
	mu      sync.Mutex
	samples int
	peakKiB int64
	lastKiB int64
	stopC   chan struct{}
	doneC   chan struct{}
}

func startRSSSampler(pid int, interval time.Duration) *rssSampler {
	s := &rssSampler{stopC: make(chan struct{}), doneC: make(chan struct{})}
	go func() {
		defer close(s.doneC)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if kib, err := procStatusKiB(pid, "VmRSS"); err == nil {
				s.mu.Lock()
				s.samples++
				s.lastKiB = kib
				s.peakKiB = max(s.peakKiB, kib)
				s.mu.Unlock()
			}
			select {
			case <-s.stopC:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends sampling and returns the sample count, peak and last VmRSS.
func (s *rssSampler) stop() (samples int, peakKiB, lastKiB int64) {
	close(s.stopC)
	<-s.doneC
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.peakKiB, s.lastKiB
}

var errPhaseSkipped = errors.New("skipped")
