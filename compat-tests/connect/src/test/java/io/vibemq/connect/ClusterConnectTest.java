package io.vibemq.connect;

import static io.vibemq.connect.ConnectClusterTest.await;
import static io.vibemq.connect.ConnectClusterTest.awaitStatus;
import static io.vibemq.connect.ConnectClusterTest.createConnector;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import io.vibemq.harness.BrokerCluster;
import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestWatcher;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Kafka Connect on a three-broker cluster (issue 13): three {@code broker
 * serve} processes ({@code --offsets-topic-replication-factor 3}: the
 * Connect group's coordinator fails over), one distributed worker
 * (ConnectDistributed JVM, at-least-once) with the three brokers as
 * bootstrap, whose config, offset and status topics Connect creates with
 * its default replication factor 3 (checked: 3 replicas, compacted). A
 * sequence source (3 tasks, 3 source partitions) writes into an RF 3 topic
 * Connect creates, a file sink reads it. The broker leading the config
 * topic's partition is killed with SIGKILL (the group ID is chosen so that
 * it also coordinates the worker's group, when the placement is as
 * predicted; logged). While it is down the source is reconfigured (more
 * numbers) and a second sink created through the REST API: both are
 * applied (the new numbers and the new sink's file appear) and every
 * connector and task is RUNNING. The broker restarted is back in every
 * ISR; every number is in the topic and both sink files (at-least-once:
 * none missing). Then the worker is killed and restarted: it reads the
 * three connectors and the changed config back from the config topic and
 * its source tasks resume at the offsets committed in the offsets topic
 * (a further reconfiguration writes only numbers after them, none from 0).
 * Tagged {@code ours}: it starts its own brokers, so the Apache Kafka
 * reference run ({@code -DexcludedGroups=ours}) leaves it out; it also
 * skips itself with {@code -Dbootstrap.override}.
 */
@Tag("ours")
class ClusterConnectTest {
    static final String RUN = Long.toString(System.currentTimeMillis() % 100_000_000L, 36);
    static final String TOPIC = "seq-rf3-" + RUN;
    static final String CONFIGS = "connect-configs-" + RUN;
    static final String OFFSETS = "connect-offsets-" + RUN;
    static final String STATUS = "connect-status-" + RUN;
    static final int SOURCE_PARTITIONS = 3;
    /** The source's records per source partition: at first, after the change made during the outage, after the worker's restart. */
    static final long FIRST = 600;
    static final long SECOND = 1500;
    static final long THIRD = 1800;
    /** Connect's defaults for the internal topics, and the source topic's (topic.creation). */
    static final Map<String, Integer> PARTITIONS = Map.of(CONFIGS, 1, OFFSETS, 25, STATUS, 5, TOPIC, 3);
    static final Pattern RESUMES = Pattern.compile("SeqSourceTask (seq-\\d+) resumes at (\\d+)");

    static BrokerCluster cluster;
    static Admin admin;
    static ConnectWorker worker;
    static Path sinkFile;
    static Path lateSinkFile;
    static volatile boolean failed;
    static Instant t0;

    @RegisterExtension
    static final TestWatcher LOGS_ON_FAILURE = new TestWatcher() {
        @Override
        public void testFailed(ExtensionContext ctx, Throwable cause) {
            failed = true;
            if (cluster != null) {
                cluster.failed(ctx.getDisplayName() + " failed");
            }
            if (worker != null) {
                System.err.println("==== worker log tail (" + worker.logFile() + ")\n" + worker.logTail());
            }
        }
    };

    @BeforeAll
    static void startCluster() throws Exception {
        Assumptions.assumeTrue(BrokerProcess.bootstrapOverride() == null,
                "ClusterConnectTest starts a cluster of its own brokers; skipped with -Dbootstrap.override");
        failed = false;
        t0 = Instant.now();
        cluster = BrokerCluster.start(3, Duration.ofSeconds(60), Duration.ofMillis(250),
                "--group-initial-rebalance-delay", "0s", "--offsets-topic-replication-factor", "3");
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        admin = Admin.create(p);
        cluster.awaitFormed(admin);
        log("three brokers formed a cluster");
    }

    @AfterAll
    static void stopAll() throws Exception {
        if (worker != null) {
            worker.close();
            if (!failed && !Boolean.getBoolean("connect.keepLogs")) {
                worker.deleteFiles();
            } else {
                System.err.println("worker log kept: " + worker.logFile());
            }
            worker = null;
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
        for (Path f : new Path[] {sinkFile, lateSinkFile}) {
            if (f != null && !failed) {
                Files.deleteIfExists(f);
            }
        }
        if (cluster != null) {
            BrokerCluster c = cluster;
            cluster = null;
            c.stop(failed || Boolean.getBoolean("connect.keepLogs"));
        }
    }

    @Test
    @Timeout(300)
    void connectKeepsGoingAcrossConfigTopicLeaderKill() throws Exception {
        String group = groupCoordinatedBy(predictedConfigLeader());
        sinkFile = Files.createTempFile("connect-rf3-sink-", ".txt");
        lateSinkFile = Files.createTempFile("connect-rf3-late-sink-", ".txt");
        worker = new ConnectWorker("rf3", BrokerProcess.freePort(), workerProps(group));
        worker.start();
        worker.awaitReady(Duration.ofSeconds(90));
        log("worker ready (group " + group + ")");

        createConnector(worker, "seq-source", sourceConfig(FIRST));
        createConnector(worker, "file-sink", sinkConfig(sinkFile));
        awaitStatus(worker, "seq-source", SOURCE_PARTITIONS, null, Duration.ofSeconds(60));
        awaitStatus(worker, "file-sink", 1, null, Duration.ofSeconds(60));
        await("the sink has records of every source partition", Duration.ofSeconds(60),
                () -> minCount(numbers(sinkFile)) >= 50, () -> summary(sinkFile));
        Map<String, Map<Integer, Integer>> leaders = awaitInSync(null);
        checkInternalTopics();
        log("data flows: " + summary(sinkFile) + "; leaders " + leaders + "; internal topics RF 3, compacted");

        int victim = configLeader();
        int coordinator = admin.describeClassicGroups(List.of(group)).describedGroups().get(group).get()
                .coordinator().id();
        log("killing broker " + victim + ", leader of " + CONFIGS + "-0 and of " + TOPIC + " partitions "
                + ledBy(leaders.get(TOPIC), victim) + "; the group " + group + " is coordinated by broker " + coordinator
                + (coordinator == victim ? "" : ": its coordinator's failover is not covered in this run"));
        cluster.kill(victim);

        // While it is down: a reconfiguration and a new connector, both
        // written to the config topic, whose leader was the victim.
        putConfig("seq-source", sourceConfig(SECOND));
        createConnector(worker, "file-sink-late", sinkConfig(lateSinkFile));
        log("seq-source reconfigured to " + SECOND + " numbers and file-sink-late created with broker " + victim + " down");
        await("the sink has every source partition's last number of the new config, broker " + victim + " down",
                Duration.ofSeconds(90), () -> hasAll(numbers(sinkFile), SECOND), () -> summary(sinkFile));
        await("the late sink has records, broker " + victim + " down", Duration.ofSeconds(60),
                () -> minCount(numbers(lateSinkFile)) >= 50, () -> summary(lateSinkFile));
        awaitAllRunning();
        log("applied while down: " + summary(sinkFile) + "; late sink " + summary(lateSinkFile) + "; all RUNNING");

        cluster.restart(victim);
        awaitInSync(victim);
        log("broker " + victim + " restarted, back in every ISR");
        await("the late sink has every number", Duration.ofSeconds(60), () -> hasAll(numbers(lateSinkFile), SECOND),
                () -> summary(lateSinkFile));
        checkNoneMissing(numbers(sinkFile), SECOND, "sink file");
        checkNoneMissing(numbers(lateSinkFile), SECOND, "late sink file");
        Map<TopicPartition, Long> end = endOffsets();
        checkNoneMissing(readTopic(Map.of()), SECOND, TOPIC);
        awaitAllRunning();
        log("every number in " + TOPIC + " and both sink files; all RUNNING");

        restartWorker(end);
    }

    /**
     * Kills the worker once the offsets topic holds the source's last
     * offsets, restarts it and checks that it reads its connectors, the
     * changed config and the source offsets back: the source, extended
     * once more, writes only the numbers after them.
     */
    void restartWorker(Map<TopicPartition, Long> before) throws Exception {
        await("the offsets topic holds {\"seq\":" + SECOND + "} for every source partition", Duration.ofSeconds(30),
                () -> committedSourceOffsets().values().stream().filter(v -> v == SECOND).count() == SOURCE_PARTITIONS,
                () -> "committed: " + committedSourceOffsets());
        long logAt = Files.size(worker.logFile());
        worker.kill();
        worker.start();
        worker.awaitReady(Duration.ofSeconds(90));
        log("worker killed and restarted");
        HttpResponse<String> r = worker.get("/connectors");
        assertEquals(200, r.statusCode(), r.body());
        Set<String> names = new TreeSet<>();
        ConnectClusterTest.JSON.readTree(r.body()).forEach(n -> names.add(n.asText()));
        assertEquals(Set.of("file-sink", "file-sink-late", "seq-source"), names, "connectors read back");
        awaitAllRunning();
        r = worker.get("/connectors/seq-source/config");
        assertEquals(Long.toString(SECOND), ConnectClusterTest.JSON.readTree(r.body()).get("records").asText(),
                "seq-source's records, as changed while the broker was down");
        Map<String, Long> resumed = new TreeMap<>();
        await("every source task logged where it resumes", Duration.ofSeconds(30), () -> {
            resumed.clear();
            Matcher m = RESUMES.matcher(worker.log().substring((int) logAt));
            while (m.find()) {
                resumed.put(m.group(1), Long.parseLong(m.group(2)));
            }
            return resumed.size() == SOURCE_PARTITIONS;
        });
        for (Map.Entry<String, Long> e : resumed.entrySet()) {
            assertEquals(SECOND, e.getValue(), e.getKey() + " resumed at " + e.getValue() + " after the worker's restart");
        }
        putConfig("seq-source", sourceConfig(THIRD));
        await("the sink has the last number of the third config", Duration.ofSeconds(60),
                () -> hasAll(numbers(sinkFile), THIRD), () -> summary(sinkFile));
        Map<String, Set<Long>> after = readTopic(before);
        checkNoneMissing(after, THIRD, TOPIC + " after the restart", SECOND);
        log("the restarted worker resumed at " + resumed + " and wrote numbers " + SECOND + ".." + (THIRD - 1) + " only");
    }

    // ---- worker and connectors

    static Map<String, String> workerProps(String group) {
        Map<String, String> p = new HashMap<>();
        p.put("bootstrap.servers", bootstrap());
        p.put("group.id", group);
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", CONFIGS);
        p.put("offset.storage.topic", OFFSETS);
        p.put("status.storage.topic", STATUS);
        // No *.storage.replication.factor: Connect's default, 3, as in
        // production; partitions are Connect's defaults too.
        p.put("plugin.discovery", "service_load");
        // The worker's shared Admin (built from these properties) caches
        // partition leaders for listOffsets, which Connect's readToEnd of
        // every internal topic uses, and keeps routing a partition to its
        // cached leader, dead or not, until the call times out
        // (default.api.timeout.ms, 60 s; KAFKA-20673, merged upstream after
        // kafka-clients 4.2.1, and KAFKA-20628). Each first read of a
        // partition the killed broker led stalls that long: the call never
        // reaches a live broker, so no broker's answer can correct it.
        // 10 s keeps the test short, Connect retries the read (the Admin
        // wants request.timeout.ms, default 30 s, no larger).
        p.put("default.api.timeout.ms", "10000");
        p.put("request.timeout.ms", "10000");
        p.put("offset.flush.interval.ms", "500");
        p.put("scheduled.rebalance.max.delay.ms", "3000");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("task.shutdown.graceful.timeout.ms", "3000");
        // The sinks' consumers must not auto-create the source's topic
        // (with RF 1) before the source task creates it.
        p.put("consumer.allow.auto.create.topics", "false");
        p.put("consumer.session.timeout.ms", "6000");
        p.put("consumer.heartbeat.interval.ms", "1000");
        return p;
    }

    static Map<String, String> sourceConfig(long records) {
        return Map.ofEntries(
                Map.entry("connector.class", SeqSourceConnector.class.getName()),
                Map.entry("tasks.max", Integer.toString(SOURCE_PARTITIONS)),
                Map.entry("topic", TOPIC),
                Map.entry("partitions", Integer.toString(SOURCE_PARTITIONS)),
                Map.entry("records", Long.toString(records)),
                Map.entry("batch", "10"),
                Map.entry("poll.ms", "50"),
                Map.entry("topic.creation.default.replication.factor", "3"),
                Map.entry("topic.creation.default.partitions", Integer.toString(PARTITIONS.get(TOPIC))));
    }

    static Map<String, String> sinkConfig(Path file) {
        return Map.of("connector.class", FileSinkConnector.class.getName(), "tasks.max", "1", "topics", TOPIC,
                "file", file.toString());
    }

    /** PUT /connectors/name/config, retried while a rebalance is in progress (409) or the write timed out (500). */
    static void putConfig(String name, Map<String, String> config) throws Exception {
        String body = ConnectClusterTest.JSON.writeValueAsString(config);
        Instant deadline = Instant.now().plusSeconds(60);
        while (true) {
            HttpResponse<String> r;
            try {
                r = worker.put("/connectors/" + name + "/config", body);
            } catch (java.net.http.HttpTimeoutException e) {
                log("PUT /connectors/" + name + "/config: " + e);
                continue;
            }
            if (r.statusCode() == 200 || r.statusCode() == 201) {
                return;
            }
            if (Instant.now().isAfter(deadline) || (r.statusCode() != 409 && r.statusCode() != 500)) {
                fail("PUT /connectors/" + name + "/config: " + r.statusCode() + " " + r.body());
            }
            Thread.sleep(500);
        }
    }

    static void awaitAllRunning() throws Exception {
        awaitStatus(worker, "seq-source", SOURCE_PARTITIONS, null, Duration.ofSeconds(60));
        awaitStatus(worker, "file-sink", 1, null, Duration.ofSeconds(60));
        awaitStatus(worker, "file-sink-late", 1, null, Duration.ofSeconds(60));
    }

    // ---- choosing the victim

    /**
     * The broker the config topic's partition will be placed on first:
     * Connect creates the offset, status and config topics in that order
     * at start, and the cluster places a new topic's partition 0 on the
     * registered brokers (sorted) round robin by the number of topics
     * (DESIGN.md, "Cluster": Placement).
     */
    static int predictedConfigLeader() throws Exception {
        int topics = admin.listTopics().names().get(10, TimeUnit.SECONDS).size();
        List<Integer> ids = admin.describeCluster().nodes().get(10, TimeUnit.SECONDS).stream().map(n -> n.id()).sorted()
                .collect(Collectors.toList());
        return ids.get((topics + 2) % ids.size());
    }

    /**
     * A group ID coordinated by broker id: the leader of __consumer_offsets
     * partition abs(hashCode) mod its partition count, as Kafka maps a group
     * to its coordinator, once every partition is led by its preferred
     * replica (no hand-back to come); the first candidate if none is found.
     */
    static String groupCoordinatedBy(int id) throws Exception {
        String first = "connect-rf3-" + RUN + "-0";
        List<TopicPartitionInfo> offsets = new ArrayList<>();
        String[] last = {"not asked"};
        await("__consumer_offsets placed and led by its preferred replicas", Duration.ofSeconds(60), () -> {
            try {
                // Describing a group asks FindCoordinator, which places
                // the coordinators; the group does not exist.
                admin.describeClassicGroups(List.of(first)).all().get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                last[0] = e.toString();
            }
            try {
                offsets.clear();
                offsets.addAll(admin.describeTopics(List.of("__consumer_offsets")).allTopicNames()
                        .get(10, TimeUnit.SECONDS).get("__consumer_offsets").partitions());
            } catch (Exception e) {
                last[0] = e.toString();
                return false;
            }
            List<TopicPartitionInfo> not = offsets.stream().filter(p -> p.leader() == null || p.replicas().isEmpty()
                    || p.leader().id() != p.replicas().get(0).id()).collect(Collectors.toList());
            last[0] = "not yet: " + not;
            return !offsets.isEmpty() && not.isEmpty();
        }, () -> last[0]);
        for (int i = 0; i < 30; i++) {
            String g = "connect-rf3-" + RUN + "-" + i;
            if (offsets.get((g.hashCode() & 0x7fffffff) % offsets.size()).leader().id() == id) {
                return g;
            }
        }
        return first;
    }

    /** The leader of the config topic's partition once it is its preferred replica (stable: no hand-back to come). */
    static int configLeader() throws Exception {
        int[] leader = {-1};
        await(CONFIGS + "-0 led by its preferred replica", Duration.ofSeconds(30), () -> {
            TopicPartitionInfo p = admin.describeTopics(List.of(CONFIGS)).allTopicNames().get(10, TimeUnit.SECONDS)
                    .get(CONFIGS).partitions().get(0);
            leader[0] = p.leader() == null ? -1 : p.leader().id();
            return p.leader() != null && leader[0] == p.replicas().get(0).id();
        });
        return leader[0];
    }

    static List<Integer> ledBy(Map<Integer, Integer> leaders, int id) {
        return leaders.entrySet().stream().filter(e -> e.getValue() == id).map(Map.Entry::getKey)
                .collect(Collectors.toList());
    }

    // ---- topics

    /** The internal topics have Connect's partition counts, 3 replicas each, and cleanup.policy=compact. */
    static void checkInternalTopics() throws Exception {
        Map<String, TopicDescription> desc = admin.describeTopics(PARTITIONS.keySet()).allTopicNames()
                .get(10, TimeUnit.SECONDS);
        for (Map.Entry<String, Integer> e : PARTITIONS.entrySet()) {
            List<TopicPartitionInfo> ps = desc.get(e.getKey()).partitions();
            assertEquals(e.getValue(), ps.size(), e.getKey() + " partitions");
            for (TopicPartitionInfo p : ps) {
                assertEquals(3, p.replicas().size(), e.getKey() + "-" + p.partition() + " replicas: " + p);
            }
        }
        List<ConfigResource> internal = List.of(CONFIGS, OFFSETS, STATUS).stream()
                .map(t -> new ConfigResource(ConfigResource.Type.TOPIC, t)).collect(Collectors.toList());
        Map<ConfigResource, Config> configs = admin.describeConfigs(internal).all().get(10, TimeUnit.SECONDS);
        for (ConfigResource r : internal) {
            assertEquals("compact", configs.get(r).get("cleanup.policy").value(), r.name() + " cleanup.policy");
        }
    }

    /**
     * Waits until every partition of the internal and source topics has a
     * leader and three replicas in sync (broker back among them, when not
     * null); returns each topic's leaders.
     */
    static Map<String, Map<Integer, Integer>> awaitInSync(Integer back) throws Exception {
        return cluster.awaitInSync(admin, PARTITIONS.keySet(), back);
    }

    static Properties consumerProps() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return p;
    }

    static Map<TopicPartition, Long> endOffsets() {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps())) {
            return c.endOffsets(partitions(c, TOPIC));
        }
    }

    static List<TopicPartition> partitions(KafkaConsumer<String, String> c, String topic) {
        return c.partitionsFor(topic).stream().map(i -> new TopicPartition(topic, i.partition()))
                .collect(Collectors.toList());
    }

    /** Reads TOPIC from the offsets in from (the beginning where absent) to its end: source partition to numbers. */
    static Map<String, Set<Long>> readTopic(Map<TopicPartition, Long> from) throws Exception {
        Map<String, Set<Long>> out = new TreeMap<>();
        for (ConsumerRecord<String, String> r : readAll(TOPIC, from)) {
            out.computeIfAbsent(r.key(), k -> new HashSet<>()).add(Long.parseLong(r.value()));
        }
        return out;
    }

    /**
     * The offsets topic's latest {"seq": n} per source partition of
     * seq-source (key ["seq-source",{"source":"seq-P"}]).
     */
    static Map<String, Long> committedSourceOffsets() throws Exception {
        Map<String, Long> out = new TreeMap<>();
        for (ConsumerRecord<String, String> r : readAll(OFFSETS, Map.of())) {
            if (r.key() == null || r.value() == null) {
                continue;
            }
            JsonNode k = ConnectClusterTest.JSON.readTree(r.key());
            if (k.isArray() && k.size() == 2 && "seq-source".equals(k.get(0).asText())) {
                out.put(k.get(1).get("source").asText(), ConnectClusterTest.JSON.readTree(r.value()).get("seq").asLong());
            }
        }
        return out;
    }

    static List<ConsumerRecord<String, String>> readAll(String topic, Map<TopicPartition, Long> from) throws Exception {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps())) {
            List<TopicPartition> tps = partitions(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            from.forEach(c::seek);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Instant deadline = Instant.now().plusSeconds(30);
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (Instant.now().isAfter(deadline)) {
                    fail("reading " + topic + " to " + end + " took longer than 30 s");
                }
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        return out;
    }

    // ---- numbers

    /** A sink file's lines ("topic partition offset key value"): source partition to the numbers written. */
    static Map<String, Set<Long>> numbers(Path file) throws IOException {
        Map<String, Set<Long>> out = new TreeMap<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            String[] f = line.split(" ");
            if (f.length == 5) { // else a line being written
                out.computeIfAbsent(f[3], k -> new HashSet<>()).add(Long.parseLong(f[4]));
            }
        }
        return out;
    }

    static long minCount(Map<String, Set<Long>> got) {
        return got.size() < SOURCE_PARTITIONS ? 0 : got.values().stream().mapToLong(Set::size).min().orElse(0);
    }

    /**
     * Every source partition's last number (records - 1) is there; as each
     * source partition is one key, so one partition written in order, every
     * earlier number is there too unless one was lost.
     */
    static boolean hasAll(Map<String, Set<Long>> got, long records) {
        return got.size() == SOURCE_PARTITIONS && got.values().stream().allMatch(s -> s.contains(records - 1));
    }

    static String summary(Path file) throws IOException {
        return numbers(file).entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey,
                e -> e.getValue().size() + " distinct, max " + e.getValue().stream().mapToLong(Long::longValue).max().orElse(-1),
                (a, b) -> a, TreeMap::new)).toString();
    }

    static void checkNoneMissing(Map<String, Set<Long>> got, long records, String where) {
        checkNoneMissing(got, records, where, 0);
    }

    /** got holds exactly the numbers from..records-1 of every source partition (each at least once). */
    static void checkNoneMissing(Map<String, Set<Long>> got, long records, String where, long from) {
        assertEquals(SOURCE_PARTITIONS, got.size(), where + ": source partitions " + got.keySet());
        for (Map.Entry<String, Set<Long>> e : got.entrySet()) {
            List<Long> missing = new ArrayList<>();
            for (long i = from; i < records; i++) {
                if (!e.getValue().contains(i)) {
                    missing.add(i);
                }
            }
            assertTrue(missing.isEmpty(), where + ", " + e.getKey() + ": " + missing.size() + " numbers missing: "
                    + missing.subList(0, Math.min(20, missing.size())));
            List<Long> outside = e.getValue().stream().filter(n -> n < from || n >= records).sorted().limit(20)
                    .collect(Collectors.toList());
            assertTrue(outside.isEmpty(), where + ", " + e.getKey() + ": numbers outside " + from + ".." + (records - 1)
                    + ": " + outside);
        }
    }

    // ---- cluster

    static String bootstrap() {
        return cluster.bootstrap();
    }

    static void log(String msg) {
        ConnectClusterTest.log(t0, msg);
    }
}
