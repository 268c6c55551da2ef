package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Transactional producer, read_committed consumers, and the transaction Admin methods. */
class TransactionsTest extends BrokerTestBase {

    static KafkaProducer<String, String> txProducer(String txId) {
        KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60_000));
        p.initTransactions();
        return p;
    }

    static List<String> values(List<ConsumerRecord<String, String>> rs) {
        return rs.stream().map(ConsumerRecord::value).sorted().collect(Collectors.toList());
    }

    /** A committed transaction over 2 partitions is read whole by read_committed. */
    @Test
    void commitIsVisibleToReadCommitted() throws Exception {
        String topic = createTopic("tx-commit", 2);
        try (KafkaProducer<String, String> p = txProducer(unique("txid"))) {
            p.beginTransaction();
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k" + i, "c" + i));
            }
            p.commitTransaction();
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, 10,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
        assertEquals(10, got.size());
    }

    /**
     * Aborted records exist in the log (read_uncommitted sees them) but a
     * read_committed consumer skips them; the end offset counts the markers.
     */
    @Test
    void abortIsInvisibleToReadCommitted() throws Exception {
        String topic = createTopic("tx-abort", 2);
        try (KafkaProducer<String, String> p = txProducer(unique("txid"))) {
            p.beginTransaction();
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k" + i, "aborted" + i));
            }
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            for (int i = 0; i < 4; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k" + i, "committed" + i));
            }
            p.commitTransaction();
        }
        List<ConsumerRecord<String, String>> committed = readAll(topic, 4,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
        assertEquals(List.of("committed0", "committed1", "committed2", "committed3"), values(committed));
        List<ConsumerRecord<String, String>> all = readAll(topic, 14,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"));
        assertEquals(14, all.size(), "read_uncommitted sees aborted and committed records");
        // 5 aborted + abort marker + 2 committed + commit marker per partition.
        Map<TopicPartition, OffsetSpec> latest = Map.of(new TopicPartition(topic, 0), OffsetSpec.latest(),
                new TopicPartition(topic, 1), OffsetSpec.latest());
        admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS)
                .forEach((tp, info) -> assertEquals(9, info.offset(), "end offset of " + tp));
    }

    /** read_committed stops at an open transaction and sees its records only after the commit. */
    @Test
    void readCommittedWaitsForTheCommit() throws Exception {
        String topic = createTopic("tx-open", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = txProducer(unique("txid"));
             KafkaConsumer<String, String> c = consumer(null, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "open")).get(10, TimeUnit.SECONDS);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            // The open transaction's record is in the log (HWM 1) but the LSO is 0.
            assertEquals(0, c.poll(Duration.ofMillis(1000)).count(), "read_committed returned an uncommitted record");
            assertEquals(0, c.position(tp));
            assertEquals(0, latest(tp, IsolationLevel.READ_COMMITTED), "listOffsets latest read_committed = LSO");
            assertEquals(1, latest(tp, IsolationLevel.READ_UNCOMMITTED), "listOffsets latest read_uncommitted = HWM");
            p.commitTransaction();
            List<ConsumerRecord<String, String>> got = pollUntil(c, 1);
            assertEquals("open", got.get(0).value());
        }
    }

    static long latest(TopicPartition tp, IsolationLevel level) throws Exception {
        return admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(level))
                .partitionResult(tp).get(10, TimeUnit.SECONDS).offset();
    }

    /** Read-process-write: offsets sent in the transaction are committed with it (and not when it aborts). */
    @Test
    void sendOffsetsToTransaction() throws Exception {
        String in = createTopic("tx-in", 1);
        String out = createTopic("tx-out", 1);
        String group = unique("tx-group");
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 6; i++) {
                p.send(new ProducerRecord<>(in, 0, "k" + i, "v" + i));
            }
        }
        TopicPartition inTp = new TopicPartition(in, 0);
        try (KafkaProducer<String, String> p = txProducer(unique("txid"));
             KafkaConsumer<String, String> c = consumer(group, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            c.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> got = pollUntil(c, 6);
            assertEquals(6, got.size());
            // Abort with offset 3: nothing committed.
            p.beginTransaction();
            p.send(new ProducerRecord<>(out, 0, "k", "aborted"));
            p.sendOffsetsToTransaction(Map.of(inTp, new OffsetAndMetadata(3)), c.groupMetadata());
            p.abortTransaction();
            assertFalse(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS)
                    .containsKey(inTp), "an aborted transaction's offsets were committed");
            p.beginTransaction();
            p.send(new ProducerRecord<>(out, 0, "k", "committed"));
            p.sendOffsetsToTransaction(Map.of(inTp, new OffsetAndMetadata(6)), c.groupMetadata());
            p.commitTransaction();
            // Apache Kafka writes the commit markers after EndTxn has
            // answered, so the offsets may still be pending: ask with
            // require_stable (KIP-447), answered UNSTABLE_OFFSET_COMMIT
            // (retried by the admin client) until they are written.
            OffsetAndMetadata committed = admin.listConsumerGroupOffsets(group,
                    new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS).get(inTp);
            assertNotNull(committed, "the committed transaction's offset");
            assertEquals(6, committed.offset());
        }
        assertEquals(List.of("committed"), values(readAll(out, 1,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))));
    }

    /** A second producer with the same transactional.id fences the first. */
    @Test
    void zombieProducerIsFenced() throws Exception {
        String topic = createTopic("tx-zombie", 1);
        String txId = unique("txid");
        try (KafkaProducer<String, String> zombie = txProducer(txId)) {
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, 0, "k", "zombie")).get(10, TimeUnit.SECONDS);
            try (KafkaProducer<String, String> p = txProducer(txId)) {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, "k", "new"));
                p.commitTransaction();
            }
            KafkaException e = assertThrows(KafkaException.class, zombie::commitTransaction);
            assertTrue(e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException,
                    "zombie commit: " + e);
        }
        assertEquals(List.of("new"), values(readAll(topic, 1, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))));
    }

    /**
     * listTransactions, describeTransactions and describeProducers while a
     * transaction is open, and after it commits.
     */
    @Test
    void listDescribeTransactionsAndProducers() throws Exception {
        String topic = createTopic("tx-describe", 2);
        String txId = unique("txid");
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        try (KafkaProducer<String, String> p = txProducer(txId)) {
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "a")).get(10, TimeUnit.SECONDS);
            p.send(new ProducerRecord<>(topic, 1, "k", "b")).get(10, TimeUnit.SECONDS);

            Collection<TransactionListing> listed = admin.listTransactions().all().get(10, TimeUnit.SECONDS);
            TransactionListing mine = listed.stream().filter(l -> l.transactionalId().equals(txId)).findFirst()
                    .orElseThrow(() -> new AssertionError(txId + " not in listTransactions: " + listed));
            assertEquals(TransactionState.ONGOING, mine.state());
            Collection<TransactionListing> ongoing = admin.listTransactions(new ListTransactionsOptions()
                    .filterStates(List.of(TransactionState.ONGOING))).all().get(10, TimeUnit.SECONDS);
            assertTrue(ongoing.stream().anyMatch(l -> l.transactionalId().equals(txId)), "state filter ONGOING");
            Collection<TransactionListing> byOtherPid = admin.listTransactions(new ListTransactionsOptions()
                    .filterProducerIds(Set.of(mine.producerId() + 1_000_000))).all().get(10, TimeUnit.SECONDS);
            assertFalse(byOtherPid.stream().anyMatch(l -> l.transactionalId().equals(txId)), "producer ID filter");

            // ListTransactions v1 (KIP-994): transactions open longer than the duration.
            Collection<TransactionListing> longRunning = admin.listTransactions(new ListTransactionsOptions()
                    .filterOnDuration(3_600_000)).all().get(10, TimeUnit.SECONDS);
            assertFalse(longRunning.stream().anyMatch(l -> l.transactionalId().equals(txId)), "open for an hour? " + longRunning);
            waitFor(() -> {
                try {
                    return admin.listTransactions(new ListTransactionsOptions().filterOnDuration(50)).all()
                            .get(10, TimeUnit.SECONDS).stream().anyMatch(l -> l.transactionalId().equals(txId));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, () -> txId + " not listed with filterOnDuration(50)");

            TransactionDescription d = admin.describeTransactions(List.of(txId)).description(txId).get(10, TimeUnit.SECONDS);
            assertEquals(TransactionState.ONGOING, d.state());
            assertEquals(mine.producerId(), d.producerId());
            assertEquals(60_000, d.transactionTimeoutMs());
            assertTrue(d.transactionStartTimeMs().isPresent());
            assertEquals(Set.of(tp0, tp1), d.topicPartitions());

            Map<TopicPartition, PartitionProducerState> ps = admin.describeProducers(List.of(tp0, tp1)).all().get(10, TimeUnit.SECONDS);
            for (TopicPartition tp : List.of(tp0, tp1)) {
                List<ProducerState> states = ps.get(tp).activeProducers();
                assertEquals(1, states.size(), tp + ": " + states);
                ProducerState s = states.get(0);
                assertEquals(mine.producerId(), s.producerId());
                assertEquals(0, s.lastSequence());
                assertEquals(0L, s.currentTransactionStartOffset().orElse(-1L), tp + " open transaction start");
            }
            p.commitTransaction();
            waitFor(() -> {
                try {
                    return admin.describeTransactions(List.of(txId)).description(txId).get(10, TimeUnit.SECONDS).state()
                            == TransactionState.COMPLETE_COMMIT;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, () -> "describeTransactions state after commit");
            ProducerState after = admin.describeProducers(List.of(tp0)).partitionResult(tp0).get(10, TimeUnit.SECONDS)
                    .activeProducers().get(0);
            assertTrue(after.currentTransactionStartOffset().isEmpty(), "no open transaction after commit: " + after);
        }
        Throwable e = causeOf(() -> admin.describeTransactions(List.of(unique("no-such-txid"))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(TransactionalIdNotFoundException.class, e);
    }

    /** Admin.fenceProducers bumps the epoch: the running producer is fenced, its transaction aborted. */
    @Test
    void fenceProducers() throws Exception {
        String topic = createTopic("tx-fence", 1);
        String txId = unique("txid");
        try (KafkaProducer<String, String> p = txProducer(txId)) {
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "fenced")).get(10, TimeUnit.SECONDS);
            admin.fenceProducers(List.of(txId)).all().get(10, TimeUnit.SECONDS);
            KafkaException e = assertThrows(KafkaException.class, p::commitTransaction);
            assertTrue(e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException,
                    "commit after fenceProducers: " + e);
        }
        try (KafkaProducer<String, String> p = txProducer(txId)) {
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "after"));
            p.commitTransaction();
        }
        Set<String> got = new HashSet<>(values(readAll(topic, 1, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))));
        assertEquals(Set.of("after"), got, "the fenced transaction must be aborted");
    }

    /**
     * Gap: ListTransactions v2 (KIP-1152, a transactional ID regex) is not
     * served; the 4.1+ client's filterOnTransactionalIdPattern fails with
     * UnsupportedVersionException. Skipped on clients without the method.
     * Ours only (Kafka 4.1+ serves v2).
     */
    @Test
    @Tag("ours")
    void listTransactionsByIdPatternIsNotServed() throws Exception {
        java.lang.reflect.Method m;
        try {
            m = ListTransactionsOptions.class.getMethod("filterOnTransactionalIdPattern", String.class);
        } catch (NoSuchMethodException e) {
            org.junit.jupiter.api.Assumptions.abort("ListTransactionsOptions.filterOnTransactionalIdPattern is not in this client");
            return;
        }
        ListTransactionsOptions o = (ListTransactionsOptions) m.invoke(new ListTransactionsOptions(), "tx.*");
        Throwable e = causeOf(() -> admin.listTransactions(o).all().get(10, TimeUnit.SECONDS));
        System.out.printf("GAP listTransactions(filterOnTransactionalIdPattern) -> %s%n", e);
        assertInstanceOf(org.apache.kafka.common.errors.UnsupportedVersionException.class, e);
    }

    /**
     * The broker aborts a transaction open past transaction.timeout.ms and
     * fences its producer; the records stay invisible to read_committed.
     */
    @Test
    void brokerAbortsATimedOutTransaction() throws Exception {
        String topic = createTopic("tx-timeout", 1);
        String txId = unique("txid");
        try (KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 1000))) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "timed-out")).get(10, TimeUnit.SECONDS);
            waitFor(() -> {
                try {
                    TransactionState st = admin.describeTransactions(List.of(txId)).description(txId)
                            .get(10, TimeUnit.SECONDS).state();
                    return st == TransactionState.COMPLETE_ABORT || st == TransactionState.PREPARE_ABORT;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }, () -> "the broker did not abort " + txId + " after its 1 s timeout");
            // The commit fails and the producer must be closed. Which error
            // says so differs (DESIGN.md, Deviations from Apache Kafka): we
            // fence the old epoch (PRODUCER_FENCED); Kafka 4 with
            // transaction.version 2 (KIP-890) takes an EndTxn with the epoch
            // before the abort's bump for a retry and answers
            // INVALID_TXN_STATE, since the transaction completed as an abort.
            KafkaException e = assertThrows(KafkaException.class, p::commitTransaction);
            System.out.printf("commit after the broker's timeout abort -> %s%n", e);
            assertTrue(e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException
                    || e instanceof InvalidTxnStateException, "commit after the broker's abort: " + e);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        waitFor(() -> {
            try {
                return latest(tp, IsolationLevel.READ_COMMITTED) == 2;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }, () -> "LSO past the abort marker");
        try (KafkaConsumer<String, String> c = consumer(null, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<ConsumerRecord<String, String>> got = new java.util.ArrayList<>();
            waitFor(() -> {
                c.poll(Duration.ofMillis(100)).forEach(got::add);
                return c.position(tp) == 2;
            }, () -> "read_committed position to the end");
            assertEquals(List.of(), got, "records of the aborted transaction");
        }
    }

    /**
     * A transaction.timeout.ms above the broker's transaction-max-timeout
     * (15 min) fails initTransactions with INVALID_TRANSACTION_TIMEOUT.
     */
    @Test
    void transactionTimeoutAboveTheMaximum() {
        try (KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, unique("txid"),
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 20 * 60 * 1000))) {
            KafkaException e = assertThrows(KafkaException.class, p::initTransactions);
            // INVALID_TRANSACTION_TIMEOUT (50): the Java client reports it, as with Kafka, as a plain
            // KafkaException "Unexpected error in InitProducerIdResponse; " + the error's message.
            assertTrue(e.getMessage().contains("transaction timeout is larger than the maximum value allowed by the broker"),
                    "initTransactions: " + e);
        }
    }
}
