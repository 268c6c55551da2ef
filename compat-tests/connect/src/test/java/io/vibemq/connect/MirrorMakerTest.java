package io.vibemq.connect;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * MirrorMaker 2 (issue 11 part 4) as most users run it: dedicated mode,
 * {@code org.apache.kafka.connect.mirror.MirrorMaker mm2.properties} in its
 * own JVM, replicating cluster {@code source} to cluster {@code target}
 * (DefaultReplicationPolicy: topic T becomes {@code source.T}). Checked:
 * MM2 creates its internal topics itself (compacted mm2-configs/offsets/status
 * and checkpoints on the target, offset-syncs on the source; heartbeats on
 * the target); the mirrored topic has the source's partitions
 * and configs; records keep partition, order, key, value, headers and
 * CreateTime timestamp; a config changed, a partition added on the source
 * and a topic created after MM2 started are picked up; the consumer group's
 * offsets are checkpointed and synced to the target
 * (sync.group.offsets.enabled), {@link RemoteClusterUtils#translateOffsets}
 * gives the same, and the group fails over to the target and resumes
 * exactly after what it had read on the source (nothing re-read, nothing
 * skipped); heartbeats are emitted.
 *
 * <p>Both clusters are our broker; with {@code -Dbootstrap.override} (Apache
 * Kafka, as .ci/run runs this module a second time) it runs twice: Kafka to
 * ours and ours to Kafka, so the same assertions hold with Kafka on either
 * side (proof the test is right, and migrations both ways work).
 */
@ExtendWith(MirrorMakerTest.LogsOnFailure.class)
class MirrorMakerTest {
    static final String RUN = Long.toString(System.currentTimeMillis() % 100_000_000L, 36);
    static final int PARTITIONS = 3;
    static final int PHASE1 = 100; // records per partition the group reads on the source
    static final int PHASE2 = 40; // records per partition produced after the checkpoint
    static final String RETENTION_MS = "7200000";
    static final String RETENTION_MS_LATER = "10800000";
    static final String MAX_MESSAGE_BYTES = "2000000";
    /**
     * CreateTime of record i is TS0+i ms: distinct from the append time, and
     * recent, since the topic's retention.ms (2 h) deletes older records.
     */
    static final long TS0 = System.currentTimeMillis() - 600_000L;

    static BrokerProcess source;
    static BrokerProcess target;
    static MirrorMakerProcess mm2;

    static final class LogsOnFailure implements TestWatcher {
        @Override
        public void testFailed(ExtensionContext context, Throwable cause) {
            for (BrokerProcess b : new BrokerProcess[] {source, target}) {
                if (b != null) {
                    System.err.println("==== broker log tail (" + b.logFile() + ")\n" + b.logTail());
                }
            }
            if (mm2 != null) {
                System.err.println("==== MirrorMaker 2 log tail (" + mm2.logFile() + ")\n" + mm2.logTail());
            }
            forget();
        }

        @Override
        public void testSuccessful(ExtensionContext context) {
            if (Boolean.getBoolean("connect.keepLogs")) {
                if (mm2 != null) {
                    System.out.println("MirrorMaker 2 log: " + mm2.logFile());
                }
                forget();
                return;
            }
            try {
                for (BrokerProcess b : new BrokerProcess[] {source, target}) {
                    if (b != null) {
                        b.deleteLog();
                    }
                }
                if (mm2 != null) {
                    mm2.deleteFiles();
                }
            } catch (java.io.IOException e) {
                System.err.println("cannot remove the test's files: " + e);
            }
            forget();
        }

        private static void forget() {
            source = null;
            target = null;
            mm2 = null;
        }
    }

    /**
     * Which broker is on each side: ours to ours, or with
     * -Dbootstrap.override (Apache Kafka) Kafka to ours and ours to Kafka.
     */
    static Stream<Arguments> directions() {
        if (BrokerProcess.bootstrapOverride() == null) {
            return Stream.of(Arguments.of("ours", "ours"));
        }
        return Stream.of(Arguments.of("kafka", "ours"), Arguments.of("ours", "kafka"));
    }

    static BrokerProcess cluster(String kind) throws Exception {
        return kind.equals("kafka") ? BrokerProcess.external(BrokerProcess.bootstrapOverride()) : BrokerProcess.start();
    }

    @AfterEach
    void tearDown() throws Exception {
        // The watcher (after this) prints or removes the logs.
        if (mm2 != null) {
            mm2.close();
        }
        if (source != null) {
            source.close();
        }
        if (target != null) {
            target.close();
        }
    }

    @ParameterizedTest(name = "{0} to {1}")
    @MethodSource("directions")
    @Timeout(240)
    void mirrorsTopicsRecordsConfigsAndGroupOffsets(String sourceKind, String targetKind) throws Exception {
        Instant t0 = Instant.now();
        source = cluster(sourceKind);
        target = cluster(targetKind);
        log(t0, "source (" + sourceKind + ") at " + source.bootstrap() + ", target (" + targetKind + ") at "
                + target.bootstrap());
        // Names unique to this run and direction: Apache Kafka is one
        // long-lived broker for both directions.
        String prefix = "mm-" + RUN + "-" + sourceKind.charAt(0) + targetKind.charAt(0) + "-";
        String orders = prefix + "orders";
        String late = prefix + "late";
        String group = prefix + "group";
        String mirroredOrders = "source." + orders;
        String mirroredLate = "source." + late;

        try (Admin src = admin(source); Admin dst = admin(target)) {
            src.createTopics(List.of(new NewTopic(orders, PARTITIONS, (short) 1).configs(Map.of(
                    "retention.ms", RETENTION_MS, "max.message.bytes", MAX_MESSAGE_BYTES)))).all().get();
            produce(source, orders, 0, PHASE1);
            // The group reads everything there is and commits.
            assertEquals(PARTITIONS * PHASE1, consumeAll(source, group, orders, PARTITIONS * PHASE1).size());
            log(t0, "source: " + orders + " with " + PARTITIONS * PHASE1 + " records, group " + group + " committed");

            mm2 = new MirrorMakerProcess(mm2Properties(prefix));
            mm2.start();

            // 1. The topic, its partitions, configs and records.
            await("target topic " + mirroredOrders + " with " + PARTITIONS * PHASE1 + " records", Duration.ofSeconds(90),
                    () -> endOffsetsSum(dst, mirroredOrders, PARTITIONS) == (long) PARTITIONS * PHASE1);
            log(t0, "mirrored " + mirroredOrders);
            TopicDescription td = dst.describeTopics(List.of(mirroredOrders)).allTopicNames().get().get(mirroredOrders);
            assertEquals(PARTITIONS, td.partitions().size(), mirroredOrders + " partitions");
            await(mirroredOrders + " configs retention.ms and max.message.bytes as on the source", Duration.ofSeconds(30),
                    () -> {
                        Config c = topicConfig(dst, mirroredOrders);
                        return RETENTION_MS.equals(c.get("retention.ms").value())
                                && MAX_MESSAGE_BYTES.equals(c.get("max.message.bytes").value());
                    }, () -> topicConfig(dst, mirroredOrders).toString());
            checkRecords(readAll(target, mirroredOrders, PARTITIONS), PARTITIONS, 0, PHASE1);

            // 2. Group offsets: checkpoints, synced offsets, translateOffsets.
            Map<TopicPartition, OffsetAndMetadata> want = new TreeMap<>(java.util.Comparator.comparing(TopicPartition::toString));
            for (int p = 0; p < PARTITIONS; p++) {
                want.put(new TopicPartition(mirroredOrders, p), new OffsetAndMetadata(PHASE1));
            }
            await("group " + group + " offsets synced to the target", Duration.ofSeconds(60),
                    () -> offsetsOnly(dst.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get())
                            .equals(offsetsOnly(want)),
                    () -> dst.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().toString());
            log(t0, "group offsets synced");
            Map<TopicPartition, OffsetAndMetadata> translated = RemoteClusterUtils.translateOffsets(
                    Map.of("bootstrap.servers", target.bootstrap()), "source", group, Duration.ofSeconds(20));
            assertEquals(offsetsOnly(want), offsetsOnly(translated), "RemoteClusterUtils.translateOffsets");
            List<Checkpoint> checkpoints = readAll(target, "source.checkpoints.internal", 1, ByteArrayDeserializer.class)
                    .stream().map(r -> Checkpoint.deserializeRecord(asBytes(r)))
                    .filter(c -> c.consumerGroupId().equals(group)).collect(Collectors.toList());
            assertTrue(checkpoints.stream().anyMatch(c -> c.downstreamOffset() == PHASE1 && c.upstreamOffset() == PHASE1),
                    "a checkpoint of " + group + " at upstream and downstream offset " + PHASE1 + ": " + checkpoints);

            // 3. Failover: more records on the source, mirrored; the group
            // moves to the target and reads exactly those (auto.offset.reset
            // none: a missing committed offset fails instead of hiding).
            produce(source, orders, PHASE1, PHASE2);
            await(mirroredOrders + " with phase 2", Duration.ofSeconds(60),
                    () -> endOffsetsSum(dst, mirroredOrders, PARTITIONS) == (long) PARTITIONS * (PHASE1 + PHASE2));
            List<ConsumerRecord<String, String>> resumed = consumeAll(target, group, mirroredOrders, PARTITIONS * PHASE2);
            checkRecords(resumed, PARTITIONS, PHASE1, PHASE2);
            log(t0, "group failed over to the target and resumed at offset " + PHASE1);

            // 4. A config changed, a partition added on the source, a topic
            // created after MM2 started: the periodic refresh and config
            // sync (IncrementalAlterConfigs on the target, KIP-894).
            ConfigResource ordersRes = new ConfigResource(ConfigResource.Type.TOPIC, orders);
            src.incrementalAlterConfigs(Map.of(ordersRes, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", RETENTION_MS_LATER), AlterConfigOp.OpType.SET)))).all().get();
            src.createPartitions(Map.of(orders, NewPartitions.increaseTo(PARTITIONS + 1))).all().get();
            src.createTopics(List.of(new NewTopic(late, 2, (short) 1))).all().get();
            produce(source, late, 0, 5);
            await("new topic " + mirroredLate + " with 10 records", Duration.ofSeconds(60),
                    () -> endOffsetsSum(dst, mirroredLate, 2) == 10L);
            checkRecords(readAll(target, mirroredLate, 2), 2, 0, 5);
            await(mirroredOrders + " grown to " + (PARTITIONS + 1) + " partitions", Duration.ofSeconds(60),
                    () -> dst.describeTopics(List.of(mirroredOrders)).allTopicNames().get().get(mirroredOrders)
                            .partitions().size() == PARTITIONS + 1);
            await(mirroredOrders + " retention.ms changed to " + RETENTION_MS_LATER, Duration.ofSeconds(30),
                    () -> RETENTION_MS_LATER.equals(topicConfig(dst, mirroredOrders).get("retention.ms").value()));
            log(t0, "refresh picked up " + late + ", the new partition and the new retention.ms");

            // 5. Heartbeats and MM2's internal topics, created by MM2 itself.
            List<Heartbeat> beats = readAll(target, "heartbeats", 1, ByteArrayDeserializer.class).stream()
                    .map(r -> Heartbeat.deserializeRecord(asBytes(r))).collect(Collectors.toList());
            assertTrue(beats.stream().anyMatch(h -> h.sourceClusterAlias().equals("source")
                    && h.targetClusterAlias().equals("target")), "a heartbeat source->target: " + beats);
            checkCompacted(dst, List.of("mm2-configs.source.internal", "mm2-offsets.source.internal",
                    "mm2-status.source.internal", "source.checkpoints.internal"));
            checkCompacted(src, List.of("mm2-offset-syncs.target.internal"));
            assertTrue(dst.listTopics().names().get().contains("heartbeats"), "heartbeats topic on the target");
            mm2.checkAlive();
        }
        log(t0, "done");
    }

    static Map<String, String> mm2Properties(String prefix) {
        Map<String, String> p = new HashMap<>();
        p.put("clusters", "source, target");
        p.put("source.bootstrap.servers", source.bootstrap());
        p.put("target.bootstrap.servers", target.bootstrap());
        p.put("source->target.enabled", "true");
        p.put("target->source.enabled", "false");
        // The prefix is [a-z0-9-]: no regex metacharacters to quote (a
        // .properties file would eat Pattern.quote's backslashes).
        p.put("source->target.topics", prefix + ".*");
        p.put("source->target.groups", prefix + ".*");
        for (String rf : List.of("replication.factor", "offset-syncs.topic.replication.factor",
                "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor",
                "config.storage.replication.factor", "offset.storage.replication.factor",
                "status.storage.replication.factor")) {
            p.put(rf, "1");
        }
        p.put("refresh.topics.interval.seconds", "2");
        p.put("refresh.groups.interval.seconds", "2");
        p.put("sync.topic.configs.interval.seconds", "2");
        p.put("emit.checkpoints.interval.seconds", "1");
        p.put("emit.heartbeats.interval.seconds", "1");
        p.put("sync.group.offsets.enabled", "true");
        p.put("sync.group.offsets.interval.seconds", "1");
        // offset.lag.max stays at its default (100): the latest offset sync
        // of a partition is written at the source task's offset commit,
        // every second here (default 60 s), so a group at the end of what it
        // read translates exactly.
        p.put("target.offset.flush.interval.ms", "1000");
        return p;
    }

    // ---- records

    /** Records i in [from, from+n) of every partition: key k-p-i, value v-p-i, header seq=i, CreateTime TS0+i. */
    static void produce(BrokerProcess b, String topic, int from, int n) throws Exception {
        Properties p = clientProps(b);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        int partitions;
        try (Admin a = admin(b)) {
            partitions = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        }
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = from; i < from + n; i++) {
                for (int part = 0; part < partitions; part++) {
                    List<Header> headers = List.of(new RecordHeader("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                            new RecordHeader("origin", topic.getBytes(StandardCharsets.UTF_8)));
                    prod.send(new ProducerRecord<>(topic, part, TS0 + i, "k-" + part + "-" + i, "v-" + part + "-" + i,
                            headers));
                }
            }
            prod.flush();
        }
    }

    /**
     * Each partition holds exactly records [from, from+n) in order, with their
     * key, value, headers (the producer's, in order; MM2 adds none) and
     * CreateTime.
     */
    static void checkRecords(List<ConsumerRecord<String, String>> recs, int partitions, int from, int n) {
        Map<Integer, List<ConsumerRecord<String, String>>> byPart = recs.stream()
                .collect(Collectors.groupingBy(ConsumerRecord::partition, TreeMap::new, Collectors.toList()));
        for (Map.Entry<Integer, List<ConsumerRecord<String, String>>> e : byPart.entrySet()) {
            int part = e.getKey();
            List<ConsumerRecord<String, String>> rs = e.getValue();
            assertEquals(n, rs.size(), "partition " + part + " record count: " + rs.stream()
                    .map(ConsumerRecord::value).collect(Collectors.toList()));
            for (int j = 0; j < n; j++) {
                ConsumerRecord<String, String> r = rs.get(j);
                int i = from + j;
                String where = r.topic() + "-" + part + "@" + r.offset();
                assertEquals("k-" + part + "-" + i, r.key(), where + " key");
                assertEquals("v-" + part + "-" + i, r.value(), where + " value");
                assertEquals(TimestampType.CREATE_TIME, r.timestampType(), where + " timestamp type");
                assertEquals(TS0 + i, r.timestamp(), where + " timestamp");
                Header[] hs = r.headers().toArray();
                assertEquals(2, hs.length, where + " headers " + List.of(hs));
                assertEquals("seq", hs[0].key());
                assertArrayEquals(Integer.toString(i).getBytes(StandardCharsets.UTF_8), hs[0].value(), where + " header seq");
                assertEquals("origin", hs[1].key());
            }
        }
        assertEquals(partitions, byPart.size(), "partitions with records: " + byPart.keySet());
    }

    /** Subscribes as group, reads exactly want records (then 2 s for extra ones), commits, leaves. */
    static List<ConsumerRecord<String, String>> consumeAll(BrokerProcess b, String group, String topic, int want)
            throws Exception {
        Properties p = clientProps(b);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // On the source the group is new (earliest); on the target it must
        // find the synced offsets: none fails the test if they are missing.
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, b == source ? "earliest" : "none");
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            Instant deadline = Instant.now().plusSeconds(60);
            while (out.size() < want) {
                if (Instant.now().isAfter(deadline)) {
                    fail("group " + group + " read " + out.size() + " of " + want + " records of " + topic);
                }
                c.poll(Duration.ofMillis(500)).forEach(out::add);
            }
            Instant quiet = Instant.now().plusSeconds(2);
            while (Instant.now().isBefore(quiet)) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            c.commitSync();
        }
        return out;
    }

    static List<ConsumerRecord<String, String>> readAll(BrokerProcess b, String topic, int partitions) throws Exception {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        for (ConsumerRecord<?, ?> r : readAll(b, topic, partitions, StringDeserializer.class)) {
            @SuppressWarnings("unchecked")
            ConsumerRecord<String, String> s = (ConsumerRecord<String, String>) r;
            out.add(s);
        }
        return out;
    }

    /** Every record of the topic's partitions 0..partitions-1, up to their end offsets, without a group. */
    static List<ConsumerRecord<?, ?>> readAll(BrokerProcess b, String topic, int partitions, Class<?> deser)
            throws Exception {
        Properties p = clientProps(b);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, deser.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, deser.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<ConsumerRecord<?, ?>> out = new ArrayList<>();
        try (KafkaConsumer<Object, Object> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = IntStream.range(0, partitions).mapToObj(i -> new TopicPartition(topic, i))
                    .collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Instant deadline = Instant.now().plusSeconds(30);
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (Instant.now().isAfter(deadline)) {
                    fail("reading " + topic + " to " + end + ": stuck at " + tps.stream()
                            .collect(Collectors.toMap(tp -> tp, c::position)));
                }
                c.poll(Duration.ofMillis(500)).forEach(out::add);
            }
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static ConsumerRecord<byte[], byte[]> asBytes(ConsumerRecord<?, ?> r) {
        return (ConsumerRecord<byte[], byte[]>) r;
    }

    // ---- admin

    static Properties clientProps(BrokerProcess b) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
        return p;
    }

    static Admin admin(BrokerProcess b) {
        return Admin.create(clientProps(b));
    }

    static long endOffsetsSum(Admin a, String topic, int partitions) throws Exception {
        if (!a.listTopics().names().get().contains(topic)) {
            return -1;
        }
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> req = new HashMap<>();
        for (int i = 0; i < partitions; i++) {
            req.put(new TopicPartition(topic, i), org.apache.kafka.clients.admin.OffsetSpec.latest());
        }
        try {
            return a.listOffsets(req).all().get().values().stream().mapToLong(r -> r.offset()).sum();
        } catch (java.util.concurrent.ExecutionException e) {
            return -1; // the topic is being created
        }
    }

    static Config topicConfig(Admin a, String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        return a.describeConfigs(List.of(r)).all().get().get(r);
    }

    static void checkCompacted(Admin a, List<String> topics) throws Exception {
        Set<String> names = a.listTopics(new org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(true))
                .names().get();
        for (String t : topics) {
            assertTrue(names.contains(t), "MM2's topic " + t + " missing; topics: " + new java.util.TreeSet<>(names));
            Config c = topicConfig(a, t);
            assertNotNull(c.get("cleanup.policy"), t + " cleanup.policy");
            assertEquals("compact", c.get("cleanup.policy").value(), t + " cleanup.policy");
        }
    }

    static Map<TopicPartition, Long> offsetsOnly(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<TopicPartition, Long> out = new TreeMap<>(java.util.Comparator.comparing(TopicPartition::toString));
        m.forEach((tp, om) -> out.put(tp, om == null ? null : om.offset()));
        return out;
    }

    // ---- helpers

    static void await(String what, Duration timeout, Callable<Boolean> cond) throws Exception {
        await(what, timeout, cond, () -> "");
    }

    static void await(String what, Duration timeout, Callable<Boolean> cond, Callable<String> detail) throws Exception {
        Instant deadline = Instant.now().plus(timeout);
        while (!cond.call()) {
            if (mm2 != null) {
                mm2.checkAlive();
            }
            if (Instant.now().isAfter(deadline)) {
                fail("timed out after " + timeout + " waiting for: " + what + "; " + detail.call());
            }
            Thread.sleep(250);
        }
    }

    static void log(Instant t0, String msg) {
        System.out.printf("[mm2-test +%5.1fs] %s%n", Duration.between(t0, Instant.now()).toMillis() / 1000.0, msg);
    }
}
