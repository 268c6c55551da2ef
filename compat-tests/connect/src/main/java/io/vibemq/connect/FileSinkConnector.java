package io.vibemq.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * Appends every record it gets to {@code file}, one line per record:
 * "topic partition offset key value". Several tasks append to the same
 * file (each line is one write to a file opened in append mode).
 */
public class FileSinkConnector extends SinkConnector {
    static final String FILE = "file";
    static final ConfigDef CONFIG = new ConfigDef()
            .define(FILE, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "file to append to");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return FileSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            configs.add(props);
        }
        return configs;
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
