package io.vibemq.connect;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** See {@link SeqSourceConnector}. */
public class SeqSourceTask extends SourceTask {
    private String topic;
    private long records;
    private int batch;
    private long pollMs;
    private long holdMs;
    private String holdFile;
    private boolean open; // records sent since the last commit request (hold mode)
    private String[] sources;
    private long[] next;

    @Override
    public void start(Map<String, String> props) {
        topic = props.get(SeqSourceConnector.TOPIC);
        records = Long.parseLong(props.getOrDefault(SeqSourceConnector.RECORDS, "1000"));
        batch = Integer.parseInt(props.getOrDefault(SeqSourceConnector.BATCH, "20"));
        pollMs = Long.parseLong(props.getOrDefault(SeqSourceConnector.POLL_MS, "100"));
        holdMs = Long.parseLong(props.getOrDefault(SeqSourceConnector.HOLD_MS, "0"));
        holdFile = props.getOrDefault(SeqSourceConnector.HOLD_FILE, "");
        String[] assigned = props.get(SeqSourceConnector.ASSIGNED).split(",");
        sources = new String[assigned.length];
        next = new long[assigned.length];
        for (int i = 0; i < assigned.length; i++) {
            sources[i] = "seq-" + assigned[i].trim();
            // Resume after the last committed source offset ({"seq": next number}).
            Map<String, Object> off = context.offsetStorageReader().offset(Map.of("source", sources[i]));
            next[i] = off == null || off.get("seq") == null ? 0 : ((Number) off.get("seq")).longValue();
            System.out.println("SeqSourceTask " + sources[i] + " resumes at " + next[i]);
        }
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        Thread.sleep(pollMs);
        if (holdMs > 0 && open) {
            // Hold mode (transaction.boundary=connector): the last poll's
            // records are on the broker in an open transaction; keep it open,
            // then ask the worker to commit it.
            Path f = holdFile.isEmpty() ? null : Path.of(holdFile + "." + sources[0]);
            try {
                if (f != null) {
                    Files.writeString(f, "open");
                }
                Thread.sleep(holdMs);
                if (f != null) {
                    Files.deleteIfExists(f);
                }
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
            context.transactionContext().commitTransaction();
            open = false;
            return null;
        }
        List<SourceRecord> out = new ArrayList<>();
        for (int i = 0; i < sources.length; i++) {
            for (int b = 0; b < batch && next[i] < records; b++) {
                long seq = next[i]++;
                out.add(new SourceRecord(Map.of("source", sources[i]), Map.of("seq", seq + 1),
                        topic, null, Schema.STRING_SCHEMA, sources[i], Schema.STRING_SCHEMA, Long.toString(seq)));
            }
        }
        if (holdMs > 0 && !out.isEmpty()) {
            open = true;
        }
        return out.isEmpty() ? null : out;
    }

    @Override
    public void stop() {
    }

    @Override
    public String version() {
        return "1";
    }
}
