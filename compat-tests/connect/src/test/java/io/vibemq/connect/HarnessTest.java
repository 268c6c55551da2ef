package io.vibemq.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.connect.mirror.DefaultReplicationPolicy;
import org.apache.kafka.connect.mirror.MirrorCheckpointConnector;
import org.apache.kafka.connect.mirror.MirrorMakerConfig;
import org.apache.kafka.connect.mirror.MirrorSourceConnector;
import org.apache.kafka.connect.mirror.SourceAndTarget;
import org.apache.kafka.connect.source.ConnectorTransactionBoundaries;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.junit.jupiter.api.Test;

/**
 * The harness and the connectors without a broker. CI runs this class
 * online first so that Maven fetches every plugin and test provider before
 * the offline (-o) run.
 */
class HarnessTest {

    @Test
    void missingBrokerBinaryIsExplained() {
        String old = System.getProperty("broker.bin");
        System.setProperty("broker.bin", "/nonexistent/dir/broker");
        try {
            IllegalStateException e = assertThrows(IllegalStateException.class, BrokerProcess::brokerBinary);
            assertTrue(e.getMessage().contains("/nonexistent/dir/broker"), e.getMessage());
        } finally {
            if (old == null) {
                System.clearProperty("broker.bin");
            } else {
                System.setProperty("broker.bin", old);
            }
        }
    }

    @Test
    void sourceSplitsPartitionsAcrossTasksAndSupportsExactlyOnce() {
        SeqSourceConnector c = new SeqSourceConnector();
        c.start(Map.of("topic", "t", "partitions", "3"));
        List<Map<String, String>> tasks = c.taskConfigs(2);
        assertEquals(2, tasks.size());
        assertEquals("0,2", tasks.get(0).get(SeqSourceConnector.ASSIGNED));
        assertEquals("1", tasks.get(1).get(SeqSourceConnector.ASSIGNED));
        assertEquals(ExactlyOnceSupport.SUPPORTED, c.exactlyOnceSupport(Map.of()));
        assertEquals(ConnectorTransactionBoundaries.SUPPORTED, c.canDefineTransactionBoundaries(Map.of()));
    }

    /**
     * connect-mirror ${kafka.version} runs against the pinned
     * connect-mirror-client (pom.xml: its own version is not served here):
     * MirrorMaker's config, the replication policy and the connectors load
     * and link.
     */
    @Test
    void mirrorMakerLinksAgainstThePinnedMirrorClient() {
        MirrorMakerConfig c = new MirrorMakerConfig(Map.of("clusters", "source, target",
                "source.bootstrap.servers", "127.0.0.1:1", "target.bootstrap.servers", "127.0.0.1:2"));
        List<SourceAndTarget> pairs = c.clusterPairs();
        assertEquals("[source->target, target->source]", pairs.toString());
        Map<String, String> worker = c.workerConfig(pairs.get(0));
        assertEquals("127.0.0.1:2", worker.get("bootstrap.servers"));
        assertEquals("mm2-configs.source.internal", worker.get("config.storage.topic"));
        Map<String, String> base = c.connectorBaseConfig(pairs.get(0), MirrorSourceConnector.class);
        assertEquals("source", base.get("source.cluster.alias"));
        assertEquals("source.orders", new DefaultReplicationPolicy().formatRemoteTopic("source", "orders"));
        String kafka = org.apache.kafka.common.utils.AppInfoParser.getVersion();
        assertEquals(kafka, new MirrorSourceConnector().version());
        assertEquals(kafka, new MirrorCheckpointConnector().version());
    }
}
