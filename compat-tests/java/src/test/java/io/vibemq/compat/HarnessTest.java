package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.vibemq.harness.BrokerProcess;

import org.junit.jupiter.api.Test;

/**
 * The harness itself, without a broker: a missing binary fails with a
 * message that says how to build one. CI also runs this class online first
 * so that Maven fetches every plugin and test provider before the offline
 * (-o) run.
 */
class HarnessTest {

    @Test
    void missingBrokerBinaryIsExplained() {
        String old = System.getProperty("broker.bin");
        System.setProperty("broker.bin", "/nonexistent/dir/broker");
        try {
            IllegalStateException e = assertThrows(IllegalStateException.class, BrokerProcess::brokerBinary);
            assertTrue(e.getMessage().contains("/nonexistent/dir/broker") && e.getMessage().contains("go build -o broker ./cmd/broker"),
                    e.getMessage());
        } finally {
            if (old == null) {
                System.clearProperty("broker.bin");
            } else {
                System.setProperty("broker.bin", old);
            }
        }
    }
}
