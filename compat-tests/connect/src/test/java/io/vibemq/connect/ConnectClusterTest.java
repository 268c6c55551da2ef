package io.vibemq.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A real Kafka Connect cluster against the broker (issue 11 part 2): two
 * distributed workers (ConnectDistributed JVMs) with
 * exactly.once.source.support=enabled create their internal topics, run a
 * sequence source (2 tasks, exactly-once, transaction per poll) and a file
 * sink created through the REST API; data moves end to end; the worker
 * running source task 0 is killed with SIGKILL (its open transaction left
 * open), its tasks move to the survivor and resume from the committed source
 * offsets (no gap, and read_committed sees every number exactly once: the
 * zombie's transaction was aborted by fencing), the killed worker restarts
 * and rejoins.
 */
@ExtendWith(ConnectClusterTest.LogsOnFailure.class)
class ConnectClusterTest {
    /**
     * Names unique to this run, so the test can run again against one
     * long-lived broker (-Dbootstrap.override, e.g. Apache Kafka).
     */
    static final String RUN = Long.toString(System.currentTimeMillis() % 100_000_000L, 36);
    static final String GROUP = "connect-it-" + RUN;
    static final String TOPIC = "seq-" + RUN;
    static final String CONFIGS = "connect-configs-" + RUN;
    static final String OFFSETS = "connect-offsets-" + RUN;
    static final String STATUS = "connect-status-" + RUN;
    static final int SOURCE_PARTITIONS = 2;
    static final long RECORDS = 1500; // per source partition
    static final ObjectMapper JSON = new ObjectMapper();

    static BrokerProcess broker;
    static final List<ConnectWorker> workers = new ArrayList<>();
    static Path sinkFile;
    static Path holdDir;

    /**
     * Prints the broker's and the workers' log tails when a test fails (and
     * keeps the files); removes them when it passes. Runs after @AfterEach.
     */
    static final class LogsOnFailure implements TestWatcher {
        @Override
        public void testFailed(ExtensionContext context, Throwable cause) {
            if (broker != null) {
                System.err.println("==== broker log tail (" + broker.logFile() + ")\n" + broker.logTail());
            }
            for (ConnectWorker w : workers) {
                System.err.println("==== worker " + w.name + " log tail (" + w.logFile() + ")\n" + w.logTail());
            }
            workers.clear();
        }

        @Override
        public void testSuccessful(ExtensionContext context) {
            if (Boolean.getBoolean("connect.keepLogs")) { // -Dconnect.keepLogs=true
                workers.forEach(w -> System.out.println("worker " + w.name + " log: " + w.logFile()));
                System.out.println("broker log: " + broker.logFile());
                workers.clear();
                return;
            }
            try {
                if (broker != null) {
                    broker.deleteLog();
                }
                for (ConnectWorker w : workers) {
                    w.deleteFiles();
                }
                Files.deleteIfExists(sinkFile);
                if (holdDir != null) {
                    Files.deleteIfExists(holdDir.resolve("hold.seq-0"));
                    Files.deleteIfExists(holdDir.resolve("hold.seq-1"));
                    Files.deleteIfExists(holdDir);
                }
            } catch (java.io.IOException e) {
                System.err.println("cannot remove the test's files: " + e);
            }
            workers.clear();
        }
    }

    @BeforeEach
    void setUp(TestInfo info) throws Exception {
        String override = BrokerProcess.bootstrapOverride();
        broker = override != null ? BrokerProcess.external(override) : BrokerProcess.start();
        System.out.println("[connect-test] broker: " + (override != null ? "external at " + override : "ours at " + broker.bootstrap()));
        sinkFile = Files.createTempFile("connect-sink-", ".txt");
    }

    @AfterEach
    void tearDown() throws Exception {
        for (ConnectWorker w : workers) {
            w.close(); // the watcher prints or removes their logs, then clears the list
        }
        if (broker != null) {
            broker.close();
        }
    }

    static Map<String, String> workerProps() {
        Map<String, String> p = new HashMap<>();
        p.put("bootstrap.servers", broker.bootstrap());
        p.put("group.id", GROUP);
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", CONFIGS);
        p.put("offset.storage.topic", OFFSETS);
        p.put("status.storage.topic", STATUS);
        p.put("config.storage.replication.factor", "1");
        p.put("offset.storage.replication.factor", "1");
        p.put("status.storage.replication.factor", "1");
        p.put("exactly.once.source.support", "enabled");
        p.put("plugin.discovery", "service_load");
        p.put("offset.flush.interval.ms", "1000");
        // A killed worker's tasks are reassigned after its session expires
        // plus this delay (default 5 min).
        p.put("scheduled.rebalance.max.delay.ms", "3000");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("task.shutdown.graceful.timeout.ms", "3000");
        // The sink reads only committed source transactions.
        p.put("consumer.isolation.level", "read_committed");
        // The sink's consumer must not auto-create the source's topic before
        // the source task creates it (topic.creation.default.*: 2 partitions).
        p.put("consumer.allow.auto.create.topics", "false");
        // A killed worker's sink consumer leaves its group after this, not
        // the default 45 s.
        p.put("consumer.session.timeout.ms", "6000");
        p.put("consumer.heartbeat.interval.ms", "1000");
        return p;
    }

    @Test
    @Timeout(300)
    void distributedWorkersExactlyOnceSourceAndSinkSurviveAKilledWorker() throws Exception {
        Instant t0 = Instant.now();
        holdDir = Files.createTempDirectory("connect-hold-");
        Path holdPrefix = holdDir.resolve("hold");
        ConnectWorker w1 = new ConnectWorker("w1", BrokerProcess.freePort(), workerProps());
        ConnectWorker w2 = new ConnectWorker("w2", BrokerProcess.freePort(), workerProps());
        workers.add(w1);
        workers.add(w2);
        w1.start();
        w2.start();
        w1.awaitReady(Duration.ofSeconds(90));
        w2.awaitReady(Duration.ofSeconds(90));
        log(t0, "both workers ready");

        // Each connector is created through one worker and its status read
        // through the other: a follower forwards to the leader.
        createConnector(w1, "seq-source", Map.ofEntries(
                Map.entry("connector.class", SeqSourceConnector.class.getName()),
                Map.entry("tasks.max", "2"),
                Map.entry("topic", TOPIC),
                Map.entry("partitions", Integer.toString(SOURCE_PARTITIONS)),
                Map.entry("records", Long.toString(RECORDS)),
                Map.entry("batch", "25"),
                Map.entry("poll.ms", "100"),
                // Each poll's transaction stays open 150 ms with its
                // records on the broker: the kill below lands in one.
                Map.entry("hold.ms", "150"),
                Map.entry("hold.file", holdPrefix.toString()),
                Map.entry("exactly.once.support", "required"),
                // The task requests each commit (hold.ms below); without
                // hold.ms, "poll" works the same.
                Map.entry("transaction.boundary", "connector"),
                Map.entry("topic.creation.default.replication.factor", "1"),
                Map.entry("topic.creation.default.partitions", "2")));
        createConnector(w2, "file-sink", Map.of(
                "connector.class", FileSinkConnector.class.getName(),
                "tasks.max", "1",
                "topics", TOPIC,
                "file", sinkFile.toString()));
        log(t0, "connectors created");

        awaitStatus(w2, "seq-source", 2, null, Duration.ofSeconds(60));
        awaitStatus(w1, "file-sink", 1, null, Duration.ofSeconds(60));
        await("sink file has records from both source partitions", Duration.ofSeconds(60), () -> {
            Map<String, Set<Long>> got = sinkRecords();
            return got.size() == SOURCE_PARTITIONS && got.values().stream().allMatch(s -> s.size() >= 50);
        });
        log(t0, "data flows end to end: " + sinkSummary());

        // Kill the worker that runs source task 0 (SIGKILL: no LeaveGroup)
        // while task 0 holds a transaction open (records of source partition
        // seq-0 on the broker, not committed).
        JsonNode st = status(w1, "seq-source");
        String task0Worker = st.get("tasks").get(0).get("worker_id").asText();
        ConnectWorker victim = task0Worker.equals(w1.workerId()) ? w1 : w2;
        ConnectWorker survivor = victim == w1 ? w2 : w1;
        Path hold0 = Path.of(holdPrefix + ".seq-0");
        await("source task 0 holds a transaction open", Duration.ofSeconds(30), () -> Files.exists(hold0));
        log(t0, "source tasks on " + tasksWorkers(st) + "; killing " + victim.name + " (" + victim.workerId()
                + ") with task 0's transaction open");
        victim.kill();
        Files.deleteIfExists(hold0);
        long sinkAtKill = sinkRecords().values().stream().mapToLong(Set::size).sum();

        awaitStatus(survivor, "seq-source", 2, survivor.workerId(), Duration.ofSeconds(60));
        awaitStatus(survivor, "file-sink", 1, survivor.workerId(), Duration.ofSeconds(60));
        log(t0, "tasks rebalanced to the survivor " + survivor.name + "; sink had " + sinkAtKill + " at the kill, now "
                + sinkSummary());

        victim.start();
        victim.awaitReady(Duration.ofSeconds(90));
        log(t0, "killed worker restarted");

        // Each source partition's records are one key, so one Kafka
        // partition, written and sunk in order: once the last number is in
        // the sink file, every earlier one must be too.
        await("sink file has the last record of both source partitions", Duration.ofSeconds(120), () -> {
            Map<String, Set<Long>> got = sinkRecords();
            return got.size() == SOURCE_PARTITIONS && got.values().stream().allMatch(s -> s.contains(RECORDS - 1));
        }, () -> sinkSummary());
        log(t0, "sink complete: " + sinkSummary());
        for (Map.Entry<String, Set<Long>> e : sinkRecords().entrySet()) {
            List<Long> missing = new ArrayList<>();
            for (long i = 0; i < RECORDS; i++) {
                if (!e.getValue().contains(i)) {
                    missing.add(i);
                }
            }
            assertTrue(missing.isEmpty(), e.getKey() + ": the sink file misses " + missing.size() + " numbers: "
                    + missing.subList(0, Math.min(20, missing.size())));
            assertEquals(RECORDS, e.getValue().size(), e.getKey() + ": distinct numbers in the sink file");
        }

        // The topic read with read_committed: every number of every source
        // partition exactly once, in order (no gap: the reassigned task
        // resumed at its committed offset; no duplicate: the killed worker's
        // open transaction was aborted when its transactional ID was fenced).
        checkTopicExactlyOnce();
        log(t0, "topic checked: exactly once under read_committed");

        // Both workers serve the cluster's status after the restart, and the
        // restarted worker got work back (incremental cooperative rebalance:
        // a task moved back resumed from the committed offsets, which the
        // topic check above covers).
        awaitStatus(victim, "seq-source", 2, null, Duration.ofSeconds(60));
        awaitStatus(victim, "file-sink", 1, null, Duration.ofSeconds(60));
        await("the restarted worker " + victim.workerId() + " runs a connector or a task", Duration.ofSeconds(60),
                () -> owners(survivor).contains(victim.workerId()), () -> "owners: " + owners(survivor));
        log(t0, "work spread over " + owners(survivor) + ": seq-source " + tasksWorkers(status(survivor, "seq-source")));

        checkInternalTopicsAndTransactions();
        log(t0, "internal topics and transactional IDs checked; done");
    }

    // ---- REST

    /** POST /connectors {"name": name, "config": config}. */
    static void createConnector(ConnectWorker w, String name, Map<String, String> config) throws Exception {
        String body = JSON.writeValueAsString(Map.of("name", name, "config", config));
        Instant deadline = Instant.now().plusSeconds(60);
        boolean retried = false;
        while (true) {
            HttpResponse<String> r = w.post("/connectors", body);
            if (r.statusCode() == 201) {
                return;
            }
            // A retry after a request that created it but timed out.
            if (retried && r.statusCode() == 409 && r.body().contains("already exists")) {
                return;
            }
            // 409: a rebalance is in progress; 500 with a timeout while the
            // leader is not known yet: retry.
            if (Instant.now().isAfter(deadline) || (r.statusCode() != 409 && r.statusCode() != 500)) {
                fail("POST /connectors (" + name + "): " + r.statusCode() + " " + r.body());
            }
            retried = true;
            Thread.sleep(500);
        }
    }

    static JsonNode status(ConnectWorker w, String name) throws Exception {
        HttpResponse<String> r = w.get("/connectors/" + name + "/status");
        if (r.statusCode() != 200) {
            return null;
        }
        return JSON.readTree(r.body());
    }

    /** The worker IDs that run a connector or a task, as {@code w} reports. */
    static Set<String> owners(ConnectWorker w) throws Exception {
        Set<String> out = new java.util.TreeSet<>();
        for (String name : List.of("seq-source", "file-sink")) {
            JsonNode st = status(w, name);
            if (st == null) {
                continue;
            }
            out.add(st.get("connector").get("worker_id").asText());
            for (JsonNode t : st.get("tasks")) {
                out.add(t.get("worker_id").asText());
            }
        }
        return out;
    }

    static String tasksWorkers(JsonNode st) {
        List<String> out = new ArrayList<>();
        for (JsonNode t : st.get("tasks")) {
            out.add(t.get("id").asInt() + ":" + t.get("state").asText() + "@" + t.get("worker_id").asText());
        }
        return out.toString();
    }

    /**
     * Waits until the connector and its {@code tasks} tasks are RUNNING (on
     * {@code onWorker} if not null) as {@code w} reports.
     */
    static void awaitStatus(ConnectWorker w, String name, int tasks, String onWorker, Duration timeout) throws Exception {
        String[] last = {"none"};
        await(name + " RUNNING with " + tasks + " tasks" + (onWorker == null ? "" : " on " + onWorker) + " as "
                + w.name + " reports", timeout, () -> {
                    JsonNode st = status(w, name);
                    if (st == null) {
                        return false;
                    }
                    last[0] = st.toString();
                    if (!"RUNNING".equals(st.get("connector").get("state").asText())) {
                        return false;
                    }
                    JsonNode ts = st.get("tasks");
                    if (ts.size() != tasks) {
                        return false;
                    }
                    for (JsonNode t : ts) {
                        if ("FAILED".equals(t.get("state").asText())) {
                            fail(name + " task failed: " + t);
                        }
                        if (!"RUNNING".equals(t.get("state").asText())) {
                            return false;
                        }
                        if (onWorker != null && !onWorker.equals(t.get("worker_id").asText())) {
                            return false;
                        }
                    }
                    return onWorker == null || onWorker.equals(st.get("connector").get("worker_id").asText());
                }, () -> "last status: " + last[0]);
    }

    // ---- the sink file

    /** Source partition ("seq-P") to the sequence numbers the sink wrote. */
    static Map<String, Set<Long>> sinkRecords() throws Exception {
        Map<String, Set<Long>> out = new TreeMap<>();
        for (String line : Files.readAllLines(sinkFile, StandardCharsets.UTF_8)) {
            String[] f = line.split(" ");
            if (f.length != 5) {
                continue; // a line being written
            }
            out.computeIfAbsent(f[3], k -> new HashSet<>()).add(Long.parseLong(f[4]));
        }
        return out;
    }

    static String sinkSummary() throws Exception {
        long lines = Files.readAllLines(sinkFile, StandardCharsets.UTF_8).size();
        return lines + " lines, distinct per source partition " + sinkRecords().entrySet().stream()
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().size(), (a, b) -> a, TreeMap::new));
    }

    // ---- the topic

    static void checkTopicExactlyOnce() throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Map<String, List<Long>> values = new TreeMap<>();
        Map<TopicPartition, Long> lso = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = c.partitionsFor(TOPIC).stream()
                    .map(i -> new TopicPartition(TOPIC, i.partition())).collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            // Every transaction ended: the last stable offset (read_committed
            // end) reaches the high watermark. A zombie's transaction never
            // aborted would hold it back.
            await("the last stable offset reaches the high watermark on " + TOPIC, Duration.ofSeconds(30), () -> {
                lso.clear();
                lso.putAll(c.endOffsets(tps));
                return lso.equals(highWatermarks(tps));
            });
            Instant deadline = Instant.now().plusSeconds(30);
            while (tps.stream().anyMatch(tp -> c.position(tp) < lso.get(tp))) {
                if (Instant.now().isAfter(deadline)) {
                    fail("read_committed consumer did not reach " + lso);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    values.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(Long.parseLong(r.value()));
                }
            }
        }
        long hwm = highWatermarks(lso.keySet()).values().stream().mapToLong(Long::longValue).sum();
        long committed = values.values().stream().mapToLong(List::size).sum();
        long all = countUncommitted(lso.keySet(), highWatermarks(lso.keySet()));
        // Records read_uncommitted sees and read_committed does not: aborted
        // ones, e.g. the killed worker's open transaction, aborted when the
        // reassigned task's producer fenced its transactional ID.
        System.out.println("[connect-test] " + TOPIC + ": " + hwm + " offsets (records and markers), " + all
                + " records read_uncommitted, " + committed + " read_committed (" + (all - committed) + " aborted)");
        assertTrue(all > committed, "no aborted records: the killed worker's open transaction (records on the "
                + "broker) should have been aborted when its transactional ID was fenced");
        assertEquals(SOURCE_PARTITIONS, values.size(), "source partitions in the topic: " + values.keySet());
        for (Map.Entry<String, List<Long>> e : values.entrySet()) {
            List<Long> got = e.getValue();
            for (int i = 0; i < got.size(); i++) {
                if (got.get(i) != i) {
                    fail(e.getKey() + ": read_committed record " + i + " has number " + got.get(i) + " (want " + i
                            + ": a gap or a duplicate); " + got.size() + " records, around it "
                            + got.subList(Math.max(0, i - 5), Math.min(got.size(), i + 5)));
                }
            }
            assertEquals(RECORDS, got.size(), e.getKey() + ": records under read_committed");
        }
    }

    static long countUncommitted(Collection<TopicPartition> tps, Map<TopicPartition, Long> end) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long n = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Instant deadline = Instant.now().plusSeconds(30);
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (Instant.now().isAfter(deadline)) {
                    fail("read_uncommitted consumer did not reach " + end);
                }
                n += c.poll(Duration.ofMillis(500)).count();
            }
        }
        return n;
    }

    static Map<TopicPartition, Long> highWatermarks(Collection<TopicPartition> tps) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            return c.endOffsets(tps);
        }
    }

    // ---- what Connect created on the broker

    static void checkInternalTopicsAndTransactions() throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        try (Admin admin = Admin.create(p)) {
            Map<String, Integer> wantPartitions = Map.of(CONFIGS, 1, OFFSETS, 25, STATUS, 5, TOPIC, 2);
            Map<String, TopicDescription> desc = admin.describeTopics(wantPartitions.keySet()).allTopicNames().get();
            for (Map.Entry<String, Integer> e : wantPartitions.entrySet()) {
                assertEquals(e.getValue(), desc.get(e.getKey()).partitions().size(), e.getKey() + " partitions");
            }
            List<ConfigResource> internal = List.of(CONFIGS, OFFSETS, STATUS).stream()
                    .map(t -> new ConfigResource(ConfigResource.Type.TOPIC, t)).collect(Collectors.toList());
            Map<ConfigResource, Config> configs = admin.describeConfigs(internal).all().get();
            for (ConfigResource r : internal) {
                assertEquals("compact", configs.get(r).get("cleanup.policy").value(), r.name() + " cleanup.policy");
            }
            // The leader's config-topic producer and one transactional
            // producer per source task (Worker.taskTransactionalId).
            Set<String> txnIds = admin.listTransactions().all().get().stream()
                    .map(TransactionListing::transactionalId).collect(Collectors.toSet());
            for (String id : List.of("connect-cluster-" + GROUP, GROUP + "-seq-source-0", GROUP + "-seq-source-1")) {
                assertTrue(txnIds.contains(id), "transactional ID " + id + " not listed: " + txnIds);
            }
        }
    }

    // ---- helpers

    static void await(String what, Duration timeout, Callable<Boolean> cond) throws Exception {
        await(what, timeout, cond, () -> "");
    }

    static void await(String what, Duration timeout, Callable<Boolean> cond, Callable<String> detail) throws Exception {
        Instant deadline = Instant.now().plus(timeout);
        while (!cond.call()) {
            if (Instant.now().isAfter(deadline)) {
                fail("timed out after " + timeout + " waiting for: " + what + "; " + detail.call());
            }
            Thread.sleep(250);
        }
    }

    static void log(Instant t0, String msg) {
        System.out.printf("[connect-test +%5.1fs] %s%n", Duration.between(t0, Instant.now()).toMillis() / 1000.0, msg);
    }
}
