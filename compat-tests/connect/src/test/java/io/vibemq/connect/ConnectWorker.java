package io.vibemq.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * One Kafka Connect distributed worker: Apache Kafka's own
 * {@code org.apache.kafka.connect.cli.ConnectDistributed worker.properties}
 * in a separate JVM, with this module's classpath (connect-runtime, the
 * connectors of src/main/java, found through their META-INF/services
 * manifests). Its stdout and stderr go to a log file whose tail a failing
 * test prints.
 */
final class ConnectWorker implements AutoCloseable {
    static final int LOG_TAIL_BYTES = 48 << 10;
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    final String name;
    final int restPort;
    private final Path dir;
    private final Path logFile;
    private final Map<String, String> props;
    private Process process;

    ConnectWorker(String name, int restPort, Map<String, String> props) throws IOException {
        this.name = name;
        this.restPort = restPort;
        this.dir = Files.createTempDirectory("connect-worker-" + name + "-");
        this.logFile = dir.resolve("worker.log");
        this.props = new TreeMap<>(props);
        this.props.put("listeners", "http://127.0.0.1:" + restPort);
        this.props.put("rest.advertised.host.name", "127.0.0.1");
        this.props.put("rest.advertised.port", Integer.toString(restPort));
    }

    /** The worker ID Connect reports in connector status: the advertised host:port. */
    String workerId() {
        return "127.0.0.1:" + restPort;
    }

    String url() {
        return "http://127.0.0.1:" + restPort;
    }

    /** Starts the JVM (again, after a kill: same properties, same port). */
    void start() throws IOException {
        Path propsFile = dir.resolve("worker.properties");
        StringBuilder sb = new StringBuilder();
        props.forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        Files.writeString(propsFile, sb.toString(), StandardCharsets.UTF_8);
        String cp = System.getProperty("surefire.test.class.path", "");
        if (cp.isBlank()) {
            cp = System.getProperty("java.class.path");
        }
        java.net.URL log4j = ConnectWorker.class.getResource("/worker-log4j2.properties");
        if (log4j == null) {
            throw new IllegalStateException("worker-log4j2.properties is not on the test classpath");
        }
        Path javaBin = Path.of(System.getProperty("java.home"), "bin", "java");
        List<String> cmd = new ArrayList<>(List.of(javaBin.toString(),
                "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dlog4j2.configurationFile=" + log4j,
                "-cp", cp,
                "org.apache.kafka.connect.cli.ConnectDistributed", propsFile.toString()));
        Files.writeString(logFile, "=== connect-compat: start worker " + name + " on " + url() + "\n",
                StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
        process = pb.start();
        Process p = process;
        // A test JVM that dies (surefire's timeout) takes its workers along.
        Runtime.getRuntime().addShutdownHook(new Thread(p::destroyForcibly));
    }

    /** Waits until GET /connectors answers 200 (REST up, the herder started). */
    void awaitReady(Duration timeout) throws Exception {
        Instant deadline = Instant.now().plus(timeout);
        String last = "not polled";
        while (Instant.now().isBefore(deadline)) {
            if (!process.isAlive()) {
                throw new IllegalStateException("worker " + name + " exited with code " + process.exitValue()
                        + "\n" + logTail());
            }
            try {
                HttpResponse<String> r = get("/connectors");
                if (r.statusCode() == 200) {
                    return;
                }
                last = r.statusCode() + " " + r.body();
            } catch (IOException e) {
                last = e.toString();
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException("worker " + name + " not ready after " + timeout + " (last: " + last + ")\n"
                + logTail());
    }

    HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return HTTP.send(HttpRequest.newBuilder(URI.create(url() + path)).timeout(Duration.ofSeconds(10)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> put(String path, String json) throws IOException, InterruptedException {
        return HTTP.send(HttpRequest.newBuilder(URI.create(url() + path)).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> post(String path, String json) throws IOException, InterruptedException {
        return HTTP.send(HttpRequest.newBuilder(URI.create(url() + path)).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    boolean alive() {
        return process != null && process.isAlive();
    }

    /** SIGKILL: no LeaveGroup, open transactions left open. */
    void kill() throws InterruptedException {
        if (process != null) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
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
            return "(cannot read worker log " + logFile + ": " + e + ")";
        }
    }

    String log() throws IOException {
        return Files.readString(logFile, StandardCharsets.UTF_8);
    }

    Path logFile() {
        return logFile;
    }

    /** Removes the worker's directory (properties and log). */
    void deleteFiles() throws IOException {
        try (java.util.stream.Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    @Override
    public void close() throws Exception {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(15, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
