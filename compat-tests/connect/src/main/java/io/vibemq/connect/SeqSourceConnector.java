package io.vibemq.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ConnectorTransactionBoundaries;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * Emits {@code records} records for each of {@code partitions} source
 * partitions {"source":"seq-P"}: key "seq-P", value the sequence number
 * 0..records-1, to {@code topic}. Source offsets {"seq":n} (the next number)
 * make a restarted or reassigned task resume where the last committed
 * offset says. Supports exactly-once source (KIP-618); transaction
 * boundaries are the worker's default (poll), or with {@code hold.ms} and
 * transaction.boundary=connector each poll's records stay in an open
 * transaction for hold.ms before the task requests its commit, so that a
 * test can kill a worker with a transaction open on the broker.
 */
public class SeqSourceConnector extends SourceConnector {
    static final String TOPIC = "topic";
    static final String PARTITIONS = "partitions";
    static final String RECORDS = "records";
    static final String BATCH = "batch";
    static final String POLL_MS = "poll.ms";
    static final String HOLD_MS = "hold.ms";
    static final String HOLD_FILE = "hold.file";
    static final String ASSIGNED = "assigned.partitions"; // task config: "0,1"

    static final ConfigDef CONFIG = new ConfigDef()
            .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "target topic")
            .define(PARTITIONS, ConfigDef.Type.INT, 2, ConfigDef.Importance.MEDIUM, "source partitions")
            .define(RECORDS, ConfigDef.Type.LONG, 1000L, ConfigDef.Importance.MEDIUM, "records per source partition")
            .define(BATCH, ConfigDef.Type.INT, 20, ConfigDef.Importance.LOW, "records per poll per source partition")
            .define(POLL_MS, ConfigDef.Type.LONG, 100L, ConfigDef.Importance.LOW, "pause between polls")
            .define(HOLD_MS, ConfigDef.Type.LONG, 0L, ConfigDef.Importance.LOW,
                    "with transaction.boundary=connector: keep each poll's transaction open this long after "
                            + "its records are sent, then request its commit")
            .define(HOLD_FILE, ConfigDef.Type.STRING, "", ConfigDef.Importance.LOW,
                    "while holding, the file <hold.file>.<source> exists (a test kills the worker then)");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props); // fail early on a bad config
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SeqSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        int partitions = Integer.parseInt(props.getOrDefault(PARTITIONS, "2"));
        int tasks = Math.max(1, Math.min(maxTasks, partitions));
        List<Map<String, String>> configs = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            StringBuilder assigned = new StringBuilder();
            for (int p = t; p < partitions; p += tasks) {
                if (assigned.length() > 0) {
                    assigned.append(',');
                }
                assigned.append(p);
            }
            Map<String, String> c = new HashMap<>(props);
            c.put(ASSIGNED, assigned.toString());
            configs.add(c);
        }
        return configs;
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    @Override
    public ConnectorTransactionBoundaries canDefineTransactionBoundaries(Map<String, String> connectorConfig) {
        return ConnectorTransactionBoundaries.SUPPORTED;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return "1";
    }
}
