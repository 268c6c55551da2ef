package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.junit.jupiter.api.Test;

/**
 * Admin methods about replicas, log directories and hanging transactions,
 * answered for what one node truthfully is (they were unsupported before:
 * compat-tests/FINDINGS.md #12): describeLogDirs, describeReplicaLogDirs,
 * electLeaders, list/alterPartitionReassignments, abortTransaction, and the
 * authorized operations Kafka reports when no authorizer is configured.
 */
class SingleNodeAdminTest extends BrokerTestBase {

    @Test
    void describeLogDirsAndReplicaLogDirs() throws Exception {
        String topic = createTopic("logdirs", 2);
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            p.send(new ProducerRecord<>(topic, 1, "k", "v")).get(10, TimeUnit.SECONDS);
        }
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(1)).allDescriptions()
                .get(10, TimeUnit.SECONDS).get(1);
        assertEquals(1, dirs.size(), "one log directory: " + dirs.keySet());
        LogDirDescription dir = dirs.values().iterator().next();
        assertEquals(null, dir.error());
        assertTrue(dir.totalBytes().orElse(0) > 0 && dir.usableBytes().orElse(0) > 0, "total and usable bytes");
        ReplicaInfo p0 = dir.replicaInfos().get(new TopicPartition(topic, 0));
        ReplicaInfo p1 = dir.replicaInfos().get(new TopicPartition(topic, 1));
        assertEquals(0, p0.size(), "partition 0 is empty");
        assertTrue(p1.size() > 0, "partition 1 holds the record");

        TopicPartitionReplica replica = new TopicPartitionReplica(topic, 1, 1);
        ReplicaLogDirInfo info = admin.describeReplicaLogDirs(List.of(replica)).all().get(10, TimeUnit.SECONDS).get(replica);
        assertEquals(dirs.keySet().iterator().next(), info.getCurrentReplicaLogDir());
        assertTrue(info.getCurrentReplicaOffsetLag() == 0);
    }

    @Test
    void electLeadersNeverNeeded() throws Exception {
        String topic = createTopic("elect", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<TopicPartition, Optional<Throwable>> res = admin.electLeaders(ElectionType.PREFERRED, Set.of(tp))
                .partitions().get(10, TimeUnit.SECONDS);
        assertInstanceOf(ElectionNotNeededException.class, res.get(tp).orElseThrow());
        // For every partition: nothing to report, as Kafka.
        assertTrue(admin.electLeaders(ElectionType.PREFERRED, null).partitions().get(10, TimeUnit.SECONDS).isEmpty());
    }

    @Test
    void partitionReassignments() throws Exception {
        String topic = createTopic("reassign", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(1)))))
                .all().get(10, TimeUnit.SECONDS);
        assertTrue(admin.listPartitionReassignments().reassignments().get(10, TimeUnit.SECONDS).isEmpty());
        Throwable e = causeOf(() -> admin.alterPartitionReassignments(
                Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(2))))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidReplicaAssignmentException.class, e);
        e = causeOf(() -> admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(NoReassignmentInProgressException.class, e);
    }

    /** What kafka-transactions abort does: find the hanging transaction's producer, write an ABORT marker. */
    @Test
    void abortHangingTransaction() throws Exception {
        String topic = createTopic("hanging", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        String txId = unique("hanging-tx");
        KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 120_000));
        try {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "open")).get(10, TimeUnit.SECONDS);
            ProducerState st = admin.describeProducers(List.of(tp)).partitionResult(tp).get(10, TimeUnit.SECONDS)
                    .activeProducers().stream().filter(s -> s.currentTransactionStartOffset().isPresent())
                    .findFirst().orElseThrow();
            assertEquals(0L, st.currentTransactionStartOffset().getAsLong());
            long lsoBefore = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()),
                    new org.apache.kafka.clients.admin.ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                    .partitionResult(tp).get(10, TimeUnit.SECONDS).offset();
            assertEquals(0L, lsoBefore, "the open transaction holds the LSO");
            admin.abortTransaction(new AbortTransactionSpec(tp, st.producerId(), (short) st.producerEpoch(),
                    st.coordinatorEpoch().orElse(0))).all().get(10, TimeUnit.SECONDS);
            waitFor(() -> {
                try {
                    return admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()),
                            new org.apache.kafka.clients.admin.ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                            .partitionResult(tp).get(10, TimeUnit.SECONDS).offset() == 2L;
                } catch (Exception ex) {
                    return false;
                }
            }, () -> "LSO past the ABORT marker (2)");
            assertTrue(readAll(topic, 0, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")).isEmpty(),
                    "read_committed sees nothing of the aborted transaction");
        } finally {
            p.close(java.time.Duration.ZERO);
        }
        TransactionDescription d = admin.describeTransactions(List.of(txId)).description(txId).get(10, TimeUnit.SECONDS);
        System.out.printf("coordinator still tracks %s as %s (as in Kafka: the tool is for transactions it lost)%n", txId, d.state());
    }

    /** With no authorizer, Kafka reports every operation of the resource type (AuthHelper.authorizedOperations). */
    @Test
    void authorizedOperationsWithoutAuthorizer() throws Exception {
        String topic = createTopic("authz", 1);
        Set<AclOperation> topicOps = admin.describeTopics(List.of(topic),
                new org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(true))
                .allTopicNames().get(10, TimeUnit.SECONDS).get(topic).authorizedOperations();
        assertEquals(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS), topicOps);
        Set<AclOperation> clusterOps = admin.describeCluster(
                new org.apache.kafka.clients.admin.DescribeClusterOptions().includeAuthorizedOperations(true))
                .authorizedOperations().get(10, TimeUnit.SECONDS);
        assertEquals(Set.of(AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE), clusterOps);
    }
}
