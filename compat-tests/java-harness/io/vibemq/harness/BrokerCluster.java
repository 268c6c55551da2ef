package io.vibemq.harness;

import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * A cluster of {@code broker serve} processes (issue 13) for the cluster
 * tests of compat-tests/java and compat-tests/connect: started with
 * {@link BrokerProcess#startCluster} (node IDs 1..n), waited for until
 * every broker has applied every registration ({@link #awaitFormed}),
 * asked for partition leaders, group coordinators and in-sync replica
 * sets through a caller's {@link Admin}, brokers killed and restarted by
 * node ID, and stopped with its logs kept when asked ({@link #stop}).
 *
 * <p>Every {@code await...} polls every {@code interval} and throws an
 * {@link AssertionError} naming what it waited for and what it saw last
 * once {@code timeout} (both given to {@link #start}) has passed. The
 * Admin stays the caller's: its timeouts are the test's choice, and it is
 * closed by the caller before {@link #stop}.
 *
 * <p>Invariants: {@link #down()} holds exactly the node IDs killed through
 * {@link #kill} and not restarted through {@link #restart} since; their
 * exit by SIGKILL is no problem at {@link #stop}. Once {@link #failed} was
 * called (by {@link #logsOnFailure} when a test failed), {@link #stop}
 * keeps every broker's log.
 */
public final class BrokerCluster {
    /** A member of GET /v1/admin/cluster with its registered Kafka address. */
    static final Pattern REGISTERED = Pattern.compile("\"kafka_addr\":\"[^\"]+\"");

    private final List<BrokerProcess> brokers;
    private final Duration timeout;
    private final Duration interval;
    private final Set<Integer> down = new TreeSet<>();
    private volatile boolean failed;

    private BrokerCluster(List<BrokerProcess> brokers, Duration timeout, Duration interval) {
        this.brokers = brokers;
        this.timeout = timeout;
        this.interval = interval;
    }

    /**
     * Starts n brokers of one cluster with extraArgs each (see
     * {@link BrokerProcess#startCluster}); each is ready, the cluster not
     * yet formed: call {@link #awaitFormed}. timeout and interval are those
     * of every {@code await...} of this cluster.
     */
    public static BrokerCluster start(int n, Duration timeout, Duration interval, String... extraArgs) throws Exception {
        return new BrokerCluster(BrokerProcess.startCluster(n, extraArgs), timeout, interval);
    }

    /** The number of brokers (node IDs 1..size()). */
    public int size() {
        return brokers.size();
    }

    /** The broker of node ID id (1..size()). */
    public BrokerProcess broker(int id) {
        return brokers.get(id - 1);
    }

    /** Every broker's Kafka address, comma-separated: bootstrap.servers for a client of the whole cluster. */
    public String bootstrap() {
        return brokers.stream().map(BrokerProcess::bootstrap).collect(Collectors.joining(","));
    }

    /** The node IDs killed through {@link #kill} and not restarted since. */
    public Set<Integer> down() {
        return Set.copyOf(down);
    }

    /** SIGKILL to broker id (see {@link BrokerProcess#kill}); it is {@link #down()} until {@link #restart}. */
    public void kill(int id) throws InterruptedException {
        down.add(id);
        broker(id).kill();
    }

    /** Starts broker id again on its data and addresses and waits until it is ready (see {@link BrokerProcess#restart}). */
    public void restart(int id) throws Exception {
        broker(id).restart();
        down.remove(id);
    }

    /**
     * Polls cond every interval until it holds; after the timeout, an
     * AssertionError with what.get() (evaluated then, so it can name the
     * last state seen).
     */
    public void await(BooleanSupplier cond, Supplier<String> what) throws InterruptedException {
        Instant deadline = Instant.now().plus(timeout);
        while (!cond.getAsBoolean()) {
            if (Instant.now().isAfter(deadline)) {
                throw new AssertionError("not within " + timeout + ": " + what.get());
            }
            Thread.sleep(interval.toMillis());
        }
    }

    /**
     * Waits until the cluster has formed: every broker's GET
     * /v1/admin/cluster lists size() members with a registered Kafka
     * address, and describeCluster names size() brokers and a controller.
     * describeCluster alone does not say it: a broker not registered yet
     * still lists itself in Metadata, and the controller places replicas
     * only on registered brokers (seen: RF 3 refused with "2 unfenced
     * registered broker(s)").
     */
    public void awaitFormed(Admin admin) throws InterruptedException {
        List<String> status = new ArrayList<>();
        await(() -> {
            status.clear();
            for (BrokerProcess b : brokers) {
                String s = clusterStatus(b);
                status.add(s);
                if (REGISTERED.matcher(s).results().count() != size()) {
                    return false;
                }
            }
            try {
                var d = admin.describeCluster();
                return d.nodes().get(10, TimeUnit.SECONDS).size() == size() && d.controller().get(10, TimeUnit.SECONDS) != null;
            } catch (Exception e) {
                return false;
            }
        }, () -> "every broker's GET /v1/admin/cluster with " + size() + " registered members and describeCluster naming "
                + size() + " brokers and a controller; last statuses: " + status);
    }

    /** Broker b's GET /v1/admin/cluster (its view of the metadata group) as "code body", or what went wrong. */
    public static String clusterStatus(BrokerProcess b) {
        try {
            HttpURLConnection c = (HttpURLConnection) new URL("http://" + b.httpAddr() + "/v1/admin/cluster").openConnection();
            c.setConnectTimeout(2000);
            c.setReadTimeout(2000);
            try (InputStream in = c.getResponseCode() == 200 ? c.getInputStream() : c.getErrorStream()) {
                return c.getResponseCode() + " " + (in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8));
            } finally {
                c.disconnect();
            }
        } catch (IOException e) {
            return e.toString();
        }
    }

    /** The leader's node ID of topic's partition in describeTopics, -1 when it has none. */
    public static int leaderOf(Admin admin, String topic, int partition) throws Exception {
        Node l = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS)
                .get(topic).partitions().get(partition).leader();
        return l == null ? -1 : l.id();
    }

    /** Each partition's leader per topic in describeTopics now (a partition without one left out). */
    public static Map<String, Map<Integer, Integer>> leaders(Admin admin, Collection<String> topics) throws Exception {
        Map<String, Map<Integer, Integer>> out = new TreeMap<>();
        admin.describeTopics(topics).allTopicNames().get(10, TimeUnit.SECONDS).forEach((t, d) -> out.put(t, leadersOf(d)));
        return out;
    }

    private static Map<Integer, Integer> leadersOf(TopicDescription d) {
        Map<Integer, Integer> l = new TreeMap<>();
        for (TopicPartitionInfo p : d.partitions()) {
            if (p.leader() != null) {
                l.put(p.partition(), p.leader().id());
            }
        }
        return l;
    }

    /** The node ID of the coordinator of a consumer group (describeConsumerGroups; the group must exist). */
    public static int coordinatorOf(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get(30, TimeUnit.SECONDS).coordinator().id();
    }

    /**
     * Waits until every partition of topics has a leader, size() replicas
     * and size() in sync, with broker back among them when back is not
     * null (a restarted broker caught up), and each topic has a partition;
     * returns each partition's leader per topic.
     */
    public Map<String, Map<Integer, Integer>> awaitInSync(Admin admin, Collection<String> topics, Integer back)
            throws InterruptedException {
        Map<String, Map<Integer, Integer>> leaders = new TreeMap<>();
        List<String> last = new ArrayList<>();
        await(() -> {
            leaders.clear();
            last.clear();
            Map<String, TopicDescription> ds;
            try {
                ds = admin.describeTopics(topics).allTopicNames().get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                last.add(e.toString());
                return false;
            }
            for (Map.Entry<String, TopicDescription> e : ds.entrySet()) {
                if (e.getValue().partitions().isEmpty()) {
                    last.add(e.getKey() + " without partitions");
                }
                for (TopicPartitionInfo p : e.getValue().partitions()) {
                    boolean in = p.leader() != null && p.replicas().size() == size() && p.isr().size() == size()
                            && (back == null || p.isr().stream().anyMatch(n -> n.id() == back));
                    if (!in) {
                        last.add(e.getKey() + " " + p);
                    }
                }
                leaders.put(e.getKey(), leadersOf(e.getValue()));
            }
            return last.isEmpty();
        }, () -> "every partition of " + topics + " led with " + size() + " replicas and " + size() + " in sync"
                + (back == null ? "" : " (broker " + back + " among them)") + "; not yet: " + last);
        return leaders;
    }

    /**
     * Waits until every partition of topics is in sync ({@link #awaitInSync})
     * and each topic's partitions are led by every broker between them. A
     * partition's first leader may be another replica than its preferred
     * one, which gets the leadership back once in sync: this waits for that
     * hand-back too. Returns the leaders.
     */
    public Map<String, Map<Integer, Integer>> awaitSpread(Admin admin, Collection<String> topics) throws InterruptedException {
        Map<String, Map<Integer, Integer>> leaders = new TreeMap<>();
        await(() -> {
            try {
                leaders.clear();
                leaders.putAll(awaitInSync(admin, topics, null));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            return leaders.values().stream().allMatch(l -> new HashSet<>(l.values()).size() == size());
        }, () -> "the leaders of each topic's partitions spread over the " + size() + " brokers: " + leaders);
        return leaders;
    }

    /**
     * A test failed: prints every broker's log tail to stderr, each headed
     * by label, the broker's node ID and its log file, and makes
     * {@link #stop} keep the logs.
     */
    public void failed(String label) {
        failed = true;
        for (int id = 1; id <= size(); id++) {
            printLogTail(label + ": broker " + id, broker(id));
        }
    }

    /**
     * A JUnit watcher ({@code @RegisterExtension static final}) that calls
     * {@link #failed} on the cluster cluster.get() returns (read when a
     * test fails; nothing when null) with "test name failed".
     */
    public static TestWatcher logsOnFailure(Supplier<BrokerCluster> cluster) {
        return new TestWatcher() {
            @Override
            public void testFailed(ExtensionContext ctx, Throwable cause) {
                BrokerCluster c = cluster.get();
                if (c != null) {
                    c.failed(ctx.getDisplayName() + " failed");
                }
            }
        };
    }

    private static void printLogTail(String label, BrokerProcess b) {
        System.err.printf("%n=== %s (kafka-clients %s); broker log (%s, last %d bytes):%n%s%n",
                label, AppInfoParser.getVersion(), b.logFile(), BrokerProcess.LOG_TAIL_BYTES, b.logTail());
    }

    /**
     * Stops every broker ({@link BrokerProcess#stop}: SIGTERM, data
     * directory removed), then throws an AssertionError naming every
     * broker that did not exit cleanly, leaving out a broker that is
     * {@link #down()} (its exit by SIGKILL was the test's doing). A problem
     * prints the broker's log tail. Each log is kept (its path printed)
     * when keepLogs, after {@link #failed}, or when the broker had a
     * problem; else deleted.
     */
    public void stop(boolean keepLogs) throws Exception {
        List<String> problems = new ArrayList<>();
        for (int id = 1; id <= size(); id++) {
            BrokerProcess b = broker(id);
            String problem = b.stop();
            if (problem != null && !down.contains(id)) {
                problems.add("broker " + id + ": " + problem);
                printLogTail("broker " + id + ": " + problem, b);
            }
            if (keepLogs || failed || problem != null) {
                System.err.println("broker " + id + " log kept: " + b.logFile());
            } else {
                b.deleteLog();
            }
        }
        if (!problems.isEmpty()) {
            throw new AssertionError(String.join("; ", problems));
        }
    }
}
