package io.vibemq.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * MirrorMaker 2 in dedicated mode, as Kafka's {@code connect-mirror-maker.sh
 * mm2.properties} runs it: {@code org.apache.kafka.connect.mirror.MirrorMaker}
 * in a separate JVM with this module's classpath (connect-mirror,
 * connect-runtime). Its stdout and stderr go to a log file whose tail a
 * failing test prints.
 */
final class MirrorMakerProcess implements AutoCloseable {
    static final int LOG_TAIL_BYTES = 48 << 10;

    private final Path dir;
    private final Path logFile;
    private final Map<String, String> props;
    private Process process;

    MirrorMakerProcess(Map<String, String> props) throws IOException {
        this.dir = Files.createTempDirectory("mm2-");
        this.logFile = dir.resolve("mm2.log");
        this.props = new TreeMap<>(props);
    }

    void start() throws IOException {
        Path propsFile = dir.resolve("mm2.properties");
        StringBuilder sb = new StringBuilder();
        props.forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        Files.writeString(propsFile, sb.toString(), StandardCharsets.UTF_8);
        String cp = System.getProperty("surefire.test.class.path", "");
        if (cp.isBlank()) {
            cp = System.getProperty("java.class.path");
        }
        java.net.URL log4j = MirrorMakerProcess.class.getResource("/worker-log4j2.properties");
        if (log4j == null) {
            throw new IllegalStateException("worker-log4j2.properties is not on the test classpath");
        }
        Path javaBin = Path.of(System.getProperty("java.home"), "bin", "java");
        List<String> cmd = new ArrayList<>(List.of(javaBin.toString(),
                "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dlog4j2.configurationFile=" + log4j,
                "-cp", cp,
                "org.apache.kafka.connect.mirror.MirrorMaker", propsFile.toString()));
        Files.writeString(logFile, "=== connect-compat: start MirrorMaker 2 with " + propsFile + "\n" + sb,
                StandardCharsets.UTF_8);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
        process = pb.start();
        Process p = process;
        // A test JVM that dies (surefire's timeout) takes MirrorMaker along.
        Runtime.getRuntime().addShutdownHook(new Thread(p::destroyForcibly));
    }

    boolean alive() {
        return process != null && process.isAlive();
    }

    /** Throws with the log tail when the process has exited. */
    void checkAlive() {
        if (process != null && !process.isAlive()) {
            throw new IllegalStateException("MirrorMaker 2 exited with code " + process.exitValue() + "\n" + logTail());
        }
    }

    String logTail() {
        try (RandomAccessFile f = new RandomAccessFile(logFile.toFile(), "r")) {
            long len = f.length();
            long from = Math.max(0, len - LOG_TAIL_BYTES);
            f.seek(from);
            byte[] buf = new byte[(int) (len - from)];
            f.readFully(buf);
            return new String(buf, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(cannot read MirrorMaker's log " + logFile + ": " + e + ")";
        }
    }

    Path logFile() {
        return logFile;
    }

    void deleteFiles() throws IOException {
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** SIGTERM (MirrorMaker's shutdown hook stops its herders), SIGKILL after 20 s. */
    @Override
    public void close() throws Exception {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(20, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
