package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Admin methods for topics, configs, offsets, records and the cluster. */
class AdminTest extends BrokerTestBase {

    static ConfigResource topicResource(String topic) {
        return new ConfigResource(ConfigResource.Type.TOPIC, topic);
    }

    static Config describe(ConfigResource r) throws Exception {
        return admin.describeConfigs(List.of(r)).all().get(10, TimeUnit.SECONDS).get(r);
    }

    /**
     * describe(r) once it shows key = value, or after the deadline as it is
     * (the caller's assertions then fail with it). Our broker answers an
     * alter once it is applied; Apache Kafka answers once its controller
     * committed it, and its broker serves the new value a moment later.
     */
    static Config describeAfterAlter(ConfigResource r, String key, String value) throws Exception {
        java.time.Instant deadline = java.time.Instant.now().plus(DEADLINE);
        Config c = describe(r);
        while (c.get(key) != null && !value.equals(c.get(key).value()) && java.time.Instant.now().isBefore(deadline)) {
            Thread.sleep(100);
            c = describe(r);
        }
        return c;
    }

    /** createTopics (with configs; duplicate; bad config; validateOnly), listTopics, describeTopics, deleteTopics. */
    @Test
    void topicLifecycle() throws Exception {
        String name = unique("life");
        admin.createTopics(List.of(new NewTopic(name, 3, (short) 1)
                .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete")))).all().get(10, TimeUnit.SECONDS);
        awaitTopic(name, 3); // Apache Kafka serves a created topic a moment after answering
        assertTrue(admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(name));

        TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get(10, TimeUnit.SECONDS).get(name);
        assertEquals(3, d.partitions().size());
        assertFalse(d.isInternal());
        assertNotNull(d.topicId());
        assertFalse(Uuid.ZERO_UUID.equals(d.topicId()), "topic ID");
        d.partitions().forEach(p -> {
            assertEquals(1, p.leader().id(), "leader of " + p.partition());
            assertEquals(1, p.replicas().size());
            assertEquals(1, p.isr().size());
        });
        // by topic ID too
        TopicDescription byId = admin.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(d.topicId())))
                .allTopicIds().get(10, TimeUnit.SECONDS).get(d.topicId());
        assertEquals(name, byId.name());

        Throwable e = causeOf(() -> admin.createTopics(List.of(new NewTopic(name, 1, (short) 1))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(TopicExistsException.class, e);
        String bad = unique("bad-config");
        e = causeOf(() -> admin.createTopics(List.of(new NewTopic(bad, 1, (short) 1)
                .configs(Map.of("retention.ms", "not-a-number")))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidConfigurationException.class, e);
        String validateOnly = unique("validate-only");
        admin.createTopics(List.of(new NewTopic(validateOnly, 2, (short) 1)), new CreateTopicsOptions().validateOnly(true))
                .all().get(10, TimeUnit.SECONDS);
        // Optional.empty() partitions and replication factor: the broker's defaults (CreateTopics v4+).
        String defaults = unique("defaults");
        admin.createTopics(List.of(new NewTopic(defaults, java.util.Optional.empty(), java.util.Optional.empty())))
                .all().get(10, TimeUnit.SECONDS);
        awaitTopic(defaults, 1); // num.partitions 1 on both brokers
        Set<String> names = admin.listTopics().names().get(10, TimeUnit.SECONDS);
        assertFalse(names.contains(validateOnly), "validateOnly created the topic");
        assertFalse(names.contains(bad));
        assertTrue(names.contains(defaults));
        assertFalse(admin.listTopics().names().get(10, TimeUnit.SECONDS).stream().anyMatch(n -> n.startsWith("__")),
                "listTopics lists internal topics without listInternal");

        admin.deleteTopics(List.of(name)).all().get(10, TimeUnit.SECONDS);
        // DeleteTopics v6 by topic ID
        Uuid defaultsId = admin.describeTopics(List.of(defaults)).allTopicNames().get(10, TimeUnit.SECONDS).get(defaults).topicId();
        admin.deleteTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(defaultsId))).all().get(10, TimeUnit.SECONDS);
        waitFor(() -> {
            try {
                Set<String> now = admin.listTopics().names().get(10, TimeUnit.SECONDS);
                return !now.contains(name) && !now.contains(defaults);
            } catch (Exception ex) {
                throw new AssertionError(ex);
            }
        }, () -> "deleted topics still listed");
        e = causeOf(() -> admin.describeTopics(List.of(name)).allTopicNames().get(10, TimeUnit.SECONDS));
        assertInstanceOf(UnknownTopicOrPartitionException.class, e);
        e = causeOf(() -> admin.deleteTopics(List.of(name)).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(UnknownTopicOrPartitionException.class, e);
    }

    /** describeConfigs of a topic (set and default values, sources) and of the broker. */
    @Test
    void describeConfigs() throws Exception {
        String topic = createTopic("cfg-describe", 1, Map.of("retention.ms", "7200000"));
        Config c = describe(topicResource(topic));
        ConfigEntry retention = c.get("retention.ms");
        assertEquals("7200000", retention.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        ConfigEntry policy = c.get("cleanup.policy");
        assertNotNull(policy, "cleanup.policy must be listed even at its default (Kafka Connect checks it)");
        assertEquals("delete", policy.value());
        assertTrue(policy.isDefault() || policy.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        assertNotNull(c.get("max.message.bytes"));

        Config withDocs = admin.describeConfigs(List.of(topicResource(topic)),
                new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true))
                .all().get(10, TimeUnit.SECONDS).get(topicResource(topic));
        ConfigEntry r2 = withDocs.get("retention.ms");
        assertNotNull(r2.documentation(), "documentation of retention.ms");
        assertFalse(r2.synonyms().isEmpty(), "synonyms of retention.ms");
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, r2.synonyms().get(0).source());
        assertEquals(ConfigEntry.ConfigType.LONG, r2.type());

        ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Config b = describe(brokerRes);
        assertFalse(b.entries().isEmpty(), "broker configs");
        assertEquals("1", b.get("broker.id").value());
        assertEquals("1", b.get("num.partitions").value(), "num.partitions = --default-partitions");
        assertEquals(604_800_000L, effectiveRetentionMs(b), "the broker's retention = --log-retention (7 days)");
    }

    /**
     * The broker's effective log retention: log.retention.ms, else
     * log.retention.minutes, else log.retention.hours (Kafka's precedence).
     * We answer log.retention.ms; Apache Kafka leaves it null at its default
     * and answers log.retention.hours=168.
     */
    static long effectiveRetentionMs(Config broker) {
        ConfigEntry ms = broker.get("log.retention.ms");
        if (ms != null && ms.value() != null) {
            return Long.parseLong(ms.value());
        }
        ConfigEntry minutes = broker.get("log.retention.minutes");
        if (minutes != null && minutes.value() != null) {
            return Long.parseLong(minutes.value()) * 60_000L;
        }
        ConfigEntry hours = broker.get("log.retention.hours");
        assertNotNull(hours, "log.retention.ms, .minutes and .hours all unset");
        return Long.parseLong(hours.value()) * 3_600_000L;
    }

    /** incrementalAlterConfigs: SET, DELETE (back to the default), APPEND and SUBTRACT on a list. */
    @Test
    void incrementalAlterConfigs() throws Exception {
        String topic = createTopic("cfg-incr", 1);
        ConfigResource r = topicResource(topic);
        admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "60000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                .all().get(10, TimeUnit.SECONDS);
        Config c = describeAfterAlter(r, "retention.ms", "60000");
        assertEquals("60000", c.get("retention.ms").value());
        assertEquals(Set.of("delete", "compact"), Set.of(c.get("cleanup.policy").value().split(",")));

        admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT))))
                .all().get(10, TimeUnit.SECONDS);
        c = describeAfterAlter(r, "cleanup.policy", "compact");
        assertEquals("604800000", c.get("retention.ms").value(), "retention.ms back to the broker default (7 days)");
        assertEquals("compact", c.get("cleanup.policy").value());

        Throwable e = causeOf(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET))))
                .all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidConfigurationException.class, e);
        e = causeOf(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))))
                .all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidConfigurationException.class, e);
    }

    /**
     * The legacy, non-incremental Admin.alterConfigs (AlterConfigs API):
     * deprecated since 2.3 and removed from the 4.x client, so it runs with
     * the older line only (-Dkafka.version=3.9.1) and is skipped otherwise.
     */
    @Test
    void legacyAlterConfigs() throws Exception {
        Method m = null;
        for (Method cand : admin.getClass().getMethods()) {
            if (cand.getName().equals("alterConfigs") && cand.getParameterCount() == 1) {
                m = cand;
            }
        }
        Assumptions.assumeTrue(m != null, "Admin.alterConfigs is not in kafka-clients "
                + org.apache.kafka.common.utils.AppInfoParser.getVersion() + " (removed in 4.0)");
        String topic = createTopic("cfg-legacy", 1, Map.of("retention.ms", "60000", "segment.ms", "3600000"));
        ConfigResource r = topicResource(topic);
        Config replacement = new Config(List.of(new ConfigEntry("retention.ms", "120000")));
        Object result = m.invoke(admin, Map.of(r, replacement));
        ((KafkaFuture<?>) result.getClass().getMethod("all").invoke(result)).get(10, TimeUnit.SECONDS);
        Config c = describeAfterAlter(r, "retention.ms", "120000");
        assertEquals("120000", c.get("retention.ms").value());
        assertEquals("604800000", c.get("segment.ms").value(), "alterConfigs replaces the whole set: segment.ms back to default");
    }

    /** createPartitions: increase, validateOnly, decrease refused. */
    @Test
    void createPartitions() throws Exception {
        String topic = createTopic("parts", 1);
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get(10, TimeUnit.SECONDS);
        waitFor(() -> partitionCount(topic) == 3, () -> "describeTopics shows 3 partitions");
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            assertEquals(2, p.send(new ProducerRecord<>(topic, 2, "k", "v")).get(10, TimeUnit.SECONDS).partition());
        }
        Throwable e = causeOf(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(InvalidPartitionsException.class, e);
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5)),
                new org.apache.kafka.clients.admin.CreatePartitionsOptions().validateOnly(true)).all().get(10, TimeUnit.SECONDS);
        assertEquals(3, partitionCount(topic), "validateOnly added partitions");
    }

    static int partitionCount(String topic) {
        try {
            return admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic).partitions().size();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * listOffsets: earliest, latest, by timestamp, max timestamp (KIP-734,
     * timestamps out of order); then deleteRecords moves the earliest offset.
     */
    @Test
    void listOffsetsAndDeleteRecords() throws Exception {
        String topic = createTopic("offsets", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 100_000;
        long[] ts = {base + 1000, base + 5000, base + 3000, base + 2000, base + 4000};
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < ts.length; i++) {
                p.send(new ProducerRecord<>(topic, 0, ts[i], "k" + i, "v" + i)).get(10, TimeUnit.SECONDS);
            }
        }
        assertEquals(0, offset(tp, OffsetSpec.earliest()).offset());
        assertEquals(5, offset(tp, OffsetSpec.latest()).offset());
        ListOffsetsResultInfo byTs = offset(tp, OffsetSpec.forTimestamp(base + 2500));
        assertEquals(1, byTs.offset(), "first offset with timestamp >= base+2500");
        assertEquals(base + 5000, byTs.timestamp());
        assertEquals(-1, offset(tp, OffsetSpec.forTimestamp(base + 9000)).offset(), "no record at or after the timestamp");
        ListOffsetsResultInfo max = offset(tp, OffsetSpec.maxTimestamp());
        assertEquals(1, max.offset(), "max timestamp offset");
        assertEquals(base + 5000, max.timestamp());

        var deleted = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).lowWatermarks().get(tp).get(10, TimeUnit.SECONDS);
        assertEquals(3, deleted.lowWatermark());
        assertEquals(3, offset(tp, OffsetSpec.earliest()).offset());
        assertEquals(5, offset(tp, OffsetSpec.latest()).offset());
        // ListOffsets v8 (KIP-405): earliest local = the log start offset without tiered storage.
        assertEquals(3, offset(tp, OffsetSpec.earliestLocal()).offset(), "earliestLocal");
        Throwable e = causeOf(() -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(6))).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(OffsetOutOfRangeException.class, e, "deleteRecords past the high watermark");
        // -1 = up to the high watermark
        assertEquals(5, admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(tp)
                .get(10, TimeUnit.SECONDS).lowWatermark());
    }

    static ListOffsetsResultInfo offset(TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get(10, TimeUnit.SECONDS);
    }

    /** describeCluster: one node (id 1), which is the controller, and a cluster ID. */
    @Test
    void describeCluster() throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        Collection<Node> nodes = r.nodes().get(10, TimeUnit.SECONDS);
        assertEquals(1, nodes.size());
        Node n = nodes.iterator().next();
        assertEquals(1, n.id());
        assertEquals(broker.bootstrap(), n.host() + ":" + n.port());
        assertEquals(1, r.controller().get(10, TimeUnit.SECONDS).id());
        String id = r.clusterId().get(10, TimeUnit.SECONDS);
        assertNotNull(id);
        assertFalse(id.isEmpty());
    }

    /**
     * describeFeatures (ApiVersions v3+ features): group.version 1 (KIP-848
     * consumer groups) and share.version 1 (KIP-932 share groups) are
     * finalized, on both brokers; the supported ranges (0-1) are listed
     * from ApiVersions v4 (kafka-clients 4), as Kafka does (KIP-1022).
     */
    @Test
    void describeFeatures() throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get(10, TimeUnit.SECONDS);
        for (String name : List.of("group.version", "share.version")) {
            assertTrue(f.finalizedFeatures().containsKey(name), name + " not in the finalized features: " + f.finalizedFeatures());
            assertEquals((short) 1, f.finalizedFeatures().get(name).maxVersionLevel(), name);
            assertEquals((short) 1, f.finalizedFeatures().get(name).minVersionLevel(), name);
            if (AppInfoParser.getVersion().startsWith("4.")) {
                assertTrue(f.supportedFeatures().containsKey(name), name + " not in the supported features: " + f.supportedFeatures());
                assertEquals((short) 0, f.supportedFeatures().get(name).minVersion(), name);
                assertEquals((short) 1, f.supportedFeatures().get(name).maxVersion(), name);
            }
        }
    }

    /**
     * Ours only (DESIGN.md, Deviations from Apache Kafka): group.version and
     * share.version are the only features advertised; transaction.version
     * 2 (KIP-890) is not implemented, and there is no KRaft
     * metadata.version / kraft.version.
     */
    @Test
    @Tag("ours")
    void describeFeaturesOnlyGroupAndShareVersion() throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get(10, TimeUnit.SECONDS);
        assertEquals(Set.of("group.version", "share.version"), f.finalizedFeatures().keySet(), "finalized features");
        if (AppInfoParser.getVersion().startsWith("4.")) {
            assertEquals(Set.of("group.version", "share.version"), f.supportedFeatures().keySet(), "supported features");
        }
    }

}
