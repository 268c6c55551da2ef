package io.vibemq.compat;

import static io.vibemq.compat.BrokerTestBase.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;

import io.vibemq.harness.BrokerCluster;
import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * The Java client against a three-broker cluster (issue 13): three
 * {@code broker serve} processes (node IDs 1-3, one {@code cluster-peers}),
 * a 3-partition topic of replication factor 3 and a replicated
 * {@code __consumer_offsets} ({@code --offsets-topic-replication-factor 3}),
 * the broker leading partition 0, which also coordinates the consumer
 * group, killed with SIGKILL under an idempotent acks=all KafkaProducer,
 * the group reading everything back across both failovers (the partition
 * leader's and the coordinator's), and the killed broker restarted on its
 * data catching up.
 * Tagged {@code ours}: it starts its own brokers, so the Apache Kafka
 * reference run ({@code -DexcludedGroups=ours}) leaves it out; it also
 * skips itself with {@code -Dbootstrap.override}.
 */
@Tag("ours")
class ClusterTest {
    static final String TOPIC = "cluster-rf3";
    /** Records acknowledged on partition 0 before the kill, and after it. */
    static final int BEFORE_KILL = 300;
    static final int AFTER_KILL = 300;

    static BrokerCluster cluster;
    static Admin admin;
    static Instant started;

    @RegisterExtension
    static final TestWatcher LOGS_ON_FAILURE = BrokerCluster.logsOnFailure(() -> cluster);

    @BeforeAll
    static void startCluster() throws Exception {
        Assumptions.assumeTrue(BrokerProcess.bootstrapOverride() == null,
                "ClusterTest starts a cluster of its own brokers; skipped with -Dbootstrap.override");
        started = Instant.now();
        cluster = BrokerCluster.start(3, BrokerTestBase.DEADLINE, Duration.ofMillis(100),
                "--group-initial-rebalance-delay", "0s", "--offsets-topic-replication-factor", "3");
        admin = BrokerTestBase.admin(cluster.bootstrap());
        cluster.awaitFormed(admin);
        log("three brokers formed a cluster");
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
        if (cluster != null) {
            BrokerCluster c = cluster;
            cluster = null;
            c.stop(false);
        }
    }

    /** Prints a line prefixed with the milliseconds since the cluster started. */
    static void log(String format, Object... args) {
        System.out.printf("ClusterTest [%d ms]: %s%n", Duration.between(started, Instant.now()).toMillis(), String.format(format, args));
    }

    static String bootstrap() {
        return cluster.bootstrap();
    }

    /** One acknowledged record: its sequence number (the value is "r" + seq) and offset. */
    record Acked(int partition, long seq, long offset) {
    }

    @Test
    void rf3TopicKeepsServingAcrossLeaderKill() throws Exception {
        admin.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 3))).all().get(30, TimeUnit.SECONDS);
        Map<Integer, Integer> leaders = cluster.awaitSpread(admin, List.of(TOPIC)).get(TOPIC);
        int victim = leaders.get(0);
        log("topic %s: leaders %s, every partition with 3 replicas in sync", TOPIC, leaders);
        String group = groupCoordinatedBy(victim);

        List<Acked> acked = produceAcrossKill(victim);
        Map<Integer, List<Acked>> byPartition = checkAckOrder(acked);

        consumeInGroupWhileDown(group, byPartition);

        Instant restarted = Instant.now();
        cluster.restart(victim);
        awaitInSync(victim);
        long inSync = Duration.between(restarted, Instant.now()).toMillis();
        // Its preferred replica, in sync again, leads partition 0 again:
        // read it there, alone, and find every acknowledged record.
        waitFor(() -> {
            try {
                return awaitInSync(victim).get(0) == victim;
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }, () -> "broker " + victim + " leading partition 0 again (its preferred replica)");
        log("broker %d restarted on its data: back in every partition's ISR %d ms after its restart, "
                + "leading partition 0 again after %d ms", victim, inSync, Duration.between(restarted, Instant.now()).toMillis());
        readPartitionZeroFrom(cluster.broker(victim), byPartition.get(0));
    }

    /** Reads partition 0 from its start through broker b (its leader) and compares it with acked. */
    static void readPartitionZeroFrom(BrokerProcess b, List<Acked> acked) throws InterruptedException {
        TopicPartition tp = new TopicPartition(TOPIC, 0);
        Map<Integer, Map<Long, String>> read = new HashMap<>();
        Properties p = BrokerTestBase.consumerProps(b.bootstrap(), null);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            pollInto(c, read, acked.size(), null);
            assertEquals(acked.size(), c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp),
                    "partition 0's end offset on the restarted broker");
        }
        for (Acked a : acked) {
            assertEquals("r" + a.seq(), read.get(0).get(a.offset()), "partition 0 offset " + a.offset() + " read from the restarted broker");
        }
    }

    /**
     * Waits until every partition of TOPIC has a leader, three replicas and
     * three in sync (with the broker back among them, when back is not
     * null), and returns each partition's leader.
     */
    static Map<Integer, Integer> awaitInSync(Integer back) throws InterruptedException {
        return cluster.awaitInSync(admin, List.of(TOPIC), back).get(TOPIC);
    }

    /**
     * A new group ID coordinated (describeConsumerGroups) by broker victim,
     * so that killing it moves the coordinator too: its partition of the
     * replicated __consumer_offsets gets a new leader, which loads the
     * group's offsets from the partition's log. Describing a group that
     * does not exist fails (GroupIdNotFoundException), so each candidate is
     * created by committing offset 0 of every partition (where its
     * consumers would start anyway).
     */
    static String groupCoordinatedBy(int victim) throws Exception {
        List<Integer> seen = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> zero = new HashMap<>();
        for (int p = 0; p < 3; p++) {
            zero.put(new TopicPartition(TOPIC, p), new OffsetAndMetadata(0));
        }
        for (int i = 0; i < 30; i++) {
            String group = BrokerTestBase.unique("cluster-group");
            admin.alterConsumerGroupOffsets(group, zero).all().get(30, TimeUnit.SECONDS);
            int c = BrokerCluster.coordinatorOf(admin, group);
            if (c == victim) {
                return group;
            }
            seen.add(c);
        }
        return fail("30 group IDs none coordinated by broker " + victim + ": " + seen);
    }

    /**
     * An idempotent acks=all producer sends numbered records to the three
     * partitions in turn (at most 200 unacknowledged); once BEFORE_KILL are
     * acknowledged on partition 0 its leader is killed with SIGKILL, and
     * production goes on until AFTER_KILL more are acknowledged there.
     * Every send must succeed. Prints the time from the kill to the first
     * acknowledgement on partition 0 of a record sent after it (so not
     * answered by the killed broker). Returns the acknowledgements in the
     * order they arrived.
     */
    static List<Acked> produceAcrossKill(int victim) throws Exception {
        int controller = admin.describeCluster().controller().get(30, TimeUnit.SECONDS).id();
        ConcurrentLinkedQueue<Acked> acked = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Exception> errors = new ConcurrentLinkedQueue<>();
        int[] onZero = new int[1]; // written by the producer's I/O thread only
        long[] firstSentAfterKill = {Long.MAX_VALUE};
        long[] failoverAck = {0};
        Semaphore window = new Semaphore(200);
        Properties props = BrokerTestBase.producerProps(bootstrap());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        long killedAt;
        int killedAfter;
        String newLeader;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            Sender sender = new Sender(producer, window, acked, errors, onZero, firstSentAfterKill, failoverAck);
            sender.start();
            try {
                awaitCount(onZero, BEFORE_KILL, errors, "acknowledged on partition 0 before the kill");
                killedAt = System.nanoTime();
                cluster.kill(victim);
                sender.killed = true;
                killedAfter = count(onZero);
                newLeader = awaitNewLeader(victim, killedAt);
                awaitCount(onZero, killedAfter + AFTER_KILL, errors, "acknowledged on partition 0 after the kill of broker " + victim);
            } finally {
                sender.done = true;
                sender.join(30_000);
            }
            assertTrue(!sender.isAlive(), "the sending thread did not stop within 30 s");
            producer.flush();
        }
        assertTrue(errors.isEmpty(), errors.size() + " sends failed, first: " + errors.peek());
        log("killed broker %d (leader of partition 0%s) after %d acknowledgements there; %s; "
                + "the first acknowledgement on partition 0 of a record sent after the kill came %d ms after it; "
                + "%d records acknowledged in all",
                victim, victim == controller ? " and controller" : "", killedAfter, newLeader,
                TimeUnit.NANOSECONDS.toMillis(failoverAck[0] - killedAt), acked.size());
        return new ArrayList<>(acked);
    }

    /** Waits until describeTopics names another leader of partition 0 than victim; says who and when. */
    static String awaitNewLeader(int victim, long killedAt) throws InterruptedException {
        int[] leader = {-1};
        waitFor(() -> {
            try {
                leader[0] = BrokerCluster.leaderOf(admin, TOPIC, 0);
            } catch (Exception e) {
                leader[0] = -1;
            }
            return leader[0] > 0 && leader[0] != victim;
        }, () -> "a new leader of partition 0 in describeTopics after the kill of broker " + victim + " (last: " + leader[0] + ")");
        return "describeTopics named broker " + leader[0] + " its leader "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt) + " ms after the kill";
    }

    static int count(int[] n) {
        synchronized (n) {
            return n[0];
        }
    }

    static void awaitCount(int[] n, int want, ConcurrentLinkedQueue<Exception> errors, String what) throws InterruptedException {
        waitFor(() -> count(n) >= want || !errors.isEmpty(),
                () -> count(n) + " of " + want + " records " + what + "; send errors: " + errors.size());
        assertTrue(errors.isEmpty(), errors.size() + " sends failed, first: " + errors.peek());
    }

    /** The sending thread of produceAcrossKill. */
    static final class Sender extends Thread {
        final KafkaProducer<String, String> producer;
        final Semaphore window;
        final ConcurrentLinkedQueue<Acked> acked;
        final ConcurrentLinkedQueue<Exception> errors;
        final int[] onZero;
        final long[] firstSentAfterKill;
        final long[] failoverAck;
        volatile boolean killed;
        volatile boolean done;

        Sender(KafkaProducer<String, String> producer, Semaphore window, ConcurrentLinkedQueue<Acked> acked,
                ConcurrentLinkedQueue<Exception> errors, int[] onZero, long[] firstSentAfterKill, long[] failoverAck) {
            super("cluster-test-sender");
            this.producer = producer;
            this.window = window;
            this.acked = acked;
            this.errors = errors;
            this.onZero = onZero;
            this.firstSentAfterKill = firstSentAfterKill;
            this.failoverAck = failoverAck;
        }

        @Override
        public void run() {
            try {
                for (long seq = 0; !done; seq++) {
                    while (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                        if (done) {
                            return;
                        }
                    }
                    int partition = (int) (seq % 3);
                    if (killed && partition == 0) {
                        synchronized (firstSentAfterKill) {
                            firstSentAfterKill[0] = Math.min(firstSentAfterKill[0], seq);
                        }
                    }
                    long s = seq;
                    producer.send(new ProducerRecord<>(TOPIC, partition, null, "r" + seq), (md, e) -> {
                        window.release();
                        if (e != null) {
                            errors.add(e);
                            return;
                        }
                        acked.add(new Acked(partition, s, md.offset()));
                        if (partition == 0) {
                            synchronized (onZero) {
                                onZero[0]++;
                            }
                            synchronized (firstSentAfterKill) {
                                if (s >= firstSentAfterKill[0] && failoverAck[0] == 0) {
                                    failoverAck[0] = System.nanoTime();
                                }
                            }
                        }
                    });
                }
            } catch (Exception e) {
                errors.add(e);
            }
        }
    }

    /**
     * Each partition's acknowledgements arrived in sending order with
     * increasing offsets (idempotence keeps the order across retries).
     */
    static Map<Integer, List<Acked>> checkAckOrder(List<Acked> acked) {
        Map<Integer, List<Acked>> byPartition = new HashMap<>();
        for (Acked a : acked) {
            List<Acked> l = byPartition.computeIfAbsent(a.partition(), k -> new ArrayList<>());
            if (!l.isEmpty()) {
                Acked prev = l.get(l.size() - 1);
                assertTrue(a.seq() > prev.seq() && a.offset() > prev.offset(),
                        "partition " + a.partition() + ": acknowledged " + prev + " then " + a);
            }
            l.add(a);
        }
        return byPartition;
    }

    /**
     * With the killed broker still down: a consumer in group (coordinated
     * by the killed broker until the kill, by the new leader of its offsets
     * partition since) reads about half the records, commits and is
     * closed; a second consumer in the group resumes at exactly the
     * committed offsets and reads the rest. Together they read every
     * acknowledged record once, at its offset, in order per partition; the
     * group's committed offsets end at the partitions' ends.
     */
    static void consumeInGroupWhileDown(String group, Map<Integer, List<Acked>> acked) throws Exception {
        int total = acked.values().stream().mapToInt(List::size).sum();
        Map<Integer, Map<Long, String>> read = new HashMap<>();
        Map<TopicPartition, OffsetAndMetadata> committed;
        try (KafkaConsumer<String, String> c = groupConsumer(group)) {
            c.subscribe(List.of(TOPIC));
            pollInto(c, read, p -> p.getOrDefault(0, Map.of()).size() >= acked.get(0).size() / 2
                    && p.getOrDefault(1, Map.of()).size() >= acked.get(1).size() / 2
                    && p.getOrDefault(2, Map.of()).size() >= acked.get(2).size() / 2, null);
            c.commitSync(Duration.ofSeconds(30));
            committed = c.committed(c.assignment(), Duration.ofSeconds(30));
        }
        int first = read.values().stream().mapToInt(Map::size).sum();
        Map<Integer, Long> resumeAt = new HashMap<>();
        for (int p = 0; p < 3; p++) {
            OffsetAndMetadata om = committed.get(new TopicPartition(TOPIC, p));
            resumeAt.put(p, om == null ? 0L : om.offset());
            long readUpTo = read.getOrDefault(p, Map.of()).size();
            assertEquals(readUpTo, resumeAt.get(p), "partition " + p + ": committed offset after reading " + readUpTo + " records");
        }
        assertTrue(resumeAt.entrySet().stream().anyMatch(e -> e.getValue() > 0 && e.getValue() < acked.get(e.getKey()).size()),
                "the first consumer stopped inside some partition (it polls 100 records at a time and stops past half of each): " + resumeAt);
        try (KafkaConsumer<String, String> c = groupConsumer(group)) {
            c.subscribe(List.of(TOPIC));
            pollInto(c, read, total, resumeAt);
            c.commitSync(Duration.ofSeconds(30));
        }
        for (var e : acked.entrySet()) {
            for (Acked a : e.getValue()) {
                String got = read.getOrDefault(e.getKey(), Map.of()).get(a.offset());
                assertEquals("r" + a.seq(), got, "partition " + e.getKey() + " offset " + a.offset() + ": acknowledged record");
            }
        }
        Map<TopicPartition, OffsetAndMetadata> end = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        for (int p = 0; p < 3; p++) {
            OffsetAndMetadata om = end.get(new TopicPartition(TOPIC, p));
            assertEquals((long) acked.get(p).size(), om == null ? -1 : om.offset(), "partition " + p + ": the group's final committed offset");
        }
        log("group %s: %d records read and committed by the first consumer, %d by the second, resumed at %s",
                group, first, total - first, resumeAt);
    }

    static KafkaConsumer<String, String> groupConsumer(String group) {
        Properties p = BrokerTestBase.consumerProps(bootstrap(), group);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /**
     * Polls c until read holds want records in all. Each record must be new
     * (no value twice) and follow the previous one of its partition
     * (offsets in order, no gap); with resumeAt, the first record of a
     * partition must be at its resume offset.
     */
    static void pollInto(KafkaConsumer<String, String> c, Map<Integer, Map<Long, String>> read, int want,
            Map<Integer, Long> resumeAt) {
        pollInto(c, read, r -> r.values().stream().mapToInt(Map::size).sum() >= want, resumeAt);
    }

    /** pollInto until enough(read) holds. */
    static void pollInto(KafkaConsumer<String, String> c, Map<Integer, Map<Long, String>> read,
            Predicate<Map<Integer, Map<Long, String>>> enough, Map<Integer, Long> resumeAt) {
        Map<Integer, Long> next = new HashMap<>();
        Set<String> values = new HashSet<>();
        read.values().forEach(m -> values.addAll(m.values()));
        int n = read.values().stream().mapToInt(Map::size).sum();
        // Not waitFor: poll itself waits, and waitFor's pause between checks
        // would add 100 ms per 100 records.
        Instant deadline = Instant.now().plus(BrokerTestBase.DEADLINE);
        while (!enough.test(read)) {
            if (Instant.now().isAfter(deadline)) {
                fail("not within " + BrokerTestBase.DEADLINE + ": " + n + " records read (per partition: "
                        + read.entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().size()))
                        + "), not yet enough");
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                long expect = next.containsKey(r.partition()) ? next.get(r.partition())
                        : resumeAt != null ? resumeAt.get(r.partition()) : 0L;
                assertEquals(expect, r.offset(), "partition " + r.partition() + ": offset of the next record read");
                assertTrue(values.add(r.value()), "partition " + r.partition() + ": " + r.value() + " read twice");
                read.computeIfAbsent(r.partition(), k -> new HashMap<>()).put(r.offset(), r.value());
                next.put(r.partition(), r.offset() + 1);
                n++;
            }
        }
    }
}
