package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

/**
 * Admin methods whose Kafka API the broker does not serve (it does not
 * advertise them in ApiVersions). Each test pins what a user sees today, so
 * a change (an API served, or a worse failure such as a timeout) is noticed.
 * Listed in compat-tests/FINDINGS.md.
 *
 * <p>Tagged {@code ours}: these are our answers, not Kafka's (Apache Kafka
 * serves most of these APIs), so the run against Apache Kafka excludes the
 * tag. Never run this class against a shared Kafka: unregisterBroker(1)
 * there unregisters its only broker, and every later createTopics then
 * times out waiting for a node.
 */
@Tag("ours")
class AdminGapsTest extends BrokerTestBase {
    static String topic;

    @BeforeAll
    static void topic() throws Exception {
        topic = createTopic("gaps", 1);
    }

    /** What the user gets: the cause's class and a fragment of its message. */
    record Pinned(Class<? extends Throwable> type, String message, Getter call) {
    }

    interface Getter {
        KafkaFuture<?> get() throws Exception;
    }

    static Pinned unsupported(String apiName, Getter call) {
        return new Pinned(org.apache.kafka.common.errors.UnsupportedVersionException.class, apiName, call);
    }

    static boolean clientAtLeast(int major, int minor) {
        String[] v = org.apache.kafka.common.utils.AppInfoParser.getVersion().split("[.-]");
        int ma = Integer.parseInt(v[0]);
        int mi = Integer.parseInt(v[1]);
        return ma > major || (ma == major && mi >= minor);
    }

    @TestFactory
    Stream<DynamicTest> unservedAdminMethods() {
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Pinned> cases = new LinkedHashMap<>();
        cases.put("alterReplicaLogDirs", unsupported("ALTER_REPLICA_LOG_DIRS",
                () -> admin.alterReplicaLogDirs(Map.of(new TopicPartitionReplica(topic, 0, 1), "/tmp")).all()));
        // describe/alterClientQuotas are served since issue 12 (ClientQuotasTest).
        // describe/create/deleteAcls are served since issue 12 (AclTest; without an
        // authorizer they answer SECURITY_DISABLED, as Kafka does: TestDifferential).
        // describe/alterUserScramCredentials are served since issue 12 (SecurityTest).
        cases.put("describeDelegationToken", unsupported("DESCRIBE_DELEGATION_TOKEN",
                () -> admin.describeDelegationToken().delegationTokens()));
        cases.put("createDelegationToken", unsupported("CREATE_DELEGATION_TOKEN",
                () -> admin.createDelegationToken().delegationToken()));
        cases.put("describeMetadataQuorum", unsupported("DESCRIBE_QUORUM", () -> admin.describeMetadataQuorum().quorumInfo()));
        cases.put("updateFeatures", unsupported("UPDATE_FEATURES",
                () -> admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)), new UpdateFeaturesOptions()).all()));
        // API 74 was renamed ListConfigResources in 4.1 (KIP-1142).
        cases.put("listClientMetricsResources", unsupported(
                clientAtLeast(4, 1) ? "LIST_CONFIG_RESOURCES" : "LIST_CLIENT_METRICS_RESOURCES",
                () -> admin.listClientMetricsResources().all()));
        // ListOffsets v9 (KIP-1005) is not served.
        cases.put("listOffsets(latestTiered)", new Pinned(org.apache.kafka.common.errors.UnsupportedVersionException.class, "",
                () -> admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latestTiered())).all()));
        // DescribeConfigs is served for TOPIC and BROKER resources only.
        org.apache.kafka.common.config.ConfigResource loggers =
                new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.BROKER_LOGGER, "1");
        cases.put("describeConfigs(BROKER_LOGGER)", new Pinned(org.apache.kafka.common.errors.InvalidRequestException.class,
                "config resource type 8 is not supported", () -> admin.describeConfigs(List.of(loggers)).all()));
        // Not sent to an external broker: on Apache Kafka it would unregister
        // its only broker (and break every later test on it).
        if (!broker.external()) {
            cases.put("unregisterBroker", unsupported("UNREGISTER_BROKER", () -> admin.unregisterBroker(1).all()));
        }
        return cases.entrySet().stream().map(c -> DynamicTest.dynamicTest(c.getKey(), () -> {
            Pinned want = c.getValue();
            Throwable got = causeOf(() -> want.call().get().get(20, TimeUnit.SECONDS));
            System.out.printf("GAP %s -> %s: %s%n", c.getKey(), got.getClass().getName(), got.getMessage());
            assertEquals(want.type(), got.getClass(), c.getKey() + ": " + got);
            assertTrue(String.valueOf(got.getMessage()).contains(want.message()),
                    c.getKey() + ": message " + got.getMessage() + " does not contain " + want.message());
        }));
    }
}
