package compattests

// librdkafka's KIP-848 consumer (issue 10): confluent-kafka for Python
// (2.16, librdkafka 2.12+) with group.protocol=consumer, run as separate
// processes by librdkafka/kip848_member.py. The Python package is not a Go
// module: .ci/run installs it into a venv and names the venv's python in
// CONFLUENT_KAFKA_PYTHON; without it the test skips, unless
// LIBRDKAFKA_KIP848_REQUIRED is set (CI), where it fails.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// confluentKafkaPython is a python that imports confluent_kafka with a
// librdkafka that speaks KIP-848: CONFLUENT_KAFKA_PYTHON, else the venv
// .ci/run makes.
func confluentKafkaPython(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("CONFLUENT_KAFKA_PYTHON")}
	cache := os.Getenv("XDG_CACHE_HOME")
	if home, err := os.UserHomeDir(); cache == "" && err == nil {
		cache = filepath.Join(home, ".cache")
	}
	if cache != "" {
		candidates = append(candidates, filepath.Join(cache, "broker-ci", "confluent-kafka", "bin", "python"))
	}
	why := "confluent-kafka not installed (.ci/run installs it into a venv; or set CONFLUENT_KAFKA_PYTHON)"
	for _, py := range candidates {
		if py == "" {
			continue
		}
		// librdkafka's KIP-848 consumer is GA from 2.12.
		out, err := exec.Command(py, "-c", "import confluent_kafka as c; v = c.libversion()[1]; print(c.libversion()[0]); raise SystemExit(0 if v >= 0x020c0000 else 3)").CombinedOutput()
		if err == nil {
			return py
		}
		why = py + ": " + string(bytes.TrimSpace(out)) + " (" + err.Error() + "; librdkafka 2.12+ needed)"
	}
	if os.Getenv("LIBRDKAFKA_KIP848_REQUIRED") != "" {
		t.Fatalf("confluent-kafka is required (LIBRDKAFKA_KIP848_REQUIRED) but unusable: %s", why)
	}
	t.Skip(why)
	return ""
}

// rdkMember is one kip848_member.py process.
type rdkMember struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *lockedWriter
}

func startRdkMember(t *testing.T, py string, s *groupScenario, name string) *rdkMember {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("librdkafka", "kip848_member.py"))
	if err != nil {
		t.Fatal(err)
	}
	m := &rdkMember{done: make(chan struct{}), stderr: &lockedWriter{}}
	m.cmd = exec.Command(py, script, s.b.Addr(), s.group, s.topic, name)
	m.cmd.Stderr = m.stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.led.add(name, sc.Text())
		}
		_ = m.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("librdkafka member %s stderr:\n%s", name, m.stderr.tail(8<<10))
		}
	})
	return m
}

// leave closes the consumer (SIGTERM: Consumer.close, a heartbeat at epoch -1).
func (m *rdkMember) leave(t *testing.T) {
	t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Errorf("librdkafka member did not close within 30s")
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

func (m *rdkMember) kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// TestLibrdkafkaKIP848: librdkafka consumers with group.protocol=consumer
// in one group. Two members split the partitions; one leaves cleanly and
// the other gets all of them; a third joins and is killed -9 and its
// partitions come back after its session expires; a fourth member started
// after the first left resumes at the committed offsets. Every record is
// committed exactly once (the ledger counts a record only after its
// synchronous commit). Also against Apache Kafka 4.2.
func TestLibrdkafkaKIP848(t *testing.T) {
	py := confluentKafkaPython(t)
	t.Parallel()
	bothKIP848(t, func(t *testing.T, b *brokerProc, _ bool) {
		s := newGroupScenario(t, b)
		per := 160
		m1 := startRdkMember(t, py, s, "m1")
		s.produce(per)
		s.waitConsumed("one member")
		s.waitConsumerStable(1, "one member")

		m2 := startRdkMember(t, py, s, "m2")
		d := s.waitConsumerStable(2, "two members")
		for _, m := range d.Members {
			if n := len(m.Assignment.TopicPartitions); n != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != groupPartitions/2 {
				t.Errorf("member %s (%s) owns %+v, want %d partitions of %s", m.MemberID, m.ClientID, m.Assignment.TopicPartitions, groupPartitions/2, s.topic)
			}
		}
		s.produce(per)
		s.waitConsumed("two members")
		if got := s.led.members(); got["m2"] == 0 {
			t.Errorf("the second member consumed nothing: %v", got)
		}

		m2.leave(t)
		s.waitConsumerStable(1, "after a clean leave")
		s.produce(per)
		s.waitConsumed("after a clean leave")

		m3 := startRdkMember(t, py, s, "m3")
		s.waitConsumerStable(2, "a third member")
		s.produce(per)
		s.waitConsumed("a third member")
		m3.kill()
		s.produce(per) // the killed member's partitions wait for its session to expire
		s.waitConsumerStable(1, "after the killed member expired")
		s.waitConsumed("after a member was killed")

		m1.leave(t)
		s.produce(per)
		startRdkMember(t, py, s, "m4")
		s.waitConsumed("a new member resuming at the committed offsets")
		s.led.check(t, s.produced)
		if got := s.led.members(); got["m1"] == 0 || got["m3"] == 0 || got["m4"] == 0 {
			t.Errorf("records per member %v, want some for m1, m2, m3 and m4", got)
		}
		offsets, err := s.adm.FetchOffsets(testCtx(t, opTimeout), s.group)
		if err != nil {
			t.Fatal(err)
		}
		for p, end := range endOffsets(t, s.adm, s.topic) {
			if o, ok := offsets.Lookup(s.topic, p); !ok || o.At != end {
				t.Errorf("partition %d committed %+v, want the end offset %d", p, o, end)
			}
		}
	})
}
