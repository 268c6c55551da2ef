package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 11 part 3: a real Kafka Streams application (StreamsEosApp: re-key,
 * aggregate, table-table join) with processing.guarantee=exactly_once_v2 and
 * two instances, one of them a separate JVM killed with SIGKILL mid-run. The
 * survivor takes its tasks over, restores their state from the compacted
 * changelog, and the committed output is exactly once: per customer the
 * running counts are 1, 2, ..., n with no repeat and no gap, and the final
 * count and sum are those of the input.
 */
@BrokerTestBase.BrokerArgs({"--log-cleaner-backoff", "200ms"})
class StreamsEosTest extends BrokerTestBase {
    static final int PARTITIONS = 4;
    static final int CUSTOMERS = 20;
    static final int ORDERS = 3000;
    static final Duration FINISH = Duration.ofSeconds(60);

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void exactlyOnceWithAnInstanceKilled() throws Exception {
        String orders = createTopic("orders", PARTITIONS);
        String customers = createTopic("customers", PARTITIONS);
        String output = createTopic("totals-out", PARTITIONS);
        String appId = unique("streams-eos");
        String repartition = appId + "-" + StreamsEosApp.REPARTITION + "-repartition";
        String totalsChangelog = appId + "-" + StreamsEosApp.TOTALS_STORE + "-changelog";
        String customersChangelog = appId + "-" + StreamsEosApp.CUSTOMERS_STORE + "-changelog";
        assertTrue(Collections.disjoint(admin.listTopics().names().get(30, TimeUnit.SECONDS),
                List.of(repartition, totalsChangelog, customersChangelog)), "internal topics exist before Streams started");

        // The input, and what the output must end with.
        Map<String, String> names = new TreeMap<>();
        try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true))) {
            for (int c = 0; c < CUSTOMERS; c++) {
                String id = String.format("c-%02d", c);
                names.put(id, "name-" + id);
                p.send(new ProducerRecord<>(customers, id, "name-" + id));
            }
            p.flush();
        }
        Random rnd = new Random(42);
        List<String[]> orderList = new ArrayList<>(); // {orderId, customer, amount}
        Map<String, Long> wantCount = new TreeMap<>();
        Map<String, Long> wantSum = new TreeMap<>();
        for (int i = 0; i < ORDERS; i++) {
            String customer = String.format("c-%02d", rnd.nextInt(CUSTOMERS));
            int amount = 1 + rnd.nextInt(100);
            orderList.add(new String[] {"o-" + i, customer, Integer.toString(amount)});
            wantCount.merge(customer, 1L, Long::sum);
            wantSum.merge(customer, (long) amount, Long::sum);
        }

        Path stateA = Files.createTempDirectory("streams-eos-a-");
        Path stateB = Files.createTempDirectory("streams-eos-b-");
        Path logB = Files.createTempFile("streams-eos-b-", ".log");
        AtomicLong aggregatedA = new AtomicLong();
        Topology topology = StreamsEosApp.topology(orders, customers, output, aggregatedA);
        int statefulSubtopology = subtopologyOf(topology, StreamsEosApp.TOTALS_STORE);
        AtomicReference<KafkaStreams.State> stateOfA = new AtomicReference<>(KafkaStreams.State.CREATED);
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Restore> restores = new ConcurrentLinkedQueue<>();
        KafkaStreams a = new KafkaStreams(topology, StreamsEosApp.props(broker.bootstrap(), appId, stateA));
        a.setStateListener((n, o) -> stateOfA.set(n));
        a.setUncaughtExceptionHandler(e -> {
            errors.add("instance A: " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        a.setGlobalStateRestoreListener(new StateRestoreListener() {
            final Map<TopicPartition, Long> start = new HashMap<>();

            @Override
            public synchronized void onRestoreStart(TopicPartition tp, String store, long from, long to) {
                start.put(tp, System.nanoTime());
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
            }

            @Override
            public synchronized void onRestoreEnd(TopicPartition tp, String store, long total) {
                restores.add(new Restore(tp, store, total, Instant.now()));
            }
        });

        boolean passed = false;
        Process b = null;
        ChildWatcher watchB = null;
        Thread producerThread = null;
        AtomicInteger produced = new AtomicInteger();
        AtomicReference<Throwable> producerError = new AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean killed = new java.util.concurrent.atomic.AtomicBoolean();
        try {
            a.start();
            b = startChild(List.of(broker.bootstrap(), appId, orders, customers, output, stateB.toString()), logB);
            watchB = new ChildWatcher(b, statefulSubtopology, logB);
            final ChildWatcher w = watchB;

            // Both instances running, each with stateful tasks, and the
            // customers table loaded (its offsets committed) before any order.
            waitUntil(Duration.ofSeconds(45), () -> stateOfA.get() == KafkaStreams.State.RUNNING
                    && w.running() && w.statefulTasks() > 0 && statefulTasks(a, statefulSubtopology) > 0
                    && committedToEnd(appId, customers),
                    () -> "both instances RUNNING with stateful tasks and the customers consumed: A " + stateOfA.get()
                            + " " + statefulTasks(a, statefulSubtopology) + " stateful tasks, B " + w.describe()
                            + ", customers committed " + committedToEnd(appId, customers) + "; errors " + errors,
                    errors, logB);

            // The orders: the first half at 500/s, then 100/s until B is
            // killed (so that the kill lands mid-run however slow the
            // machine), then the rest at 500/s.
            producerThread = new Thread(() -> {
                try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true))) {
                    for (int i = 0; i < orderList.size(); i++) {
                        String[] o = orderList.get(i);
                        p.send(new ProducerRecord<>(orders, o[0], o[1] + ":" + o[2]));
                        produced.incrementAndGet();
                        boolean slow = i >= ORDERS / 2 && !killed.get();
                        if (i % (slow ? 5 : 25) == (slow ? 4 : 24)) {
                            p.flush();
                            Thread.sleep(50);
                        }
                    }
                    p.flush();
                } catch (Throwable t) {
                    producerError.set(t);
                }
            }, "orders-producer");
            producerThread.start();

            // B aggregates some orders; the changelog gets compacted; B is
            // killed while orders are still coming in.
            waitUntil(Duration.ofSeconds(45), () -> w.aggregated() >= 300,
                    () -> "instance B aggregating: " + w.describe() + ", produced " + produced.get(), errors, logB);
            waitUntil(Duration.ofSeconds(30), () -> compacted(totalsChangelog),
                    () -> "the broker compacting " + totalsChangelog + " (a key's oldest update still there)", errors, logB);
            long before = w.aggregated(); // and kill it while it is aggregating
            waitUntil(Duration.ofSeconds(10), () -> w.aggregated() > before,
                    () -> "instance B still aggregating: " + w.describe(), errors, logB);
            int producedAtKill = produced.get();
            long aggregatedByB = w.aggregated();
            Set<String> tasksOfB = w.tasks();
            Instant killedAt = Instant.now();
            b.destroyForcibly(); // SIGKILL: no LeaveGroup, no commit, an open transaction
            assertTrue(b.waitFor(10, TimeUnit.SECONDS), "instance B did not die");
            killed.set(true);
            System.out.printf("StreamsEosTest (kafka-clients %s): killed instance B after %d of %d orders produced; B had aggregated %d (with any aborted ones), tasks %s%n",
                    AppInfoParser.getVersion(), producedAtKill, ORDERS, aggregatedByB, tasksOfB);
            assertTrue(producedAtKill < ORDERS, "the kill was not mid-run: all orders were already produced");

            producerThread.join(60_000);
            assertTrue(producerError.get() == null, "producing orders: " + producerError.get());
            assertEquals(ORDERS, produced.get());

            // The committed output, until every customer's last count is there.
            Map<String, List<long[]>> updates = readOutput(output, wantCount, errors, logB);

            // Exactly once: per customer the counts are 1..n in order, the
            // final count and sum are the input's.
            List<String> problems = new ArrayList<>();
            int records = 0;
            for (Map.Entry<String, Long> e : wantCount.entrySet()) {
                String customer = e.getKey();
                List<long[]> got = updates.getOrDefault(customer, List.of());
                records += got.size();
                List<Long> counts = got.stream().map(u -> u[0]).collect(Collectors.toList());
                List<Long> want = Stream.iterate(1L, n -> n + 1).limit(e.getValue()).collect(Collectors.toList());
                if (!counts.equals(want)) {
                    problems.add(customer + ": counts " + summarize(counts) + ", want 1.." + e.getValue());
                }
                if (!got.isEmpty() && got.get(got.size() - 1)[1] != wantSum.get(customer)) {
                    problems.add(customer + ": final sum " + got.get(got.size() - 1)[1] + ", want " + wantSum.get(customer));
                }
            }
            assertTrue(problems.isEmpty(), "committed output is not exactly once:\n  " + String.join("\n  ", problems));
            assertEquals(ORDERS, records, "committed output records");

            // The survivor restored the killed instance's aggregates from the changelog.
            List<Restore> after = restores.stream()
                    .filter(r -> r.store.equals(StreamsEosApp.TOTALS_STORE) && r.at.isAfter(killedAt) && r.total > 0)
                    .collect(Collectors.toList());
            assertFalse(after.isEmpty(), "instance A restored no " + StreamsEosApp.TOTALS_STORE
                    + " partition from its changelog after the kill; restores: " + restores);

            // The changelog's last committed value per customer is the final aggregate.
            Map<String, String> last = new TreeMap<>();
            for (ConsumerRecord<String, String> r : readToEnd(totalsChangelog, "read_committed")) {
                last.put(r.key(), r.value());
            }
            Map<String, String> wantLast = new TreeMap<>();
            wantCount.forEach((c, n) -> wantLast.put(c, n + ":" + wantSum.get(c)));
            assertEquals(wantLast, last, "last committed value per customer in " + totalsChangelog);
            assertTrue(errors.isEmpty(), "errors: " + errors);
            passed = true;
        } finally {
            if (producerThread != null) {
                producerThread.interrupt();
            }
            if (b != null && b.isAlive()) {
                b.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            a.close(Duration.ofSeconds(20));
            if (passed) {
                Files.deleteIfExists(logB);
            } else {
                System.err.println("instance B log (kept): " + logB + "\n" + tail(logB));
            }
            deleteTree(stateA);
            deleteTree(stateB);
        }

        // Streams created its internal topics: names with the application id,
        // the changelogs compacted, the repartition topic not.
        Set<String> topics = admin.listTopics().names().get(30, TimeUnit.SECONDS);
        for (String t : List.of(repartition, totalsChangelog, customersChangelog)) {
            assertTrue(topics.contains(t), "internal topic " + t + " missing; topics " + topics);
        }
        assertEquals("compact", cleanupPolicy(totalsChangelog));
        assertEquals("compact", cleanupPolicy(customersChangelog));
        assertEquals("delete", cleanupPolicy(repartition));
        int repartitionPartitions = admin.describeTopics(List.of(repartition)).allTopicNames().get(30, TimeUnit.SECONDS)
                .get(repartition).partitions().size();
        assertEquals(PARTITIONS, repartitionPartitions, "partitions of " + repartition);
    }

    record Restore(TopicPartition tp, String store, long total, Instant at) {
    }

    /** The id of the subtopology that holds store. */
    static int subtopologyOf(Topology t, String store) {
        for (TopologyDescription.Subtopology s : t.describe().subtopologies()) {
            for (TopologyDescription.Node n : s.nodes()) {
                if (n instanceof TopologyDescription.Processor p && p.stores().contains(store)) {
                    return s.id();
                }
            }
        }
        return fail("no subtopology holds " + store + ": " + t.describe());
    }

    static int statefulTasks(KafkaStreams s, int subtopology) {
        try {
            return (int) s.metadataForLocalThreads().stream().flatMap(t -> t.activeTasks().stream())
                    .filter(task -> task.taskId().subtopology() == subtopology).count();
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /** Whether the application's committed offsets reach the end of every partition of topic. */
    static boolean committedToEnd(String group, String topic) {
        try {
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
            Map<TopicPartition, OffsetSpec> spec = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                spec.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            var ends = admin.listOffsets(spec).all().get(10, TimeUnit.SECONDS);
            for (var e : ends.entrySet()) {
                OffsetAndMetadata c = committed.get(e.getKey());
                if (e.getValue().offset() > 0 && (c == null || c.offset() < e.getValue().offset())) {
                    return false;
                }
            }
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    /**
     * Whether the broker compacted the changelog: some customer's oldest
     * record still in it is not its first update ("1:...").
     */
    static boolean compacted(String changelog) {
        Map<String, String> oldest = new HashMap<>();
        for (ConsumerRecord<String, String> r : readToEnd(changelog, "read_uncommitted")) {
            oldest.putIfAbsent(r.key(), r.value());
        }
        return oldest.values().stream().anyMatch(v -> !v.startsWith("1:"));
    }

    /** Every record of topic from its beginning to its end offsets now. */
    static List<ConsumerRecord<String, String>> readToEnd(String topic, String isolation) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(null, Map.of("isolation.level", isolation))) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic, DEADLINE).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, DEADLINE);
            Instant deadline = Instant.now().plus(DEADLINE);
            while (tps.stream().anyMatch(tp -> c.position(tp, DEADLINE) < end.get(tp))) {
                if (Instant.now().isAfter(deadline)) {
                    fail("reading " + topic + " (" + isolation + ") to " + end + " took longer than " + DEADLINE);
                }
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        return out;
    }

    /**
     * The output read_committed, per customer its updates {count, sum} in
     * offset order, once every customer reached its expected count (or the
     * deadline passed); then a little longer so that surplus records show.
     */
    static Map<String, List<long[]>> readOutput(String output, Map<String, Long> wantCount,
            ConcurrentLinkedQueue<String> errors, Path logB) throws InterruptedException {
        Map<String, List<long[]>> updates = new TreeMap<>();
        Map<String, Long> lastCount = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(null, Map.of("isolation.level", "read_committed"))) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(output, DEADLINE).forEach(pi -> tps.add(new TopicPartition(output, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            Instant deadline = Instant.now().plus(FINISH);
            Instant quiet = null;
            while (true) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    String v = r.value();
                    int bar = v.indexOf('|');
                    int colon = v.indexOf(':', bar);
                    assertEquals("name-" + r.key(), v.substring(0, bar), "joined name in " + r);
                    long count = Long.parseLong(v.substring(bar + 1, colon));
                    long sum = Long.parseLong(v.substring(colon + 1));
                    updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(new long[] {count, sum});
                    lastCount.put(r.key(), count);
                }
                boolean done = wantCount.entrySet().stream().allMatch(e -> lastCount.getOrDefault(e.getKey(), 0L) >= e.getValue());
                if (done && quiet == null) {
                    quiet = Instant.now().plusSeconds(1);
                }
                if (quiet != null && Instant.now().isAfter(quiet)) {
                    return updates;
                }
                if (!errors.isEmpty()) {
                    fail("Streams failed: " + errors);
                }
                if (Instant.now().isAfter(deadline)) {
                    Map<String, String> behind = new TreeMap<>();
                    wantCount.forEach((k, n) -> {
                        if (lastCount.getOrDefault(k, 0L) < n) {
                            behind.put(k, lastCount.getOrDefault(k, 0L) + "/" + n);
                        }
                    });
                    fail("the committed output did not reach the final counts within " + FINISH + "; behind: " + behind);
                }
            }
        }
    }

    static String summarize(List<Long> counts) {
        if (counts.size() <= 12) {
            return counts.toString();
        }
        List<String> odd = new ArrayList<>();
        for (int i = 0; i < counts.size(); i++) {
            if (counts.get(i) != i + 1) {
                odd.add("[" + i + "]=" + counts.get(i));
            }
        }
        return counts.size() + " updates, first " + counts.subList(0, 5) + ", last " + counts.get(counts.size() - 1)
                + ", out of place " + (odd.size() > 20 ? odd.subList(0, 20) + "..." : odd);
    }

    static Process startChild(List<String> args, Path log) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", cp, StreamsEosApp.class.getName()));
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        return pb.start();
    }

    /** Reads a child instance's stdout: its state and progress lines; copies it to a log file. */
    static final class ChildWatcher {
        private volatile String state = "CREATED";
        private volatile long aggregated;
        private volatile Set<String> tasks = Set.of();
        private final int statefulSubtopology;

        ChildWatcher(Process p, int statefulSubtopology, Path log) {
            this.statefulSubtopology = statefulSubtopology;
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                        java.io.Writer out = Files.newBufferedWriter(log, StandardCharsets.UTF_8)) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        if (line.startsWith("STATE ")) {
                            state = line.substring(line.lastIndexOf(' ') + 1);
                        } else if (line.startsWith("PROGRESS ")) {
                            String[] f = line.split(" ");
                            aggregated = Long.parseLong(f[1]);
                            tasks = new HashSet<>(List.of(f).subList(2, f.length));
                            continue; // not logged: ten a second
                        }
                        out.write(line + "\n");
                        out.flush();
                    }
                } catch (Exception e) {
                    // the process is gone
                }
            }, "streams-child-watcher");
            t.setDaemon(true);
            t.start();
        }

        boolean running() {
            return state.equals("RUNNING");
        }

        long aggregated() {
            return aggregated;
        }

        Set<String> tasks() {
            return tasks;
        }

        int statefulTasks() {
            return (int) tasks.stream().filter(t -> t.startsWith(statefulSubtopology + "_")).count();
        }

        String describe() {
            return "state " + state + ", aggregated " + aggregated + ", tasks " + tasks;
        }
    }

    static void waitUntil(Duration d, java.util.function.BooleanSupplier cond, java.util.function.Supplier<String> what,
            ConcurrentLinkedQueue<String> errors, Path logB) throws InterruptedException {
        Instant deadline = Instant.now().plus(d);
        while (!cond.getAsBoolean()) {
            if (!errors.isEmpty()) {
                fail("Streams failed: " + errors);
            }
            if (Instant.now().isAfter(deadline)) {
                fail("not within " + d + ": " + what.get());
            }
            Thread.sleep(100);
        }
    }

    static String cleanupPolicy(String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config c = admin.describeConfigs(List.of(r)).all().get(30, TimeUnit.SECONDS).get(r);
        return c.get("cleanup.policy").value();
    }

    static String tail(Path p) {
        try {
            List<String> lines = Files.readAllLines(p);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 200), lines.size()));
        } catch (Exception e) {
            return "(" + e + ")";
        }
    }

    static void deleteTree(Path dir) {
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception e) {
            // best effort
        }
    }
}
