package io.vibemq.harness;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * One {@code broker serve} child process on free loopback ports with a fresh
 * temporary data directory, or an already running broker
 * ({@code -Dbootstrap.override=host:port}, e.g. Apache Kafka): the Java twin
 * of compat-tests/harness_test.go. Shared by compat-tests/java and
 * compat-tests/connect (each pom adds this directory as a test source with
 * build-helper-maven-plugin).
 * The binary comes from the system property {@code broker.bin} or the
 * environment variable {@code BROKER_BIN}; build it with
 * {@code go build -o broker ./cmd/broker}.
 */
public final class BrokerProcess implements AutoCloseable {
    public static final Duration READY_TIMEOUT = Duration.ofSeconds(60);
    public static final Duration STOP_TIMEOUT = Duration.ofSeconds(30);
    public static final int LOG_TAIL_BYTES = 64 << 10;

    private final Path dataDir;
    private final Path logFile;
    private final List<String> extraArgs;
    private String kafkaAddr;
    private String httpAddr;
    /** Further listener addresses: "{1}".."{3}" in a --listeners argument. */
    private final String[] extraAddrs = new String[3];
    private Process process;

    private BrokerProcess(List<String> extraArgs) throws IOException {
        this.dataDir = Files.createTempDirectory("compat-broker-data-");
        this.logFile = Files.createTempFile("compat-broker-", ".log");
        this.extraArgs = extraArgs;
    }

    /** An already running broker (e.g. Apache Kafka) at bootstrap: not started, not stopped. */
    private BrokerProcess(String bootstrap) {
        this.dataDir = null;
        this.logFile = null;
        this.extraArgs = List.of();
        this.kafkaAddr = bootstrap;
    }

    /** The system property bootstrap.override (host:port), or null: tests then use that broker instead of starting one. */
    public static String bootstrapOverride() {
        String b = System.getProperty("bootstrap.override", "");
        return b.isBlank() ? null : b.trim();
    }

    public static BrokerProcess external(String bootstrap) {
        return new BrokerProcess(bootstrap);
    }

    public boolean external() {
        return dataDir == null;
    }

    /** The broker binary, or an IllegalStateException that says how to get one. */
    public static Path brokerBinary() {
        String bin = System.getProperty("broker.bin", "");
        String from = "system property broker.bin";
        if (bin.isBlank()) {
            bin = System.getenv().getOrDefault("BROKER_BIN", "");
            from = "environment variable BROKER_BIN";
        }
        if (bin.isBlank()) {
            throw new IllegalStateException("no broker binary: build it with `go build -o broker ./cmd/broker` "
                    + "and pass -Dbroker.bin=/abs/path/broker (or set BROKER_BIN)");
        }
        Path p = Path.of(bin).toAbsolutePath();
        if (!Files.isRegularFile(p) || !Files.isExecutable(p)) {
            throw new IllegalStateException("broker binary " + p + " (from " + from
                    + ") does not exist or is not executable: build it with `go build -o broker ./cmd/broker`");
        }
        return p;
    }

    /** Starts a broker and waits until its Kafka port accepts and /readyz is 200. */
    public static BrokerProcess start(String... extraArgs) throws Exception {
        Path bin = brokerBinary(); // before creating any temporary directory
        BrokerProcess b = new BrokerProcess(List.of(extraArgs));
        // A port picked free can be taken before the broker binds it: retry then only.
        for (int attempt = 1; ; attempt++) {
            int kafkaPort = freePort();
            int httpPort = freePort();
            while (httpPort == kafkaPort) { // the kernel may hand out a just-closed port again
                httpPort = freePort();
            }
            b.kafkaAddr = "127.0.0.1:" + kafkaPort;
            b.httpAddr = "127.0.0.1:" + httpPort;
            for (int i = 0; i < b.extraAddrs.length; i++) {
                b.extraAddrs[i] = "127.0.0.1:" + freePort();
            }
            String failure = b.tryStart(bin);
            if (failure == null) {
                return b;
            }
            if (attempt == 3 || !b.logTail().contains("address already in use")) {
                String tail = b.logTail();
                b.close();
                throw new IllegalStateException("broker did not become ready: " + failure + "\nbroker log:\n" + tail);
            }
        }
    }

    /**
     * Starts n brokers of one cluster (issue 13): node IDs 1..n, the same
     * {@code --cluster-peers} with an inter-broker address on a free
     * loopback port each, extraArgs added to every one. Each is ready
     * (see {@link #start}) when this returns; whether the cluster has
     * formed (registrations, a controller) is the caller's to wait for.
     * On a failure the brokers already started are stopped.
     */
    public static List<BrokerProcess> startCluster(int n, String... extraArgs) throws Exception {
        List<String> peers = new ArrayList<>();
        for (int id = 1; id <= n; id++) {
            peers.add(id + "@127.0.0.1:" + freePort());
        }
        // Started at once: each is ready (serving, /readyz) before the
        // others exist, so nothing is gained by waiting in turn.
        List<CompletableFuture<BrokerProcess>> starting = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(n); // not the common pool: one thread on two cores
        for (int id = 1; id <= n; id++) {
            List<String> args = new ArrayList<>(List.of("--node-id", String.valueOf(id),
                    "--cluster-peers", String.join(",", peers)));
            args.addAll(List.of(extraArgs));
            starting.add(CompletableFuture.supplyAsync(() -> {
                try {
                    return start(args.toArray(new String[0]));
                } catch (Exception e) {
                    throw new CompletionException(e);
                }
            }, pool));
        }
        pool.shutdown();
        List<BrokerProcess> out = new ArrayList<>();
        Throwable failure = null;
        for (CompletableFuture<BrokerProcess> f : starting) {
            try {
                out.add(f.join());
            } catch (CompletionException e) {
                failure = failure == null ? e.getCause() : failure;
            }
        }
        if (failure != null) {
            for (BrokerProcess b : out) {
                b.stop();
            }
            throw new IllegalStateException("starting a cluster of " + n + ": " + failure.getMessage(), failure);
        }
        return out;
    }

    /** SIGKILL ({@code Process.destroyForcibly} on Linux), waiting for the exit; the data directory stays. */
    public void kill() throws InterruptedException {
        if (external() || process == null || !process.isAlive()) {
            return;
        }
        process.destroyForcibly();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the broker did not exit within 10 s of SIGKILL");
        }
    }

    /**
     * Starts a killed (or exited) broker again on the same data directory
     * and addresses, and waits until it is ready.
     */
    public void restart() throws Exception {
        if (external() || alive()) {
            throw new IllegalStateException("restart: the broker at " + kafkaAddr + " is running or external");
        }
        String failure = tryStart(brokerBinary());
        if (failure != null) {
            throw new IllegalStateException("broker did not become ready again: " + failure + "\nbroker log:\n" + logTail());
        }
    }

    private String tryStart(Path bin) throws Exception {
        // With --listeners (which replaces --kafka-addr), "{0}" is the
        // address bootstrap() returns and "{1}".."{3}" are extraAddr(i).
        boolean listeners = extraArgs.contains("--listeners");
        List<String> cmd = new ArrayList<>(List.of(bin.toString(), "serve",
                "--data-dir", dataDir.toString(),
                "--http-addr", httpAddr,
                "--log-level", "info",
                "--log-format", "json"));
        if (!listeners) {
            cmd.addAll(List.of("--kafka-addr", kafkaAddr));
        }
        for (String a : extraArgs) {
            a = a.replace("{0}", kafkaAddr);
            for (int i = 0; i < extraAddrs.length; i++) {
                a = a.replace("{" + (i + 1) + "}", extraAddrs[i]);
            }
            cmd.add(a);
        }
        Files.writeString(logFile, "=== compat-tests: start: " + String.join(" ", cmd) + "\n",
                StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.APPEND);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        // The broker refuses unknown BROKER_* variables (BROKER_BIN among them).
        pb.environment().keySet().removeIf(k -> k.startsWith("BROKER_"));
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
        process = pb.start();
        Instant deadline = Instant.now().plus(READY_TIMEOUT);
        String last = "not polled";
        while (Instant.now().isBefore(deadline)) {
            if (!process.isAlive()) {
                return "exited with code " + process.exitValue();
            }
            last = probe();
            if (last == null) {
                return null;
            }
            Thread.sleep(50);
        }
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        return "not ready after " + READY_TIMEOUT + " (last: " + last + ")";
    }

    /** null when ready, else what is not ready yet. */
    private String probe() {
        try (Socket s = new Socket()) {
            s.connect(hostPort(kafkaAddr), 1000);
        } catch (IOException e) {
            return "kafka port: " + e;
        }
        try {
            HttpURLConnection c = (HttpURLConnection) new URL("http://" + httpAddr + "/readyz").openConnection();
            c.setConnectTimeout(2000);
            c.setReadTimeout(2000);
            int code = c.getResponseCode();
            c.disconnect();
            return code == 200 ? null : "GET /readyz: " + code;
        } catch (IOException e) {
            return "GET /readyz: " + e;
        }
    }

    private static InetSocketAddress hostPort(String addr) {
        int i = addr.lastIndexOf(':');
        return new InetSocketAddress(addr.substring(0, i), Integer.parseInt(addr.substring(i + 1)));
    }

    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** host:port of the Kafka listener, for bootstrap.servers. */
    /** The HTTP listener (native API), host:port; null for an external broker. */
    public String httpAddr() {
        return httpAddr;
    }

    public String bootstrap() {
        return kafkaAddr;
    }

    /** The listener address "{i}" (1-3) of a --listeners argument. */
    public String extraAddr(int i) {
        return extraAddrs[i - 1];
    }

    public boolean alive() {
        return external() || process != null && process.isAlive();
    }

    /** The last 64 KiB of the broker's log. */
    public String logTail() {
        if (external()) {
            return "(external broker at " + kafkaAddr + ": no log here)";
        }
        try (RandomAccessFile f = new RandomAccessFile(logFile.toFile(), "r")) {
            long len = f.length();
            long from = Math.max(0, len - LOG_TAIL_BYTES);
            f.seek(from);
            byte[] buf = new byte[(int) (len - from)];
            f.readFully(buf);
            return new String(buf, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(cannot read broker log " + logFile + ": " + e + ")";
        }
    }

    @Override
    public void close() throws Exception {
        stop();
    }

    /**
     * SIGTERM, then SIGKILL after the stop timeout; removes the data
     * directory. Returns null after a clean exit (code 0 within the
     * timeout), else what went wrong.
     */
    public String stop() throws Exception {
        if (external()) {
            return null;
        }
        String problem = null;
        if (process != null && process.isAlive()) {
            process.destroy(); // SIGTERM
            if (!process.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                problem = "the broker did not exit within " + STOP_TIMEOUT + " of SIGTERM; killed it";
            } else if (process.exitValue() != 0) {
                problem = "the broker exited with code " + process.exitValue() + " after SIGTERM, want 0";
            }
        } else if (process != null) {
            problem = "the broker had already exited with code " + process.exitValue();
        }
        try (Stream<Path> walk = Files.walk(dataDir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
        return problem;
    }

    public void deleteLog() throws IOException {
        if (external()) {
            return;
        }
        Files.deleteIfExists(logFile);
    }

    public Path logFile() {
        return logFile;
    }
}
