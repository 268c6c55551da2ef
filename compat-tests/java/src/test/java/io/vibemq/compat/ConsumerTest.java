package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.junit.jupiter.api.Test;

/** Consumer calls outside group management, and producer error mapping. */
class ConsumerTest extends BrokerTestBase {

    /** beginningOffsets, endOffsets, offsetsForTimes, seek, and auto.offset.reset=none after deleteRecords. */
    @Test
    void offsetLookupsSeekAndOutOfRange() throws Exception {
        String topic = createTopic("lookups", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 50_000;
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k" + i, "v" + i));
            }
        }
        try (KafkaConsumer<String, String> c = consumer(null, Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            assertEquals(Map.of(tp, 0L), c.beginningOffsets(List.of(tp)));
            assertEquals(Map.of(tp, 10L), c.endOffsets(List.of(tp)));
            Map<TopicPartition, OffsetAndTimestamp> byTime = c.offsetsForTimes(Map.of(tp, base + 4500));
            assertEquals(5, byTime.get(tp).offset());
            assertEquals(base + 5000, byTime.get(tp).timestamp());
            assertNull(c.offsetsForTimes(Map.of(tp, base + 60_000)).get(tp), "no record at or after the time");
            c.assign(List.of(tp));
            c.seek(tp, 7);
            List<ConsumerRecord<String, String>> got = pollUntil(c, 3);
            assertEquals(List.of(7L, 8L, 9L), got.stream().map(ConsumerRecord::offset).toList());

            admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(5))).all().get(10, TimeUnit.SECONDS);
            assertEquals(Map.of(tp, 5L), c.beginningOffsets(List.of(tp)));
            c.seek(tp, 2);
            OffsetOutOfRangeException e = assertThrows(OffsetOutOfRangeException.class, () -> {
                for (int i = 0; i < 50; i++) {
                    c.poll(Duration.ofMillis(100));
                }
            }, "fetch below the log start with auto.offset.reset=none");
            assertEquals(Map.of(tp, 2L), e.offsetOutOfRangePartitions());
        }
    }

    /** subscribe(Pattern) with a group finds matching topics, including one created later. */
    @Test
    void patternSubscription() throws Exception {
        String prefix = unique("pat");
        String t1 = prefix + "-a";
        admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(t1, 1, (short) 1))).all().get(10, TimeUnit.SECONDS);
        try (KafkaConsumer<String, String> c = consumer(unique("pat"), Map.of(ConsumerConfig.METADATA_MAX_AGE_CONFIG, 500))) {
            c.subscribe(Pattern.compile(Pattern.quote(prefix) + "-.*"));
            ConsumerGroupTest.pollAll(List.of(c), () -> c.assignment().size() == 1, "assignment of " + t1);
            String t2 = prefix + "-b";
            admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(t2, 2, (short) 1))).all().get(10, TimeUnit.SECONDS);
            ConsumerGroupTest.pollAll(List.of(c), () -> c.assignment().size() == 3, "assignment after " + t2 + " was created");
            assertEquals(Set.of(t1, t2), c.subscription());
        }
    }

    /**
     * A record larger than the topic's max.message.bytes is refused with
     * RecordTooLargeException (MESSAGE_TOO_LARGE), not retried.
     */
    @Test
    void recordLargerThanMaxMessageBytes() throws Exception {
        String topic = createTopic("too-large", 1, Map.of("max.message.bytes", "1024"));
        try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"))) {
            Throwable e = causeOf(() -> p.send(new ProducerRecord<>(topic, 0, "k", "x".repeat(4000))).get(20, TimeUnit.SECONDS));
            assertInstanceOf(RecordTooLargeException.class, e);
            p.send(new ProducerRecord<>(topic, 0, "k", "small")).get(10, TimeUnit.SECONDS);
        }
        assertEquals(1, readAll(topic, 1, Map.of()).size());
    }

    /** acks=0 and acks=1 producers: records arrive (acks=0 reports no offset). */
    @Test
    void acksZeroAndOne() throws Exception {
        String topic = createTopic("acks", 1);
        try (KafkaProducer<String, String> p0 = producer(Map.of(ProducerConfig.ACKS_CONFIG, "0",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false));
             KafkaProducer<String, String> p1 = producer(Map.of(ProducerConfig.ACKS_CONFIG, "1",
                     ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false))) {
            assertEquals(-1, p0.send(new ProducerRecord<>(topic, 0, "k", "acks0")).get(10, TimeUnit.SECONDS).offset());
            p0.flush();
            waitFor(() -> endOffset(topic) == 1, () -> "acks=0 record appended");
            assertEquals(1, p1.send(new ProducerRecord<>(topic, 0, "k", "acks1")).get(10, TimeUnit.SECONDS).offset());
        }
        assertEquals(List.of("acks0", "acks1"), readAll(topic, 2, Map.of()).stream().map(ConsumerRecord::value).toList());
    }

    static long endOffset(String topic) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try {
            return admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED))
                    .partitionResult(tp).get(10, TimeUnit.SECONDS).offset();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * A 900 KB record (under the 1 MiB default max.message.bytes) is produced
     * and consumed by a consumer whose fetch limits are far smaller: the
     * first batch is returned whole anyway (KIP-74).
     */
    @Test
    void largeRecordWithSmallFetchLimits() throws Exception {
        String topic = createTopic("large", 1);
        String big = "b".repeat(900 * 1024);
        try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"))) {
            p.send(new ProducerRecord<>(topic, 0, "big", big)).get(20, TimeUnit.SECONDS);
            p.send(new ProducerRecord<>(topic, 0, "small", "s")).get(20, TimeUnit.SECONDS);
        }
        List<ConsumerRecord<String, String>> got = readAll(topic, 2, Map.of(
                ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1024,
                ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 2048));
        assertEquals(2, got.size());
        assertEquals(big, got.get(0).value());
        assertEquals("s", got.get(1).value());
    }

    /**
     * The producer's Metadata request auto-creates an unknown topic (broker
     * auto-create-topics, default partitions); a consumer with
     * allow.auto.create.topics=false does not create one.
     */
    @Test
    void autoCreateFromProducerNotFromConsumer() throws Exception {
        String produced = unique("auto-p");
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            assertEquals(0, p.send(new ProducerRecord<>(produced, "k", "v")).get(20, TimeUnit.SECONDS).offset());
        }
        assertEquals(1, admin.describeTopics(List.of(produced)).allTopicNames().get(10, TimeUnit.SECONDS)
                .get(produced).partitions().size(), "default-partitions");
        String notCreated = unique("auto-c");
        try (KafkaConsumer<String, String> c = consumer(unique("auto-c"), Map.of(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false))) {
            c.subscribe(List.of(notCreated));
            for (int i = 0; i < 5; i++) {
                c.poll(Duration.ofMillis(100));
            }
            assertEquals(Set.of(), c.assignment());
        }
        assertTrue(!admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(notCreated),
                "a consumer with allow.auto.create.topics=false created " + notCreated);
    }
}
