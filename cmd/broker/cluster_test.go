package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/internal/testtools/freeaddr"
)

func TestClusterConfigs(t *testing.T) {
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-peers", "1@localhost:9093,x"}, "which is not id@host:port"},
		{[]string{"--cluster-peers", "0@localhost:9093"}, "node id is not a number between 1"},
		{[]string{"--cluster-peers", "1@localhost:9093,1@other:9093"}, "names node 1 twice"},
		{[]string{"--cluster-peers", "1@0.0.0.0:9093"}, "does not name a host clients can dial"},
		{[]string{"--cluster-peers", "2@b:9093,3@c:9093"}, "node-id 1 is not in cluster-peers"},
		{[]string{"--inter-broker-addr", ":9093"}, "cluster-peers is empty"},
		{[]string{"--cluster-peers", "1@localhost:9092,2@b:9093"}, "is the address of kafka-addr"},
		{[]string{"--cluster-join"}, "is set but cluster-peers is empty; list the cluster's members"},
		{[]string{"--cluster-join", "--cluster-peers", "1@localhost:9093"}, "names only this node"},
	}
	for _, tt := range bad {
		c, err := loadFromArgs(t, tt.args, nil)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want an error containing %q", tt.args, err, tt.want)
		}
	}
	c, err := loadFromArgs(t, []string{"--node-id", "2", "--cluster-peers", "1@a:9093, 2@b:9093,3@c:9093", "--inter-broker-addr", "0.0.0.0:9093"}, nil)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatalf("a good cluster config: %v", err)
	}
}

// freeAddr is a loopback address no other call of this test binary got.
func freeAddr(t *testing.T) string { t.Helper(); return freeaddr.T(t) }

// startClusterBroker runs a broker with cfg until the test ends.
func startClusterBroker(t *testing.T, cfg *Config) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker %d: %v", cfg.NodeID, err)
		}
	})
}

func clusterStatusOf(t *testing.T, httpAddr string) (httpapi.ClusterStatus, bool) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := realMain([]string{"broker", "cluster", "status", "--server", httpAddr, "-o", "json"}, &out, &errOut); code != 0 {
		return httpapi.ClusterStatus{}, false
	}
	var st httpapi.ClusterStatus
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("cluster status: %v: %s", err, out.String())
	}
	return st, true
}

// TestClusterStatusThreeBrokers: three brokers started with cluster-peers
// elect a leader of the metadata group, register their Kafka addresses in
// it, and `broker cluster status` on each shows the same leader and the
// three members with their addresses. A broker without cluster settings
// answers single-node.
func TestClusterStatusThreeBrokers(t *testing.T) {
	const n = 3
	var peers []string
	inter, kafka, web := map[int32]string{}, map[int32]string{}, map[int32]string{}
	for id := int32(1); id <= n; id++ {
		inter[id], kafka[id], web[id] = freeAddr(t), freeAddr(t), freeAddr(t)
		peers = append(peers, fmt.Sprintf("%d@%s", id, inter[id]))
	}
	for id := int32(1); id <= n; id++ {
		cfg := defaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.NodeID = id
		cfg.KafkaAddr, cfg.HTTPAddr = kafka[id], web[id]
		cfg.ClusterPeers = strings.Join(peers, ",")
		cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
		startClusterBroker(t, cfg)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last []httpapi.ClusterStatus
	for {
		last = last[:0]
		agreed := true
		var leader uint64
		for id := int32(1); id <= n; id++ {
			st, ok := clusterStatusOf(t, web[id])
			last = append(last, st)
			if !ok || st.Mode != "raft" || st.Raft == nil || st.Raft.Leader == 0 || (leader != 0 && st.Raft.Leader != leader) || len(st.Members) != n {
				agreed = false
				continue
			}
			leader = st.Raft.Leader
			for _, m := range st.Members {
				if m.KafkaAddr != kafka[m.NodeID] || m.InterBrokerAddr != inter[m.NodeID] || !m.Voter || m.Leader != (uint64(m.NodeID) == leader) {
					agreed = false
				}
			}
		}
		if agreed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the brokers did not agree on the cluster: %+v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// /metrics carries the group's state.
	leader := last[0].Raft.Leader
	if m := scrape(t, web[1]); !strings.Contains(m, fmt.Sprintf("broker_raft_leader %d\n", leader)) || !strings.Contains(m, "broker_raft_leader_changes_total ") || !strings.Contains(m, "broker_raft_applied_index ") {
		t.Fatalf("/metrics of a clustered broker lacks the raft series (leader %d)", leader)
	}
	// The table output names the leader.
	var out, errOut bytes.Buffer
	if code := realMain([]string{"broker", "cluster", "status", "--server", web[2]}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "mode raft") || !strings.Contains(out.String(), kafka[3]) {
		t.Fatalf("cluster status: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	single := defaultConfig()
	single.DataDir, single.KafkaAddr, single.HTTPAddr = t.TempDir(), freeAddr(t), freeAddr(t)
	single.MemtableSize, single.CacheSize = 4<<20, 8<<20
	startClusterBroker(t, single)
	for {
		st, ok := clusterStatusOf(t, single.HTTPAddr)
		if ok {
			if st.Mode != "single-node" || st.Raft != nil || len(st.Members) != 1 || st.Members[0].KafkaAddr != single.KafkaAddr {
				t.Fatalf("single node: %+v", st)
			}
			if strings.Contains(scrape(t, single.HTTPAddr), "broker_raft_") {
				t.Fatal("a single node exports raft series")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the single node's HTTP listener did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scrape(t *testing.T, httpAddr string) string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitClusterStatus asks the broker at httpAddr for its cluster status
// until cond holds (the deadline only guards against a hang).
func waitClusterStatus(t *testing.T, httpAddr, what string, cond func(httpapi.ClusterStatus) bool) httpapi.ClusterStatus {
	t.Helper()
	var st httpapi.ClusterStatus
	waitFor(t, 60*time.Second, func() bool {
		var ok bool
		st, ok = clusterStatusOf(t, httpAddr)
		return ok && cond(st)
	}, func() string { return fmt.Sprintf("gave up waiting for %s at %s; last status %+v", what, httpAddr, st) })
	return st
}

// waitFor checks cond every 50 ms until it holds; once timeout has
// passed (it only guards against a hang) it fails t with failure's
// message, which may describe the last check. cond may fail t itself.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool, failure func() string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(failure())
		}
	}
}

// TestClusterAddRemoveNode: three brokers form a cluster; a fourth,
// started with cluster-join on an empty data directory, is added with
// `broker cluster add-node` sent to a follower (which answers with the
// leader's address; the CLI follows it), joins as a learner, is promoted
// to a voter and registers its Kafka address. add-node of a member and
// remove-node of an unknown id are refused with their codes;
// `remove-node` takes the fourth out again, and it reports itself removed.
func TestClusterAddRemoveNode(t *testing.T) {
	inter, kafka, web := map[int32]string{}, map[int32]string{}, map[int32]string{}
	var peers []string
	for id := int32(1); id <= 4; id++ {
		inter[id], kafka[id], web[id] = freeAddr(t), freeAddr(t), freeAddr(t)
		peers = append(peers, fmt.Sprintf("%d@%s", id, inter[id]))
	}
	start := func(id int32, peers []string, join bool) {
		cfg := defaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.NodeID = id
		cfg.KafkaAddr, cfg.HTTPAddr = kafka[id], web[id]
		cfg.ClusterPeers = strings.Join(peers, ",")
		cfg.ClusterJoin = join
		cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
		startClusterBroker(t, cfg)
	}
	for id := int32(1); id <= 3; id++ {
		start(id, peers[:3], false)
	}
	st := waitClusterStatus(t, web[1], "a leader with three registered members", func(st httpapi.ClusterStatus) bool {
		if st.Raft == nil || st.Raft.Leader == 0 || len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if m.KafkaAddr == "" {
				return false
			}
		}
		return true
	})
	leader := int32(st.Raft.Leader)
	follower := int32(1)
	if follower == leader {
		follower = 2
	}
	start(4, peers, true)

	cli := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"broker", "cluster"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := cli("add-node", "--id", "4", "--address", inter[4], "--server", web[follower]); code != 0 || !strings.Contains(out, "node 4 added as a learner") || !strings.Contains(out, "sending the change there") {
		t.Fatalf("add-node through a follower: exit %d\n%s", code, out)
	}
	waitClusterStatus(t, web[4], "node 4 a voter with its Kafka address, seen by itself", func(st httpapi.ClusterStatus) bool {
		if len(st.Members) != 4 {
			return false
		}
		m := st.Members[3]
		return m.NodeID == 4 && m.Voter && !m.Learner && m.KafkaAddr == kafka[4] && m.InterBrokerAddr == inter[4]
	})
	if code, out := cli("add-node", "--id", "2", "--address", inter[2], "--server", web[leader]); code == 0 || !strings.Contains(out, "node_exists") {
		t.Fatalf("add-node of a member: exit %d\n%s", code, out)
	}
	if code, out := cli("remove-node", "--id", "9", "--server", web[leader]); code == 0 || !strings.Contains(out, "node_not_found") {
		t.Fatalf("remove-node of an unknown id: exit %d\n%s", code, out)
	}
	if code, out := cli("status", "--server", web[leader]); code != 0 || !strings.Contains(out, "ROLE") || !strings.Contains(out, kafka[4]) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	if code, out := cli("remove-node", "--id", "4", "--server", web[follower]); code != 0 || !strings.Contains(out, "node 4 removed") {
		t.Fatalf("remove-node: exit %d\n%s", code, out)
	}
	waitClusterStatus(t, web[follower], "three members again", func(st httpapi.ClusterStatus) bool {
		return len(st.Members) == 3 && st.Raft.Leader != 0
	})
	waitClusterStatus(t, web[4], "node 4 to report itself removed", func(st httpapi.ClusterStatus) bool {
		return st.Raft != nil && st.Raft.Removed
	})
}
