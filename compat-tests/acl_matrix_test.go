package compattests

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The ACL matrix (issue 12 part 4): every API the broker serves, called by
// a SCRAM principal (User:alice) without the ACL Kafka's KafkaApis checks
// (the exact error code Kafka answers), then with it (the check passes).
// It runs against our broker (authorizer-enabled) and against Apache Kafka
// 4.2 with StandardAuthorizer, so the codes are Kafka's own.

const (
	aclUser     = "alice"
	aclPassword = "alice-secret"
	aclAlice    = "User:alice"
)

// aclTarget is a broker with a SASL_PLAINTEXT listener, an admin (a super
// user) and alice.
type aclTarget struct {
	addr   string
	admin  *kadm.Client
	adminC *kgo.Client
	node   int32
	ref    bool
}

// startACLBroker starts our broker with the authorizer on, the bootstrap
// admin as the one super user.
func startACLBroker(t *testing.T) aclTarget {
	dir := t.TempDir()
	pw := filepath.Join(dir, "admin.password")
	if err := os.WriteFile(pw, []byte(adminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, withListeners("PLAINTEXT://{0},SASL_PLAINTEXT://{1}"), withArgs(
		"--authorizer-enabled", "--super-users", "User:"+adminUser,
		"--sasl-bootstrap-user", adminUser, "--sasl-bootstrap-password-file", pw,
		"--connection-failed-authentication-delay", "10ms"))
	return newACLTarget(t, b.ExtraAddr(1), false)
}

func newACLTarget(t *testing.T, addr string, ref bool) aclTarget {
	cl := newClient(t, addr, kgo.SASL(scram512(adminUser, adminPassword)))
	adm := kadm.NewClient(cl)
	createUser512(t, adm, aclUser, aclPassword)
	md, err := adm.BrokerMetadata(testCtx(t, opTimeout))
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("broker metadata: %v %v", md, err)
	}
	return aclTarget{addr: addr, admin: adm, adminC: cl, node: md.Brokers[0].NodeID, ref: ref}
}

// startACLReferenceKafka starts Apache Kafka with StandardAuthorizer: a
// PLAINTEXT listener (inter-broker and controller traffic, User:ANONYMOUS,
// a super user as Kafka's own docs set it up), a SASL_PLAINTEXT listener
// with SCRAM-SHA-512, and User:admin a super user. The admin's credential
// is created over PLAINTEXT.
func startACLReferenceKafka(t *testing.T) aclTarget {
	lib, err := filepath.Abs(referenceLib())
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(lib, "kafka_2.13-*.jar")); len(m) == 0 {
		if os.Getenv("KAFKA_REFERENCE_REQUIRED") != "" {
			t.Fatalf("no Apache Kafka jars in %s", lib)
		}
		t.Skipf("Apache Kafka reference unavailable: no jars in %s", lib)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("Apache Kafka reference unavailable: java is not installed")
	}
	dir := t.TempDir()
	port, cport, sport := freePort(), freePort(), freePort()
	plain := net.JoinHostPort("127.0.0.1", port)
	sasl := net.JoinHostPort("127.0.0.1", sport)
	script, _ := filepath.Abs(filepath.Join("reference", "run-kafka.sh"))
	cmd := exec.Command("bash", script, dir, port, cport,
		"listeners=PLAINTEXT://"+plain+",CONTROLLER://127.0.0.1:"+cport+",SASL_PLAINTEXT://"+sasl,
		"advertised.listeners=PLAINTEXT://"+plain+",SASL_PLAINTEXT://"+sasl,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS;User:"+adminUser,
	)
	cmd.Env = append(os.Environ(), "KAFKA_REFERENCE_LIB="+lib)
	log := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("Apache Kafka log:\n%s", log.tail(logTailBytes))
		}
	})
	for deadline := time.Now().Add(referenceReadyTimeout); !referenceReady(plain); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Apache Kafka with ACLs not ready within %v", referenceReadyTimeout)
		}
	}
	anon := kadm.NewClient(newClient(t, plain))
	createUser512(t, anon, adminUser, adminPassword)
	// The credential reaches the broker through the metadata log.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sasl), kgo.SASL(scram512(adminUser, adminPassword)), kgo.RequestRetries(0))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err = cl.Ping(ctx)
			cancel()
			cl.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin cannot log in to Apache Kafka: %v", err)
		}
	}
	return newACLTarget(t, sasl, true)
}

// createUser512 gives user a SCRAM-SHA-512 credential. (Kafka refuses a
// request that names one user twice, as createUser's two mechanisms do,
// with DUPLICATE_RESOURCE.)
func createUser512(t testing.TB, adm *kadm.Client, user, password string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(testCtx(t, opTimeout), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs %s: %v", user, err)
	}
}

// binding is an ACL for alice, from any host.
type binding struct {
	rt   kmsg.ACLResourceType
	name string
	pt   kmsg.ACLResourcePatternType
	op   kmsg.ACLOperation
	perm kmsg.ACLPermissionType
}

func allowACL(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) binding {
	return binding{rt, name, kmsg.ACLResourcePatternTypeLiteral, op, kmsg.ACLPermissionTypeAllow}
}

func (a aclTarget) createACLs(t *testing.T, bs ...binding) {
	t.Helper()
	if len(bs) == 0 {
		return
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.rt, b.name, b.pt
		c.Principal, c.Host, c.Operation, c.PermissionType = aclAlice, "*", b.op, b.perm
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(testCtx(t, opTimeout), a.adminC)
	if err != nil {
		t.Fatalf("CreateAcls: %v", err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("CreateAcls: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
}

// waitACLs waits until the broker's authorizer holds n bindings of alice:
// Kafka applies ACLs from its metadata log, after CreateAcls answers.
func (a aclTarget) waitACLs(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Principal = kmsg.StringPtr(aclAlice)
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(testCtx(t, opTimeout), a.adminC)
		if err != nil {
			t.Fatalf("DescribeAcls: %v", err)
		}
		got := 0
		for _, r := range resp.Resources {
			got += len(r.ACLs)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice has %d ACLs, want %d", got, n)
		}
	}
}

func (a aclTarget) dropACLs(t *testing.T) {
	t.Helper()
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal = kmsg.StringPtr(aclAlice)
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	if _, err := req.RequestWith(testCtx(t, opTimeout), a.adminC); err != nil {
		t.Fatalf("DeleteAcls: %v", err)
	}
	a.waitACLs(t, 0)
}

// aclCase is one row: base ACLs alice always has in the row, the call
// (its error code), the code without grant, and the grant that passes the
// check. allowed, when set, is the exact code with the grant; else any
// code but denied.
type aclCase struct {
	name    string
	base    []binding
	grant   []binding
	denied  *kerr.Error
	allowed *int16
	call    func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16
	// v3: a client that sends AddPartitionsToTxn at most v3, as producers
	// do (v4+ is for brokers and needs CLUSTER_ACTION).
	v3 bool
	// skipAllowed: the allowed call is not run (it would change what
	// later rows use, or needs a real transaction).
	skipAllowed bool
}

var zeroCode = new(int16)

// TestACLMatrix runs every row against both brokers.
func TestACLMatrix(t *testing.T) {
	t.Run("broker", func(t *testing.T) { runACLMatrix(t, startACLBroker(t)) })
	t.Run("apache-kafka", func(t *testing.T) { runACLMatrix(t, startACLReferenceKafka(t)) })
}

func runACLMatrix(t *testing.T, a aclTarget) {
	const (
		topic    = "acl-topic"
		delTopic = "acl-gone"
		group    = "acl-group"
		txnID    = "acl-txn"
		// shareGroup is a share group (KIP-932).
		shareGroup = "acl-share"
	)
	createTopic(t, a.admin, topic, 1, nil)
	createTopic(t, a.admin, delTopic, 1, nil)
	ctx := testCtx(t, 5*opTimeout)
	if err := a.adminC.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("admin produce: %v", err)
	}
	if _, err := a.admin.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatalf("admin commit: %v", err)
	}
	var topicID [16]byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		md, err := a.admin.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil {
			topicID = md.Topics[topic].ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata of %s: %v", topic, err)
		}
	}
	nodeStr := strconv.Itoa(int(a.node))
	T, G, C, X := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId
	const cluster = "kafka-cluster"
	op := func(o kmsg.ACLOperation) kmsg.ACLOperation { return o }
	describeTopic := allowACL(T, topic, op(kmsg.ACLOperationDescribe))

	cases := []aclCase{
		{name: "Metadata/named", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
		{name: "Metadata/topic authorized operations", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrMetadataRequest()
				req.IncludeTopicAuthorizedOperations = true
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				mt := resp.Topics[0]
				if mt.ErrorCode == 0 && mt.AuthorizedOperations != 1<<int(kmsg.ACLOperationRead)|1<<int(kmsg.ACLOperationDescribe) {
					return -101 // READ, and the DESCRIBE it implies
				}
				return mt.ErrorCode
			}},
		{name: "Metadata/all hides", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				for _, t := range resp.Topics {
					if t.Topic != nil && *t.Topic == topic {
						return 0
					}
				}
				return kerr.TopicAuthorizationFailed.Code // not listed
			}},
		{name: "Produce", base: []binding{describeTopic}, denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{allowACL(T, topic, kmsg.ACLOperationWrite)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return errCode(cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr())
			}},
		{name: "Produce/DENY on a prefix wins over ALLOW ALL", denied: kerr.TopicAuthorizationFailed, skipAllowed: true,
			base: []binding{allowACL(T, topic, kmsg.ACLOperationAll),
				{T, "acl-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny}},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return errCode(cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr())
			}},
		{name: "ListOffsets/wildcard topic READ", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{allowACL(T, "*", kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrListOffsetsRequest() // READ implies the DESCRIBE ListOffsets needs
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "Fetch", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrFetchRequest()
				req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
				ft := kmsg.NewFetchRequestTopic()
				ft.Topic, ft.TopicID = topic, topicID
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
				ft.Partitions = append(ft.Partitions, fp)
				req.Topics = append(req.Topics, ft)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "ListOffsets", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrListOffsetsRequest()
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "OffsetForLeaderEpoch", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrOffsetForLeaderEpochRequest()
				req.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DeleteRecords", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationDelete)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDeleteRecordsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "CreateTopics", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, "acl-new", kmsg.ACLOperationCreate)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrCreateTopicsRequest()
				req.ValidateOnly, req.TimeoutMillis = true, 10000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "acl-new", 1, 1
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
		{name: "CreateTopics/cluster", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationCreate)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrCreateTopicsRequest()
				req.ValidateOnly, req.TimeoutMillis = true, 10000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "acl-new2", 1, 1
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
		{name: "CreatePartitions", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.ValidateOnly, req.TimeoutMillis = true, 10000
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = topic, 2
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
		{name: "DescribeConfigs/topic", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationDescribeConfigs)},
			call: describeConfigsCall(kmsg.ConfigResourceTypeTopic, topic)},
		{name: "DescribeConfigs/broker", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribeConfigs)},
			call: describeConfigsCall(kmsg.ConfigResourceTypeBroker, nodeStr)},
		{name: "IncrementalAlterConfigs", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationAlterConfigs)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				req.ValidateOnly = true
				r := kmsg.NewIncrementalAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
				r.Configs = append(r.Configs, c)
				req.Resources = append(req.Resources, r)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Resources) != 1 {
					return -100
				}
				return resp.Resources[0].ErrorCode
			}},
		{name: "AlterConfigs", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationAlterConfigs)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAlterConfigsRequest()
				req.ValidateOnly = true
				r := kmsg.NewAlterConfigsRequestResource()
				r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
				req.Resources = append(req.Resources, r)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Resources) != 1 {
					return -100
				}
				return resp.Resources[0].ErrorCode
			}},
		{name: "FindCoordinator/group", denied: kerr.GroupAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			call: findCoordinatorCall(0, group)},
		// Allowed: Kafka may answer COORDINATOR_NOT_AVAILABLE until its
		// transaction log exists.
		{name: "FindCoordinator/txn", denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationDescribe)},
			call: findCoordinatorCall(1, txnID)},
		{name: "JoinGroup", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, "acl-join", kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrJoinGroupRequest()
				req.Group, req.ProtocolType = "acl-join", "consumer"
				req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
				req.Protocols = append(req.Protocols, p)
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "Heartbeat", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, group, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrHeartbeatRequest()
				req.Group, req.MemberID, req.Generation = group, "nobody", 1
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "SyncGroup", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, group, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrSyncGroupRequest()
				req.Group, req.MemberID, req.Generation = group, "nobody", 1
				req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "LeaveGroup", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, group, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Group = group
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "nobody"
				req.Members = append(req.Members, m)
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "OffsetCommit/group", denied: kerr.GroupAuthorizationFailed, allowed: zeroCode,
			base:  []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			grant: []binding{allowACL(G, group, kmsg.ACLOperationRead)},
			call:  offsetCommitCall(group, topic, topicID)},
		{name: "OffsetCommit/topic", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			base:  []binding{allowACL(G, group, kmsg.ACLOperationRead)},
			grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call:  offsetCommitCall(group, topic, topicID)},
		{name: "OffsetFetch", denied: kerr.GroupAuthorizationFailed, allowed: zeroCode,
			base:  []binding{describeTopic},
			grant: []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrOffsetFetchRequest()
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = group
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				rg.Topics = append(rg.Topics, rt)
				req.Groups = append(req.Groups, rg)
				req.Group = group
				req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				if len(resp.Groups) == 1 {
					return resp.Groups[0].ErrorCode
				}
				return resp.ErrorCode
			}},
		{name: "DescribeGroups", denied: kerr.GroupAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Groups = []string{group}
				req.IncludeAuthorizedOperations = true
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Groups) != 1 {
					return -100
				}
				g := resp.Groups[0]
				if g.ErrorCode == 0 && g.AuthorizedOperations != 1<<int(kmsg.ACLOperationDescribe) {
					return -101 // authorized operations: DESCRIBE only
				}
				return g.ErrorCode
			}},
		{name: "ListGroups filters", denied: kerr.GroupAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, br)
				if err != nil || resp.ErrorCode != 0 {
					return -100
				}
				for _, g := range resp.Groups {
					if g.Group == group {
						return 0
					}
				}
				return kerr.GroupAuthorizationFailed.Code // not listed
			}},
		{name: "OffsetDelete", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, group, kmsg.ACLOperationDelete), allowACL(T, topic, kmsg.ACLOperationRead)},
			skipAllowed: true,
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Group = group
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "DeleteGroups", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, "acl-nogroup", kmsg.ACLOperationDelete)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Groups = []string{"acl-nogroup"}
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Groups) != 1 {
					return -100
				}
				return resp.Groups[0].ErrorCode
			}},
		{name: "ConsumerGroupHeartbeat", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, "acl-848", kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Group, req.MemberID, req.MemberEpoch = "acl-848", "m-1", 5
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "ConsumerGroupHeartbeat/subscribed topic", denied: kerr.TopicAuthorizationFailed,
			base:  []binding{allowACL(G, "acl-848t", kmsg.ACLOperationRead)},
			grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Group, req.MemberID, req.MemberEpoch = "acl-848t", "m-2", 0
				req.RebalanceTimeoutMillis = 10000
				req.SubscribedTopicNames = []string{topic}
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				if resp.ErrorCode == 0 { // joined: leave again
					leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
					leave.Group, leave.MemberID, leave.MemberEpoch = "acl-848t", *resp.MemberID, -1
					_, _ = leave.RequestWith(ctx, br)
				}
				return resp.ErrorCode
			}},
		{name: "ConsumerGroupDescribe", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrConsumerGroupDescribeRequest()
				req.Groups = []string{group}
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Groups) != 1 {
					return -100
				}
				return resp.Groups[0].ErrorCode
			}},
		{name: "ShareGroupHeartbeat", denied: kerr.GroupAuthorizationFailed, base: []binding{describeTopic}, grant: []binding{allowACL(G, shareGroup, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclShareJoin(ctx, br, shareGroup, topic)
			}},
		{name: "ShareGroupHeartbeat/subscribed topic", denied: kerr.TopicAuthorizationFailed, base: []binding{allowACL(G, shareGroup, kmsg.ACLOperationRead)}, grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclShareJoin(ctx, br, shareGroup, topic)
			}},
		{name: "ShareGroupDescribe", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, shareGroup, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrShareGroupDescribeRequest()
				req.GroupIDs = []string{shareGroup}
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Groups) != 1 {
					return -100
				}
				return resp.Groups[0].ErrorCode
			}},
		{name: "ShareFetch/group", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, shareGroup, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				top, _ := aclShareFetch(ctx, br, shareGroup, topicID)
				return top
			}},
		{name: "ShareFetch/topic", denied: kerr.TopicAuthorizationFailed, base: []binding{allowACL(G, shareGroup, kmsg.ACLOperationRead)}, grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				top, part := aclShareFetch(ctx, br, shareGroup, topicID)
				if top != 0 {
					return top
				}
				return part
			}},
		{name: "DescribeShareGroupOffsets", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, shareGroup, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
				g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
				g.GroupID = shareGroup
				req.Groups = append(req.Groups, g)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Groups) != 1 {
					return -100
				}
				return resp.Groups[0].ErrorCode
			}},
		{name: "AlterShareGroupOffsets/group", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, shareOffsetsGroup, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclAlterShareOffsets(ctx, br, topic)
			}},
		{name: "AlterShareGroupOffsets/topic", denied: kerr.TopicAuthorizationFailed, base: []binding{allowACL(G, shareOffsetsGroup, kmsg.ACLOperationRead)}, grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclAlterShareOffsets(ctx, br, topic)
			}},
		{name: "DeleteShareGroupOffsets/group", denied: kerr.GroupAuthorizationFailed, grant: []binding{allowACL(G, shareOffsetsGroup, kmsg.ACLOperationDelete)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclDeleteShareOffsets(ctx, br, topic)
			}},
		{name: "DeleteShareGroupOffsets/topic", denied: kerr.TopicAuthorizationFailed, base: []binding{allowACL(G, shareOffsetsGroup, kmsg.ACLOperationDelete)}, grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				return aclDeleteShareOffsets(ctx, br, topic)
			}},
		{name: "InitProducerID/txn", denied: kerr.TransactionalIDAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationWrite)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 10000
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "InitProducerID/idempotent", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationIdempotentWrite)},
			call: initIdempotentCall},
		{name: "InitProducerID/idempotent by topic WRITE (KIP-679)", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, "any-topic", kmsg.ACLOperationWrite)},
			call: initIdempotentCall},
		{name: "AddPartitionsToTxn", v3: true, denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationWrite)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAddPartitionsToTxnRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, 999999, 0
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "AddOffsetsToTxn", denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationWrite), allowACL(G, group, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAddOffsetsToTxnRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, 999999, 0, group
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "EndTxn", denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationWrite)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrEndTxnRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, 999999, 0
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "TxnOffsetCommit", denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationWrite), allowACL(G, group, kmsg.ACLOperationRead), allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrTxnOffsetCommitRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, 999999, 0, group
				req.Generation = -1
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DescribeTransactions", denied: kerr.TransactionalIDAuthorizationFailed, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeTransactionsRequest()
				req.TransactionalIDs = []string{txnID}
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.TransactionStates) != 1 {
					return -100
				}
				return resp.TransactionStates[0].ErrorCode
			}},
		{name: "ListTransactions filters", denied: kerr.TransactionalIDAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(X, txnID, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				resp, err := kmsg.NewPtrListTransactionsRequest().RequestWith(ctx, br)
				if err != nil || resp.ErrorCode != 0 {
					return -100
				}
				for _, s := range resp.TransactionStates {
					if s.TransactionalID == txnID {
						return 0
					}
				}
				return kerr.TransactionalIDAuthorizationFailed.Code // not listed
			}},
		{name: "OffsetFetch/every topic filters", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode,
			base:  []binding{allowACL(G, group, kmsg.ACLOperationDescribe)},
			grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrOffsetFetchRequest()
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = group
				req.Groups = append(req.Groups, rg)
				req.Group = group
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				var topics []string
				if len(resp.Groups) == 1 {
					if resp.Groups[0].ErrorCode != 0 {
						return -100
					}
					for _, t := range resp.Groups[0].Topics {
						if t.TopicID == topicID { // v10 answers by topic ID
							t.Topic = topic
						}
						topics = append(topics, t.Topic)
					}
				} else {
					for _, t := range resp.Topics {
						topics = append(topics, t.Topic)
					}
				}
				for _, name := range topics {
					if name == topic {
						return 0
					}
				}
				return kerr.TopicAuthorizationFailed.Code // not listed
			}},
		{name: "DescribeProducers", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, topic, kmsg.ACLOperationRead)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DescribeTopicPartitions", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{describeTopic},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeTopicPartitionsRequest()
				rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
				rt.Topic = topic
				req.Topics = append(req.Topics, rt)
				req.ResponsePartitionLimit = 100
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
		{name: "DescribeAcls", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "CreateAcls", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = T, "acl-other", kmsg.ACLResourcePatternTypeLiteral
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:nobody", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				req.Creations = append(req.Creations, c)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Results) != 1 {
					return -100
				}
				return resp.Results[0].ErrorCode
			}},
		{name: "DeleteAcls", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				f.Principal = kmsg.StringPtr("User:nobody")
				f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				req.Filters = append(req.Filters, f)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Results) != 1 {
					return -100
				}
				return resp.Results[0].ErrorCode
			}},
		{name: "DescribeUserScramCredentials", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				// Named users: Kafka 4.2 throws a NullPointerException on a
				// null list when it refuses the request, and never answers.
				req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
				u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
				u.Name = adminUser
				req.Users = append(req.Users, u)
				resp, err := req.RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				if resp.ErrorCode != 0 && (len(resp.Results) != 1 || resp.Results[0].ErrorCode != resp.ErrorCode) {
					return -102 // Kafka answers each named user with the error too
				}
				return resp.ErrorCode
			}},
		{name: "DescribeClientQuotas", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribeConfigs)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeClientQuotasRequest()
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "AlterClientQuotas", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlterConfigs)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAlterClientQuotasRequest()
				req.ValidateOnly = true
				e := kmsg.NewAlterClientQuotasRequestEntry()
				e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("acl-matrix")}}
				e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}}
				req.Entries = append(req.Entries, e)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Entries) != 1 {
					return -100
				}
				return resp.Entries[0].ErrorCode
			}},
		{name: "AlterUserScramCredentials", denied: kerr.ClusterAuthorizationFailed, skipAllowed: true, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				d.Name, d.Mechanism = adminUser, 2
				req.Deletions = append(req.Deletions, d)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Results) != 1 {
					return -100
				}
				return resp.Results[0].ErrorCode
			}},
		{name: "ElectLeaders", denied: kerr.ClusterAuthorizationFailed, skipAllowed: true, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrElectLeadersRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "AlterPartitionAssignments", denied: kerr.ClusterAuthorizationFailed, skipAllowed: true, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationAlter)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Replicas = []int32{a.node}
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "ListPartitionReassignments", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrListPartitionReassignmentsRequest()
				req.TimeoutMillis = 10000
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "DescribeLogDirs", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				resp, err := kmsg.NewPtrDescribeLogDirsRequest().RequestWith(ctx, br)
				if err != nil {
					return -100
				}
				return resp.ErrorCode
			}},
		{name: "DescribeCluster authorized operations", denied: kerr.ClusterAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(C, cluster, kmsg.ACLOperationDescribe)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDescribeClusterRequest()
				req.IncludeClusterAuthorizedOperations = true
				resp, err := req.RequestWith(ctx, br)
				if err != nil || resp.ErrorCode != 0 {
					return -100
				}
				switch resp.ClusterAuthorizedOperations {
				case 0:
					return kerr.ClusterAuthorizationFailed.Code
				case 1 << int(kmsg.ACLOperationDescribe):
					return 0
				}
				return -101
			}},
		{name: "WriteTxnMarkers", denied: kerr.ClusterAuthorizationFailed, skipAllowed: true,
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = 999999, 0, 0
				rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				m.Topics = append(m.Topics, rt)
				req.Markers = append(req.Markers, m)
				resp, err := req.RequestWith(ctx, br)
				if err != nil || len(resp.Markers) != 1 {
					return -100
				}
				return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
			}},
		{name: "DeleteTopics", denied: kerr.TopicAuthorizationFailed, allowed: zeroCode, grant: []binding{allowACL(T, delTopic, kmsg.ACLOperationDelete)},
			call: func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.TimeoutMillis = 10000
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(delTopic)
				req.Topics = append(req.Topics, rt)
				req.TopicNames = []string{delTopic}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil || len(resp.Topics) != 1 {
					return -100
				}
				return resp.Topics[0].ErrorCode
			}},
	}
	alice := newClient(t, a.addr, kgo.SASL(scram512(aclUser, aclPassword)), kgo.DisableIdempotentWrite(),
		kgo.RequestRetries(0), kgo.RecordRetries(1), kgo.RetryTimeout(5*time.Second))
	if err := alice.Ping(ctx); err != nil {
		t.Fatalf("alice: %v", err)
	}
	br := alice.Broker(int(a.node))
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	alice3 := newClient(t, a.addr, kgo.SASL(scram512(aclUser, aclPassword)), kgo.MaxVersions(v), kgo.RequestRetries(0))
	br3 := alice3.Broker(int(a.node))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.dropACLs(t)
			a.createACLs(t, tc.base...)
			a.waitACLs(t, len(tc.base))
			cctx := testCtx(t, opTimeout)
			cl, br := alice, br
			if tc.v3 {
				cl, br = alice3, br3
			}
			if got := tc.call(cctx, cl, br); got != tc.denied.Code {
				t.Errorf("without the ACL: %s, want %s", codeName(got), tc.denied)
			}
			if tc.skipAllowed {
				return
			}
			a.createACLs(t, tc.grant...)
			a.waitACLs(t, len(tc.base)+len(tc.grant))
			got := tc.call(cctx, cl, br)
			switch {
			case tc.allowed != nil && got != *tc.allowed:
				t.Errorf("with %v: %s, want %s", tc.grant, codeName(got), codeName(*tc.allowed))
			case got == tc.denied.Code || got < 0:
				t.Errorf("with %v: %s, want the check passed", tc.grant, codeName(got))
			}
		})
	}
	a.dropACLs(t)
}

func codeName(c int16) string {
	switch c {
	case -100:
		return "request failed"
	case -101:
		return "wrong authorized operations"
	case -102:
		return "the error not repeated per user"
	}
	if err := kerr.ErrorForCode(c); err != nil {
		return err.Error()
	}
	return "success"
}

// errCode is the Kafka error code of err, 0 for nil, -100 otherwise.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -100
}

func describeConfigsCall(rt kmsg.ConfigResourceType, name string) func(context.Context, *kgo.Client, *kgo.Broker) int16 {
	return func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = rt, name
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, br)
		if err != nil || len(resp.Resources) != 1 {
			return -100
		}
		return resp.Resources[0].ErrorCode
	}
}

func findCoordinatorCall(typ int8, key string) func(context.Context, *kgo.Client, *kgo.Broker) int16 {
	return func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			return -100
		}
		if len(resp.Coordinators) == 1 {
			return resp.Coordinators[0].ErrorCode
		}
		return resp.ErrorCode
	}
}

func offsetCommitCall(group, topic string, topicID [16]byte) func(context.Context, *kgo.Client, *kgo.Broker) int16 {
	return func(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil || len(resp.Topics) != 1 {
			return -100
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
}

func initIdempotentCall(ctx context.Context, cl *kgo.Client, br *kgo.Broker) int16 {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -100
	}
	return resp.ErrorCode
}

// aclShareMember is the share group member ID of the matrix's rows.
const aclShareMember = "acl-share-member-00001"

// aclShareJoin joins the share group (ShareGroupHeartbeat, epoch 0).
func aclShareJoin(ctx context.Context, br *kgo.Broker, group, topic string) int16 {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, aclShareMember, 0, []string{topic}
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -100
	}
	return resp.ErrorCode
}

// aclShareFetch opens a share session on partition 0 of the topic and
// returns the top-level and the partition's error codes.
func aclShareFetch(ctx context.Context, br *kgo.Broker, group string, topicID [16]byte) (int16, int16) {
	req := kmsg.NewPtrShareFetchRequest()
	member := aclShareMember
	req.GroupID, req.MemberID, req.MaxRecords, req.BatchSize, req.MaxBytes = &group, &member, 1, 1, 1<<20
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = topicID
	t.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -100, -100
	}
	part := int16(0)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			part = p.ErrorCode
		}
	}
	return resp.ErrorCode, part
}

// shareOffsetsGroup is the share group whose offsets the ACL rows alter
// and delete (created by the first allowed alter).
const shareOffsetsGroup = "acl-share-offsets"

// aclAlterShareOffsets sets partition 0 of topic to offset 0 in
// shareOffsetsGroup: the top-level code, else the partition's.
func aclAlterShareOffsets(ctx context.Context, br *kgo.Broker, topic string) int16 {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = shareOffsetsGroup
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -100
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// aclDeleteShareOffsets deletes topic's offsets of shareOffsetsGroup: the
// top-level code, else the topic's.
func aclDeleteShareOffsets(ctx context.Context, br *kgo.Broker, topic string) int16 {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = shareOffsetsGroup
	rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return -100
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		return resp.ErrorCode
	}
	return resp.Topics[0].ErrorCode
}
