package compattests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Apache Kafka as the reference broker (issue: the Java ecosystem and
// Apache Kafka side by side). Tests that call bothBrokers run once against
// our broker and once against a single-node KRaft Apache Kafka started from
// its Maven Central jars (reference/pom.xml, reference/run-kafka.sh), so a
// behaviour we claim to share with Kafka is checked against Kafka itself,
// and the test is proven right by passing there. Kafka is started once per
// test binary, on first use, and stopped by TestMain.

const referenceReadyTimeout = 120 * time.Second

var reference struct {
	once sync.Once
	addr string
	skip string // why the reference cannot run here
	err  error
	cmd  *exec.Cmd
	dir  string
	log  *lockedWriter
}

func referenceLib() string {
	if d := os.Getenv("KAFKA_REFERENCE_LIB"); d != "" {
		return d
	}
	return filepath.Join("reference", "target", "lib")
}

// referenceKafka returns the address of the reference Apache Kafka,
// starting it on first use. It skips the test when the jars or java are
// missing, unless KAFKA_REFERENCE_REQUIRED is set (CI), where it fails.
func referenceKafka(t testing.TB) string {
	t.Helper()
	reference.once.Do(startReferenceKafka)
	if reference.skip != "" {
		if os.Getenv("KAFKA_REFERENCE_REQUIRED") != "" {
			t.Fatalf("Apache Kafka reference required but unavailable: %s", reference.skip)
		}
		t.Skipf("Apache Kafka reference unavailable: %s", reference.skip)
	}
	if reference.err != nil {
		t.Fatalf("Apache Kafka reference: %v\n%s", reference.err, reference.log.tail(logTailBytes))
	}
	return reference.addr
}

func startReferenceKafka() {
	lib, err := filepath.Abs(referenceLib())
	if err != nil {
		reference.err = err
		return
	}
	if m, _ := filepath.Glob(filepath.Join(lib, "kafka_2.13-*.jar")); len(m) == 0 {
		reference.skip = fmt.Sprintf("no Apache Kafka jars in %s (run: mvn -B -q -f compat-tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib)", lib)
		return
	}
	if _, err := exec.LookPath("java"); err != nil {
		reference.skip = "java is not installed"
		return
	}
	dir, err := os.MkdirTemp("", "compat-tests-apache-kafka-")
	if err != nil {
		reference.err = err
		return
	}
	reference.dir = dir
	port, cport := freePort(), freePort()
	reference.addr = net.JoinHostPort("127.0.0.1", port)
	script, _ := filepath.Abs(filepath.Join("reference", "run-kafka.sh"))
	cmd := exec.Command("bash", script, dir, port, cport)
	cmd.Env = append(os.Environ(), "KAFKA_REFERENCE_LIB="+lib)
	reference.log = &lockedWriter{}
	cmd.Stdout, cmd.Stderr = reference.log, reference.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		reference.err = err
		return
	}
	reference.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(referenceReadyTimeout)
	for {
		select {
		case err := <-exited:
			reference.err = fmt.Errorf("Apache Kafka exited before it was ready: %v", err)
			reference.cmd = nil
			return
		default:
		}
		if referenceReady(reference.addr) {
			return
		}
		if time.Now().After(deadline) {
			reference.err = fmt.Errorf("Apache Kafka was not ready within %v", referenceReadyTimeout)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// referenceReady reports whether Kafka at addr answers Metadata with
// itself as a broker.
func referenceReady(addr string) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return cl.Ping(ctx) == nil
}

func stopReferenceKafka() {
	if reference.cmd != nil && reference.cmd.Process != nil {
		_ = syscall.Kill(-reference.cmd.Process.Pid, syscall.SIGKILL)
	}
	if reference.dir != "" {
		_ = os.RemoveAll(reference.dir)
	}
}

func freePort() string {
	addr, err := unusedAddr()
	if err != nil {
		panic(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// lockedWriter collects a child's output for a failure message.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail is the last n bytes written.
func (l *lockedWriter) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// bothBrokers runs body against our broker ("broker") and against Apache
// Kafka ("apache-kafka"); ref tells body which one it has, for the
// differences DESIGN.md lists as intended.
func bothBrokers(t *testing.T, body func(t *testing.T, addr string, ref bool)) {
	t.Run("broker", func(t *testing.T) {
		body(t, startBroker(t).Addr(), false)
	})
	t.Run("apache-kafka", func(t *testing.T) {
		body(t, referenceKafka(t), true)
	})
}
