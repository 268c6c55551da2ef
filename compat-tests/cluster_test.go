package compattests

// A three-broker cluster (issue 13) served to sarama and kcat
// (librdkafka): both must follow the partition leaders that Metadata
// names, of RF 1 partitions (on one broker each) and of RF 3 ones (Raft
// groups).

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// startCluster starts three brokers of one cluster as child processes.
func startCluster(t *testing.T) []*brokerProc {
	t.Helper()
	var peers []string
	for id := 1; id <= 3; id++ {
		peers = append(peers, fmt.Sprintf("%d@%s", id, freeAddr(t)))
	}
	var out []*brokerProc
	for id := 1; id <= 3; id++ {
		out = append(out, startBroker(t, withArgs("--node-id", strconv.Itoa(id), "--cluster-peers", strings.Join(peers, ","))))
	}
	// Every broker has registered when each one's Metadata names three
	// brokers and a controller.
	deadline := time.Now().Add(60 * time.Second)
	for _, b := range out {
		for {
			var md kcatMetadata
			raw := runKcat(t, "", "-b", b.Addr(), "-L", "-J")
			if err := json.Unmarshal([]byte(raw), &md); err == nil && len(md.Brokers) == 3 && md.ControllerID > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %s: metadata never named three brokers and a controller: %s", b.Addr(), raw)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return out
}

// TestClusterSaramaKcat: sarama's ClusterAdmin creates a 6-partition topic
// (sent to the controller) and sees it led by the three brokers; kcat
// produces keyed records through one broker (librdkafka sends each
// partition's to its leader) and reads them all back through another;
// sarama's consumer reads every partition from its leader; RF 4 (more
// than the brokers) is refused with INVALID_REPLICATION_FACTOR.
func TestClusterSaramaKcat(t *testing.T) {
	kcatPath(t)
	brokers := startCluster(t)
	addrs := []string{brokers[0].Addr(), brokers[1].Addr(), brokers[2].Addr()}
	ca, err := sarama.NewClusterAdmin(addrs, saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer ca.Close()
	topic := topicName(t, "")
	if err := ca.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	err = ca.CreateTopic(topic+"-rf4", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 4}, false)
	if err == nil || !strings.Contains(err.Error(), sarama.ErrInvalidReplicationFactor.Error()) {
		t.Fatalf("CreateTopic with RF 4 on three brokers: %v, want %v", err, sarama.ErrInvalidReplicationFactor)
	}
	var leaders map[int32]int32
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := ca.DescribeTopics([]string{topic})
		leaders = map[int32]int32{}
		if err == nil && len(td) == 1 && td[0].Err == sarama.ErrNoError {
			for _, p := range td[0].Partitions {
				leaders[p.ID] = p.Leader
			}
		}
		if len(leaders) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DescribeTopics: %v %+v", err, td)
		}
		time.Sleep(100 * time.Millisecond)
	}
	count := map[int32]int{}
	for _, l := range leaders {
		count[l]++
	}
	if count[1] != 2 || count[2] != 2 || count[3] != 2 {
		t.Fatalf("leaders %v: want two partitions on each broker", leaders)
	}

	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, fmt.Sprintf("k%d:v%d", i, i))
	}
	runKcat(t, strings.Join(lines, "\n")+"\n", "-b", addrs[0], "-P", "-t", topic, "-K:", "-X", "topic.partitioner=murmur2_random")
	out := runKcat(t, "", "-b", addrs[1], "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %k:%s\n")
	var got []string
	partitions := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		p, kv, _ := strings.Cut(l, " ")
		partitions[p] = true
		got = append(got, kv)
	}
	sort.Strings(got)
	sort.Strings(lines)
	if strings.Join(got, ",") != strings.Join(lines, ",") {
		t.Fatalf("kcat read %d records, want the 60 produced:\n%s", len(got), out)
	}
	if len(partitions) < 3 {
		t.Fatalf("the 60 keys landed in partitions %v only", partitions)
	}

	client, err := sarama.NewClient([]string{addrs[2]}, saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	read := saramaReadAll(t, client, topic, 6)
	if read != 60 {
		t.Fatalf("sarama read %d records, want 60", read)
	}
}

// TestClusterReplicatedSaramaKcat: a topic with replication factor 3
// (each partition a Raft group of the three brokers) created by sarama's
// ClusterAdmin; sarama's DescribeTopics shows three replicas and three in
// sync per partition; kcat (librdkafka, idempotent) produces keyed
// records and reads them back through another broker; sarama's
// synchronous producer (acks=all) and consumer follow the leaders.
func TestClusterReplicatedSaramaKcat(t *testing.T) {
	kcatPath(t)
	brokers := startCluster(t)
	addrs := []string{brokers[0].Addr(), brokers[1].Addr(), brokers[2].Addr()}
	cfg := saramaConfig(sarama.V2_8_0_0)
	cfg.Producer.RequiredAcks, cfg.Producer.Return.Successes = sarama.WaitForAll, true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	ca, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer ca.Close()
	topic := topicName(t, "")
	if err := ca.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 3}, false); err != nil {
		t.Fatalf("CreateTopic RF 3: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		td, err := ca.DescribeTopics([]string{topic})
		ok := err == nil && len(td) == 1 && td[0].Err == sarama.ErrNoError && len(td[0].Partitions) == 3
		for i := 0; ok && i < 3; i++ {
			p := td[0].Partitions[i]
			ok = p.Err == sarama.ErrNoError && p.Leader > 0 && len(p.Replicas) == 3 && len(p.Isr) == 3
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DescribeTopics: %v %+v", err, td)
		}
	}

	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, fmt.Sprintf("k%d:v%d", i, i))
	}
	runKcat(t, strings.Join(lines, "\n")+"\n", "-b", addrs[0], "-P", "-t", topic, "-K:", "-X", "enable.idempotence=true")
	out := runKcat(t, "", "-b", addrs[1], "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k:%s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	sort.Strings(lines)
	if strings.Join(got, ",") != strings.Join(lines, ",") {
		t.Fatalf("kcat read %d records, want the 30 produced:\n%s", len(got), out)
	}

	client, err := sarama.NewClient([]string{addrs[2]}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p := int32(0); p < 3; p++ {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder("sarama")}); err != nil {
			t.Fatalf("sarama produce to partition %d: %v", p, err)
		}
	}
	read := saramaReadAll(t, client, topic, 3)
	if read != 33 {
		t.Fatalf("sarama read %d records, want 33", read)
	}
}

// saramaReadAll reads partitions 0 to n-1 of topic from the oldest offset
// to the end offset sarama's client reports, following the leaders, and
// fails the test on an offset out of sequence or a record missing for
// 10 s; it returns how many records it read.
func saramaReadAll(t *testing.T, client sarama.Client, topic string, n int32) int {
	t.Helper()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	read := 0
	for p := int32(0); p < n; p++ {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("end offset of partition %d: %v", p, err)
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		for next := int64(0); next < end; next++ {
			select {
			case m := <-pc.Messages():
				if m.Offset != next {
					t.Fatalf("partition %d: offset %d, want %d", p, m.Offset, next)
				}
				read++
			case <-time.After(10 * time.Second):
				t.Fatalf("partition %d: no record at offset %d of %d", p, next, end)
			}
		}
		pc.Close()
	}
	return read
}
