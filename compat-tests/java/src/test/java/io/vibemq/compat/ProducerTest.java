package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The Java producer: idempotence, every codec, headers, timestamps. */
class ProducerTest extends BrokerTestBase {

    /** 300 records over 3 partitions with idempotence: each once, in order per partition. */
    @Test
    void idempotentProducerWritesEachRecordOnceInOrder() throws Exception {
        String topic = createTopic("idem", 3);
        int n = 300;
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5,
                ProducerConfig.BATCH_SIZE_CONFIG, 512))) {
            for (int i = 0; i < n; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, i % 3, "k" + i, "v" + i)));
            }
            p.flush();
        }
        Map<Integer, Long> lastOffset = new HashMap<>();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = acks.get(i).get(10, TimeUnit.SECONDS);
            assertEquals(i % 3, md.partition());
            long prev = lastOffset.getOrDefault(md.partition(), -1L);
            assertEquals(prev + 1, md.offset(), "offsets of partition " + md.partition() + " must be dense, in send order");
            lastOffset.put(md.partition(), md.offset());
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, n, Map.of());
        assertEquals(n, got.size(), "records read back (duplicates?)");
        Map<Integer, Integer> nextIndex = new HashMap<>();
        for (ConsumerRecord<String, String> r : got) {
            int i = Integer.parseInt(r.value().substring(1));
            int want = nextIndex.getOrDefault(r.partition(), r.partition());
            assertEquals(want, i, "partition " + r.partition() + " order");
            nextIndex.put(r.partition(), i + 3);
            assertEquals("k" + i, r.key());
        }
    }

    /** Every codec the Java client has: values, keys and headers survive the round trip. */
    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void everyCodecRoundTrips(String codec) throws Exception {
        String topic = createTopic("codec-" + codec, 2);
        int n = 200;
        String filler = "x".repeat(100);
        try (KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, 20))) {
            for (int i = 0; i < n; i++) {
                RecordHeaders h = new RecordHeaders();
                h.add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                p.send(new ProducerRecord<>(topic, null, "k" + i, filler + i, h));
            }
            p.flush();
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, n, Map.of());
        assertEquals(n, got.size());
        Set<String> seen = new HashSet<>();
        for (ConsumerRecord<String, String> r : got) {
            String i = r.key().substring(1);
            assertEquals(filler + i, r.value());
            assertArrayEquals(i.getBytes(StandardCharsets.UTF_8), r.headers().lastHeader("i").value());
            assertTrue(seen.add(r.key()), "duplicate " + r.key());
        }
    }

    /** Headers: order, repeated keys, empty and null values, binary bytes, a null key and value. */
    @Test
    void headersAndNullsRoundTrip() throws Exception {
        String topic = createTopic("headers", 1);
        byte[] binary = new byte[256];
        for (int i = 0; i < binary.length; i++) {
            binary[i] = (byte) i;
        }
        List<Header> hs = List.of(
                new RecordHeader("a", "1".getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("a", "2".getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("empty", new byte[0]),
                new RecordHeader("null", (byte[]) null),
                new RecordHeader("bin", binary),
                new RecordHeader("ünï", "ß".getBytes(StandardCharsets.UTF_8)));
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            p.send(new ProducerRecord<String, String>(topic, 0, (String) null, "with-headers", hs)).get(10, TimeUnit.SECONDS);
            p.send(new ProducerRecord<>(topic, 0, "tombstone", null)).get(10, TimeUnit.SECONDS);
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, 2, Map.of());
        assertEquals(2, got.size());
        ConsumerRecord<String, String> r = got.get(0);
        assertNull(r.key());
        assertEquals("with-headers", r.value());
        Header[] back = r.headers().toArray();
        assertEquals(hs.size(), back.length);
        for (int i = 0; i < hs.size(); i++) {
            assertEquals(hs.get(i).key(), back[i].key());
            assertArrayEquals(hs.get(i).value(), back[i].value(), "header " + i + " " + hs.get(i).key());
        }
        assertEquals("tombstone", got.get(1).key());
        assertNull(got.get(1).value());
    }

    /** CreateTime (the default): the producer's timestamp is kept, as sent. */
    @Test
    void createTimeKeepsTheProducersTimestamp() throws Exception {
        String topic = createTopic("ts-create", 1, Map.of("message.timestamp.type", "CreateTime"));
        long t0 = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 5; i++) {
                RecordMetadata md = p.send(new ProducerRecord<>(topic, 0, t0 + i * 1000L, "k" + i, "v" + i))
                        .get(10, TimeUnit.SECONDS);
                assertEquals(t0 + i * 1000L, md.timestamp(), "RecordMetadata.timestamp under CreateTime");
            }
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, 5, Map.of());
        for (int i = 0; i < 5; i++) {
            assertEquals(TimestampType.CREATE_TIME, got.get(i).timestampType());
            assertEquals(t0 + i * 1000L, got.get(i).timestamp());
        }
    }

    /**
     * LogAppendTime: the broker stamps the batch; the producer's ack and the
     * consumer both see the broker's time, not the one sent.
     */
    @Test
    void logAppendTimeIsTheBrokersTime() throws Exception {
        String topic = createTopic("ts-append", 1, Map.of("message.timestamp.type", "LogAppendTime"));
        long sent = System.currentTimeMillis() - 3_600_000L;
        long before = System.currentTimeMillis();
        List<RecordMetadata> mds = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4"))) {
            for (int i = 0; i < 3; i++) {
                mds.add(p.send(new ProducerRecord<>(topic, 0, sent, "k" + i, "v" + i)).get(10, TimeUnit.SECONDS));
            }
        }
        long after = System.currentTimeMillis();
        for (RecordMetadata md : mds) {
            assertTrue(md.timestamp() >= before - 1000 && md.timestamp() <= after + 1000,
                    "ack timestamp " + md.timestamp() + " is not the broker's append time in [" + before + ", " + after + "]");
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, 3, Map.of());
        for (int i = 0; i < 3; i++) {
            ConsumerRecord<String, String> r = got.get(i);
            assertEquals(TimestampType.LOG_APPEND_TIME, r.timestampType(), "record " + i);
            assertEquals(mds.get(i).timestamp(), r.timestamp(), "record " + i + ": fetched timestamp = acked one");
        }
    }
}
