package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterGroupConfigOn sends IncrementalAlterConfigs of group's configs to
// broker id itself and returns the resource's error code (a request
// error as -1, logged).
func alterGroupConfigOn(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, group string, validateOnly bool, kv ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = kv[i], kmsg.StringPtr(kv[i+1]), kmsg.IncrementalAlterConfigOpSet
		if kv[i+1] == "" {
			c.Value, c.Op = nil, kmsg.IncrementalAlterConfigOpDelete
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil || len(resp.Resources) != 1 {
		t.Logf("IncrementalAlterConfigs on broker %d: %v %+v", id, err, resp)
		return -1
	}
	return resp.Resources[0].ErrorCode
}

// groupConfigsOn are the configs broker id itself describes for group:
// name=value, with "(set)" for a value set on the group.
func groupConfigsOn(ctx context.Context, cl *kgo.Client, id int32, group string) (map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return nil, err
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeConfigs GROUP %s on broker %d: %+v", group, id, resp.Resources)
	}
	out := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		v := ""
		if c.Value != nil {
			v = *c.Value
		}
		if c.Source == kmsg.ConfigSourceGroupConfig {
			v += " (set)"
		}
		out[c.Name] = v
	}
	return out, nil
}

// waitGroupConfigs waits until every broker in ids describes want (name
// to value, "(set)" included) for group.
func waitGroupConfigs(ctx context.Context, t *testing.T, cl *kgo.Client, ids []int32, group string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			got, err := groupConfigsOn(ctx, cl, id, group)
			ok := err == nil
			for k, v := range want {
				ok = ok && got[k] == v
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d describes group %s as %v (%v), want %v", id, group, got, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestClusterGroupConfigs: group configs (KIP-932 share.*) are kept in the
// metadata group, as Kafka's controller keeps GROUP config resources.
// Set through a broker that does not coordinate the group, every broker
// describes them, the coordinator included, and the coordinator's share
// group uses them (share.auto.offset.reset=earliest delivers the records
// produced before the group started); a bad value gets INVALID_CONFIG and
// validate_only changes nothing; a broker stopped while a config changed
// has the change once restarted.
func TestClusterGroupConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	const group, topic = "gcfg", "gcfg-topic"
	coordinator := findGroupCoordinator(ctx, t, cl, group)
	other := coordinator%3 + 1
	all := []int32{1, 2, 3}

	const reset, lock = "share.auto.offset.reset", "share.record.lock.duration.ms"
	for try := 0; ; try++ {
		code := alterGroupConfigOn(ctx, t, cl, other, group, false, reset, "earliest", lock, "15000")
		if code == 0 {
			break
		}
		if code != kerr.NotController.Code || try == 50 {
			t.Fatalf("IncrementalAlterConfigs GROUP on broker %d (coordinator %d): %v", other, coordinator, kerr.ErrorForCode(code))
		}
		time.Sleep(100 * time.Millisecond) // an election: retriable, as clients retry it
	}
	set := map[string]string{reset: "earliest (set)", lock: "15000 (set)"}
	waitGroupConfigs(ctx, t, cl, all, group, set)

	if code := alterGroupConfigOn(ctx, t, cl, other, group, false, lock, "5"); code != kerr.InvalidConfig.Code {
		t.Fatalf("a lock duration of 5 ms: code %d, want INVALID_CONFIG", code)
	}
	if code := alterGroupConfigOn(ctx, t, cl, coordinator, group, true, reset, "latest"); code != 0 {
		t.Fatalf("validate_only: code %d", code)
	}
	waitGroupConfigs(ctx, t, cl, all, group, set)

	// The coordinator's share group starts at the earliest offset.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, topic); return ok })
	prod := tc.client(kgo.DefaultProduceTopic(topic))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sc := tc.client(kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the share group received %d of the 2 records produced before it started (share.auto.offset.reset=earliest)", got)
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sc.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); got++ })
		_ = sc.FlushAcks(ctx)
	}
	sc.Close()

	// A broker stopped while the configs change has the change restarted:
	// neither the metadata group's leader (a proposal to a stopped leader
	// waits out its timeout) nor the broker the change is sent to.
	m, err := metadataOf(ctx, cl, other)
	if err != nil {
		t.Fatal(err)
	}
	stopped := int32(1)
	for stopped == m.ControllerID || stopped == other {
		stopped++
	}
	tc.stop[stopped]()
	deadline := time.Now().Add(30 * time.Second)
	for alterGroupConfigOn(ctx, t, cl, other, group, false, lock, "", reset, "latest") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the change with broker", stopped, "stopped was not applied")
		}
		time.Sleep(200 * time.Millisecond)
	}
	tc.start(stopped)
	waitGroupConfigs(ctx, t, cl, all, group, map[string]string{reset: "latest (set)", lock: "30000"})
}
