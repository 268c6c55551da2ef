package io.vibemq.connect;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** See {@link FileSinkConnector}. */
public class FileSinkTask extends SinkTask {
    private FileOutputStream out;

    @Override
    public void start(Map<String, String> props) {
        try {
            out = new FileOutputStream(props.get(FileSinkConnector.FILE), true);
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        if (records.isEmpty()) {
            return;
        }
        StringBuilder sb = new StringBuilder();
        for (SinkRecord r : records) {
            sb.append(r.topic()).append(' ').append(r.kafkaPartition()).append(' ').append(r.kafkaOffset())
                    .append(' ').append(r.key()).append(' ').append(r.value()).append('\n');
        }
        try {
            out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
            out.getFD().sync();
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
    }

    @Override
    public void stop() {
        try {
            if (out != null) {
                out.close();
            }
        } catch (IOException e) {
            throw new ConnectException(e);
        }
    }

    @Override
    public String version() {
        return "1";
    }
}
