package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * One broker per test class (started in @BeforeAll, stopped in @AfterAll), one
 * Admin client on it, unique topic and group names per test, and the broker's
 * log tail printed when a test fails.
 */
abstract class BrokerTestBase {
    static final Duration DEADLINE = Duration.ofSeconds(30);
    private static final AtomicInteger SEQ = new AtomicInteger();

    static BrokerProcess broker;
    static Admin admin;
    /** Set when a test of the current class failed: its broker log is then kept. */
    static volatile boolean failed;

    @RegisterExtension
    static final TestWatcher LOG_ON_FAILURE = new TestWatcher() {
        @Override
        public void testFailed(ExtensionContext ctx, Throwable cause) {
            failed = true;
            if (broker != null) {
                printLogTail(ctx.getDisplayName() + " failed", broker);
            }
        }
    };

    /** Extra `broker serve` flags for the broker of the annotated test class. */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.TYPE)
    @interface BrokerArgs {
        String[] value();
    }

    @BeforeAll
    static void startBroker(TestInfo info) throws Exception {
        failed = false;
        List<String> args = new ArrayList<>(List.of("--group-initial-rebalance-delay", "0s"));
        BrokerArgs extra = info.getTestClass().map(c -> c.getAnnotation(BrokerArgs.class)).orElse(null);
        if (extra != null) {
            args.addAll(List.of(extra.value()));
        }
        String override = BrokerProcess.bootstrapOverride();
        broker = override != null ? BrokerProcess.external(override) : BrokerProcess.start(args.toArray(new String[0]));
        admin = admin(broker.bootstrap());
    }

    /** An Admin client with the tests' timeouts for the brokers at bootstrap. */
    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /** Prints a broker's log tail after a failure: label says which broker and why. */
    static void printLogTail(String label, BrokerProcess b) {
        System.err.printf("%n=== %s (kafka-clients %s); broker log (%s, last %d bytes):%n%s%n",
                label, AppInfoParser.getVersion(), b.logFile(), BrokerProcess.LOG_TAIL_BYTES, b.logTail());
    }

    @AfterEach
    void brokerStillAlive() {
        assertTrue(broker.alive(), "the broker process exited during the test; log:\n" + broker.logTail());
    }

    @AfterAll
    static void stopBroker() throws Exception {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
        if (broker != null) {
            String problem = broker.stop();
            if (problem != null) {
                failed = true;
                System.err.printf("%s; broker log (%s):%n%s%n", problem, broker.logFile(), broker.logTail());
            }
            if (failed) {
                System.err.println("broker log kept: " + broker.logFile());
            } else {
                broker.deleteLog();
            }
            broker = null;
            assertTrue(problem == null, problem);
        }
    }

    /** A name unique in this JVM: prefix-N-millis. */
    static String unique(String prefix) {
        return prefix + "-" + SEQ.incrementAndGet() + "-" + (System.currentTimeMillis() % 1_000_000);
    }

    static String createTopic(String prefix, int partitions, Map<String, String> configs) throws Exception {
        String name = unique(prefix);
        NewTopic t = new NewTopic(name, partitions, (short) 1).configs(configs);
        admin.createTopics(List.of(t)).all().get(30, TimeUnit.SECONDS);
        awaitTopic(name, partitions);
        return name;
    }

    /**
     * Waits until the broker describes topic with every partition led and
     * answers ListOffsets for each. Our broker answers CreateTopics once the
     * topic is served; Apache Kafka's controller answers once the topic is
     * committed to its metadata log, and its broker serves it a moment later
     * (until then UNKNOWN_TOPIC_OR_PARTITION, then NOT_LEADER_OR_FOLLOWER
     * from the replica manager while Metadata already names the leader: an
     * idempotent producer whose first batch met that was seen retrying
     * OUT_OF_ORDER_SEQUENCE_NUMBER for two minutes against Kafka 4.2).
     */
    static void awaitTopic(String topic, int partitions) throws InterruptedException {
        waitFor(() -> {
            try {
                var d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                if (d.partitions().size() != partitions || !d.partitions().stream().allMatch(p -> p.leader() != null)) {
                    return false;
                }
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
                }
                admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS);
                return true;
            } catch (ExecutionException e) {
                return false;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }, () -> "topic " + topic + " with " + partitions + " led partitions in describeTopics");
    }

    static String createTopic(String prefix, int partitions) throws Exception {
        return createTopic(prefix, partitions, Map.of());
    }

    static Properties producerProps() {
        return producerProps(broker.bootstrap());
    }

    /** The tests' producer settings for the brokers at bootstrap (host:port,...). */
    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Kafka's default delivery timeout: a reference Kafka on a loaded
        // 2-core machine expired an idempotent batch after 30 s once.
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return p;
    }

    static KafkaProducer<String, String> producer(Map<String, Object> overrides) {
        Properties p = producerProps();
        p.putAll(overrides);
        return new KafkaProducer<>(p);
    }

    static Properties consumerProps(String groupId) {
        return consumerProps(broker.bootstrap(), groupId);
    }

    /** The tests' consumer settings for the brokers at bootstrap; groupId null for none. */
    static Properties consumerProps(String bootstrap, String groupId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        if (groupId != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            p.put("group.protocol", "classic");
        }
        return p;
    }

    static KafkaConsumer<String, String> consumer(String groupId, Map<String, Object> overrides) {
        Properties p = consumerProps(groupId);
        p.putAll(overrides);
        return new KafkaConsumer<>(p);
    }

    /**
     * Reads every partition of topic from the beginning, without a group,
     * until want records arrived or the deadline passed; then polls once more
     * briefly so that surplus records (duplicates) are seen too.
     */
    static List<ConsumerRecord<String, String>> readAll(String topic, int want, Map<String, Object> overrides) {
        try (KafkaConsumer<String, String> c = consumer(null, overrides)) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic, DEADLINE).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            return pollUntil(c, want);
        }
    }

    static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        Instant deadline = Instant.now().plus(DEADLINE);
        while (out.size() < want && Instant.now().isBefore(deadline)) {
            c.poll(Duration.ofMillis(200)).forEach(out::add);
        }
        if (out.size() < want) {
            fail("read " + out.size() + " of " + want + " records within " + DEADLINE);
        }
        ConsumerRecords<String, String> extra = c.poll(Duration.ofMillis(300));
        extra.forEach(out::add);
        return out;
    }

    /** Polls cond every 100 ms until it holds; fails with what() after the deadline. */
    static void waitFor(BooleanSupplier cond, Supplier<String> what) throws InterruptedException {
        Instant deadline = Instant.now().plus(DEADLINE);
        while (!cond.getAsBoolean()) {
            if (Instant.now().isAfter(deadline)) {
                fail("not within " + DEADLINE + ": " + what.get());
            }
            Thread.sleep(100);
        }
    }

    /** The cause of a failed future's ExecutionException. */
    static Throwable causeOf(org.junit.jupiter.api.function.Executable call) {
        try {
            call.execute();
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (Throwable t) {
            return t;
        }
        return fail("expected a failure, the call succeeded");
    }

    static <K, V> Map<K, V> map(Collection<K> keys, V v) {
        Map<K, V> m = new HashMap<>();
        keys.forEach(k -> m.put(k, v));
        return m;
    }
}
