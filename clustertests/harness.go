// Package clustertests starts real `broker serve` processes, each in its
// own Linux network namespace, and injects the faults a replicated
// system must survive: kill -9 and restart on the same data, SIGSTOP and
// SIGCONT, a network partition (the node's link down), packet loss and
// delay (tc netem, when the kernel has it). It is the harness of issue 13
// part 5; its tests (netns_test.go) assert the metadata Raft group's
// behaviour through each node's GET /v1/admin/cluster.
//
// Layout of one cluster: a hub namespace holding a bridge, and per node a
// namespace with one veth pair (eth0 inside, h<id> on the bridge), the
// address 10.77.0.<id>/24 and the listeners kafka :9092+generation,
// http :8080, inter-broker :9093. Every namespace of a run is named
// "vmqh<pid>x<seq>-…", so a later run deletes the leftovers of a crashed
// one (its pid is gone) and two runs never share a name. Status is read
// by running `broker cluster status --output json` inside the node's own
// namespace, so a partitioned node is still readable.
//
// It needs root and iproute2's `ip` (`tc` for netem); Require skips
// without them unless CLUSTER_NETNS_REQUIRED=1.
package clustertests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vibemq/broker/httpapi"
)

const namePrefix = "vmqh"

var runSeq atomic.Int64

// unavailable says why network namespaces cannot be used here, or "".
func unavailable() string {
	if os.Geteuid() != 0 {
		return "the cluster netns tests need root (ip netns add)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the cluster netns tests need iproute2's ip on PATH"
	}
	name := fmt.Sprintf("%s%dprobe", namePrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add failed: %v %s", err, out)
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
	return ""
}

// Require skips t when namespaces are not usable, or fails it when
// CLUSTER_NETNS_REQUIRED=1.
func Require(t testing.TB) {
	t.Helper()
	if why := unavailable(); why != "" {
		if os.Getenv("CLUSTER_NETNS_REQUIRED") == "1" {
			t.Fatalf("%s (CLUSTER_NETNS_REQUIRED=1)", why)
		}
		t.Skip(why + "; run as root with iproute2 (set CLUSTER_NETNS_REQUIRED=1 to fail instead)")
	}
}

// NetemAvailable reports whether the kernel has the netem qdisc (some
// kernels, e.g. minimal VM kernels, lack sch_netem).
func NetemAvailable() bool {
	name := fmt.Sprintf("%s%dnetem", namePrefix, os.Getpid())
	if exec.Command("ip", "netns", "add", name).Run() != nil {
		return false
	}
	defer func() { _ = exec.Command("ip", "netns", "del", name).Run() }()
	return exec.Command("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").Run() == nil
}

// CleanLeftovers deletes the namespaces (and kills their processes) of
// runs whose process is gone.
func CleanLeftovers() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], namePrefix) {
			continue
		}
		name := f[0]
		pidStr := strings.TrimPrefix(name, namePrefix)
		if i := strings.IndexAny(pidStr, "xp"); i > 0 {
			pidStr = pidStr[:i]
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // a live run
		}
		killNamespace(name)
	}
}

func killNamespace(name string) {
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, p := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary returns the broker binary: BROKER_BIN, or one built once per
// test process into dir (go build ./cmd/broker).
func Binary(dir string) (string, error) {
	if b := os.Getenv("BROKER_BIN"); b != "" {
		return b, nil
	}
	buildOnce.Do(func() {
		buildBin = filepath.Join(dir, "broker")
		out, err := exec.Command("go", "build", "-o", buildBin, "github.com/vibemq/broker/cmd/broker").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/broker: %v\n%s", err, out)
		}
	})
	return buildBin, buildErr
}

// Cluster is N broker processes in their namespaces around one bridge.
type Cluster struct {
	t      testing.TB
	bin    string
	prefix string
	hub    string
	peers  string
	Nodes  []*Node
	// clientNS is the client namespace Dialer attaches, or "".
	clientNS string
	// args are added to every node's `serve` command line (NewWithArgs).
	args []string
}

// Node is one broker: its namespace, address, data directory (kept over
// restarts) and current process.
type Node struct {
	ID      int
	NS      string
	IP      string
	DataDir string
	// Gen counts restarts with a new Kafka port (a new registration).
	Gen  int
	cmd  *exec.Cmd
	done chan struct{}
	logs *os.File
}

// KafkaAddr is the Kafka listener of the node's current generation.
func (n *Node) KafkaAddr() string { return fmt.Sprintf("%s:%d", n.IP, 9092+2*n.Gen) }

// HTTPAddr is the node's HTTP listener.
func (n *Node) HTTPAddr() string { return n.IP + ":8080" }

// New creates the namespaces and links of n nodes and starts them; all
// of it is removed by t.Cleanup, even when the test fails.
func New(t testing.TB, bin string, n int) *Cluster {
	t.Helper()
	return NewWithArgs(t, bin, n)
}

// NewWithArgs is New with args added to every node's `serve` command line
// (e.g. "--transaction-state-log-replication-factor", "3"), at every start.
func NewWithArgs(t testing.TB, bin string, n int, args ...string) *Cluster {
	t.Helper()
	CleanLeftovers()
	c := &Cluster{t: t, bin: bin, prefix: fmt.Sprintf("%s%dx%d", namePrefix, os.Getpid(), runSeq.Add(1)), args: args}
	c.hub = c.prefix + "-hub"
	t.Cleanup(c.destroy)
	c.ip("netns", "add", c.hub)
	c.ip("-n", c.hub, "link", "add", "br0", "type", "bridge")
	c.ip("-n", c.hub, "link", "set", "br0", "up")
	var peers []string
	for id := 1; id <= n; id++ {
		node := &Node{ID: id, NS: fmt.Sprintf("%s-n%d", c.prefix, id), IP: fmt.Sprintf("10.77.0.%d", id), DataDir: t.TempDir()}
		c.Nodes = append(c.Nodes, node)
		c.ip("netns", "add", node.NS)
		c.ip("link", "add", c.hostLink(id), "netns", c.hub, "type", "veth", "peer", "name", "eth0", "netns", node.NS)
		c.ip("-n", c.hub, "link", "set", c.hostLink(id), "master", "br0", "up")
		c.ip("-n", node.NS, "addr", "add", node.IP+"/24", "dev", "eth0")
		c.ip("-n", node.NS, "link", "set", "eth0", "up")
		c.ip("-n", node.NS, "link", "set", "lo", "up")
		peers = append(peers, fmt.Sprintf("%d@%s:9093", id, node.IP))
	}
	c.peers = strings.Join(peers, ",")
	for _, node := range c.Nodes {
		c.Start(node.ID)
	}
	return c
}

func (c *Cluster) hostLink(id int) string { return fmt.Sprintf("h%d", id) }

func (c *Cluster) ip(args ...string) {
	c.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		c.t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// Node returns node id (1-based).
func (c *Cluster) Node(id int) *Node { return c.Nodes[id-1] }

// Start starts node id's broker on its data directory.
func (c *Cluster) Start(id int) {
	c.t.Helper()
	n := c.Node(id)
	logs, err := os.OpenFile(filepath.Join(n.DataDir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.NS, c.bin, "serve",
		"--data-dir", filepath.Join(n.DataDir, "data"), "--node-id", strconv.Itoa(id),
		"--kafka-addr", n.KafkaAddr(), "--http-addr", n.HTTPAddr(), "--cluster-peers", c.peers,
		"--memtable-size", "4MiB", "--cache-size", "8MiB")
	cmd.Args = append(cmd.Args, c.args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	n.cmd, n.logs, n.done = cmd, logs, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); _ = logs.Close(); close(done) }(n.done)
}

// Kill sends SIGKILL to node id's broker and waits for it to exit.
func (c *Cluster) Kill(id int) {
	n := c.Node(id)
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies too
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// Restart kills node id and starts it again on the same data; newAddr
// moves its Kafka listener, so the broker proposes a new registration
// (a metadata record the group must commit).
func (c *Cluster) Restart(id int, newAddr bool) {
	c.t.Helper()
	c.Kill(id)
	if newAddr {
		c.Node(id).Gen++
	}
	c.Start(id)
}

// Pause stops node id's process (SIGSTOP); Resume continues it.
func (c *Cluster) Pause(id int) { _ = c.Node(id).cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused node (SIGCONT).
func (c *Cluster) Resume(id int) { _ = c.Node(id).cmd.Process.Signal(syscall.SIGCONT) }

// Partition cuts the given nodes off the bridge (their link down): each
// is alone, the others keep talking.
func (c *Cluster) Partition(ids ...int) {
	c.t.Helper()
	for _, id := range ids {
		c.ip("-n", c.hub, "link", "set", c.hostLink(id), "down")
	}
}

// Heal brings every node's link up again.
func (c *Cluster) Heal() {
	c.t.Helper()
	for _, n := range c.Nodes {
		c.ip("-n", c.hub, "link", "set", c.hostLink(n.ID), "up")
	}
}

// Netem applies `tc qdisc add ... netem <spec>` (e.g. "loss 20% delay
// 50ms") to both directions of every node's link.
func (c *Cluster) Netem(spec ...string) {
	c.t.Helper()
	for _, n := range c.Nodes {
		for _, side := range [][]string{{c.hub, c.hostLink(n.ID)}, {n.NS, "eth0"}} {
			args := append([]string{"netns", "exec", side[0], "tc", "qdisc", "add", "dev", side[1], "root", "netem"}, spec...)
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				c.t.Fatalf("tc netem on %s %s: %v %s", side[0], side[1], err, out)
			}
		}
	}
}

// Status reads node id's GET /v1/admin/cluster with `broker cluster
// status` run inside its namespace; an error when it does not answer
// within 2 s (stopped, paused, starting).
func (c *Cluster) Status(id int) (httpapi.ClusterStatus, error) {
	n := c.Node(id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.NS, c.bin, "cluster", "status",
		"--server", "http://"+n.HTTPAddr(), "--output", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var st httpapi.ClusterStatus
	if err := cmd.Run(); err != nil {
		return st, fmt.Errorf("node %d: %v %s", id, err, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return st, fmt.Errorf("node %d: %v", id, err)
	}
	return st, nil
}

// Statuses reads the status of the given nodes (all when none given);
// a node that does not answer is absent from the map.
func (c *Cluster) Statuses(ids ...int) map[int]httpapi.ClusterStatus {
	if len(ids) == 0 {
		for _, n := range c.Nodes {
			ids = append(ids, n.ID)
		}
	}
	res := map[int]httpapi.ClusterStatus{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := c.Status(id); err == nil {
				mu.Lock()
				res[id] = st
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// WaitFor polls the given nodes' statuses until cond holds, and fails
// the test after timeout with the last statuses and the brokers' logs'
// tails. It returns the statuses that satisfied cond.
func (c *Cluster) WaitFor(what string, timeout time.Duration, ids []int, cond func(map[int]httpapi.ClusterStatus) bool) map[int]httpapi.ClusterStatus {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sts := c.Statuses(ids...)
		if cond(sts) {
			return sts
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(sts, "", " ")
			c.t.Fatalf("%s: not reached within %v; last statuses:\n%s\n%s", what, timeout, b, c.logTails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Cluster) logTails() string {
	var sb strings.Builder
	for _, n := range c.Nodes {
		b, _ := os.ReadFile(filepath.Join(n.DataDir, "broker.log"))
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		fmt.Fprintf(&sb, "--- node %d log tail ---\n%s\n", n.ID, b)
	}
	return sb.String()
}

func (c *Cluster) destroy() {
	for _, n := range c.Nodes {
		c.Kill(n.ID)
	}
	for _, n := range c.Nodes {
		killNamespace(n.NS)
	}
	killNamespace(c.hub)
}
