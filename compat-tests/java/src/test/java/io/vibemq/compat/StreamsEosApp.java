package io.vibemq.compat;

import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams application of StreamsEosTest: orders (key order id,
 * value "customer:amount") are re-keyed by customer (repartition topic
 * {@code <app>-by-customer-repartition}), aggregated into "count:sum" per
 * customer (store {@code totals}, changelog {@code <app>-totals-changelog},
 * compacted), joined with the customers table (key customer, value name;
 * store {@code customers}) and written to the output topic as
 * "name|count:sum". Every order is one update of its customer's aggregate
 * and one output record; the record cache is off, so none is merged away.
 *
 * <p>{@link #main} runs one instance in its own JVM so that the test can kill
 * it with SIGKILL; it prints its state changes and, every 100 ms, how many
 * orders it aggregated and its active tasks.
 */
public final class StreamsEosApp {
    static final String REPARTITION = "by-customer";
    static final String TOTALS_STORE = "totals";
    static final String CUSTOMERS_STORE = "customers";

    private StreamsEosApp() {
    }

    static Topology topology(String orders, String customers, String output, AtomicLong aggregated) {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> names = b.table(customers,
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(CUSTOMERS_STORE));
        KTable<String, String> totals = b.<String, String>stream(orders)
                .selectKey((orderId, v) -> v.substring(0, v.indexOf(':')))
                .groupByKey(Grouped.as(REPARTITION))
                .aggregate(() -> "0:0", (customer, v, agg) -> {
                    aggregated.incrementAndGet();
                    int i = agg.indexOf(':');
                    long count = Long.parseLong(agg.substring(0, i)) + 1;
                    long sum = Long.parseLong(agg.substring(i + 1)) + Long.parseLong(v.substring(v.indexOf(':') + 1));
                    return count + ":" + sum;
                }, Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(TOTALS_STORE)
                        // Small segments and a low dirty ratio so that the broker
                        // compacts the changelog during the run.
                        .withLoggingEnabled(Map.of("segment.ms", "500", "min.cleanable.dirty.ratio", "0.01")));
        totals.join(names, (agg, name) -> name + "|" + agg).toStream().to(output);
        return b.build();
    }

    static Properties props(String bootstrap, String appId, Path stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, "0");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put("statestore.cache.max.bytes", "0"); // every update reaches the join and the output
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        // A killed instance sends no LeaveGroup: the survivor takes over after
        // the session timeout (Streams' default 45 s; the broker's minimum 6 s).
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "6000");
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "1000");
        // Its open transaction holds the LSO until the broker aborts it.
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), "5000");
        return p;
    }

    /** Args: bootstrap appId orders customers output stateDir. Runs until killed. */
    public static void main(String[] args) throws Exception {
        AtomicLong aggregated = new AtomicLong();
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3], args[4], aggregated),
                props(args[0], args[1], Path.of(args[5])));
        streams.setStateListener((n, o) -> System.out.println("STATE " + o + " " + n));
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        while (true) {
            StringBuilder tasks = new StringBuilder();
            streams.metadataForLocalThreads().forEach(t -> t.activeTasks().forEach(task -> tasks.append(' ').append(task.taskId())));
            System.out.println("PROGRESS " + aggregated.get() + tasks);
            System.out.flush();
            Thread.sleep(100);
        }
    }
}
