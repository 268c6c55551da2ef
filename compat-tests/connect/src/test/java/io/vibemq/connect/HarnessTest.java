package io.vibemq.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import io.vibemq.harness.BrokerProcess;

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
}
