package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/httpapi"
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

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
