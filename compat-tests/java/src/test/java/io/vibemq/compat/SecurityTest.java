package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import io.vibemq.harness.BrokerProcess;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java client over SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256, and
 * over SSL with a client certificate (mutual TLS): produce, consume in a
 * group, admin calls (SCRAM credentials, describeCluster answering with the
 * listener's own address); wrong credentials fail with the client's
 * authentication exceptions. Certificates are made with the JDK's keytool
 * in a temporary directory; the truststore is PEM (ssl.truststore.type=PEM).
 */
class SecurityTest {
    static final String ADMIN = "admin";
    static final String ADMIN_PASSWORD = "admin-secret";
    static final String PASS = "changeit";

    static Path dir;
    static BrokerProcess broker;

    @BeforeAll
    static void start() throws Exception {
        // This class configures the broker's listeners, certificates and
        // users itself, so it needs a broker it starts.
        Assumptions.assumeTrue(BrokerProcess.bootstrapOverride() == null,
                "SecurityTest starts its own broker with TLS and SASL listeners; skipped with -Dbootstrap.override");
        dir = Files.createTempDirectory("java-compat-tls-");
        makeCertificates();
        Path pw = dir.resolve("admin.password");
        Files.writeString(pw, ADMIN_PASSWORD + "\n");
        broker = BrokerProcess.start(
                "--listeners", "PLAINTEXT://{0},SASL_SSL://{1},SSL://{2}",
                "--ssl-cert-file", dir.resolve("server.pem").toString(),
                "--ssl-key-file", dir.resolve("server.key").toString(),
                "--ssl-client-ca-file", dir.resolve("ca.pem").toString(),
                "--ssl-client-auth", "requested",
                "--sasl-bootstrap-user", ADMIN, "--sasl-bootstrap-password-file", pw.toString(),
                "--connection-failed-authentication-delay", "10ms",
                "--group-initial-rebalance-delay", "0s");
    }

    @AfterAll
    static void stop() throws Exception {
        if (broker != null) {
            String problem = broker.stop();
            assertTrue(problem == null, problem);
        }
    }

    static void keytool(String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool " + cmd + ":\n" + out);
    }

    /** A CA; server (127.0.0.1, localhost) and client (CN=alice) certificates signed by it. */
    static void makeCertificates() throws Exception {
        String[] store = {"-storetype", "PKCS12", "-storepass", PASS, "-keypass", PASS};
        keytool(concat(new String[] {"-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=java-compat CA", "-ext", "bc:c", "-validity", "2", "-keystore", "ca.p12"}, store));
        keytool(concat(new String[] {"-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-file", "ca.pem"}, store));
        for (String[] leaf : new String[][] {
                {"server", "CN=localhost", "SAN=ip:127.0.0.1,dns:localhost", "EKU=serverAuth"},
                {"alice", "CN=alice,OU=eng,O=Example", "EKU=clientAuth", "KU=digitalSignature"}}) {
            String name = leaf[0];
            keytool(concat(new String[] {"-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1",
                    "-dname", leaf[1], "-validity", "2", "-keystore", name + ".p12"}, store));
            keytool(concat(new String[] {"-certreq", "-alias", name, "-keystore", name + ".p12", "-file", name + ".csr"}, store));
            keytool(concat(new String[] {"-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-infile", name + ".csr",
                    "-outfile", name + ".pem", "-validity", "2", "-ext", leaf[2], "-ext", leaf[3]}, store));
            keytool(concat(new String[] {"-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", name + ".p12"}, store));
            keytool(concat(new String[] {"-importcert", "-alias", name, "-file", name + ".pem", "-keystore", name + ".p12"}, store));
        }
        // mallory: a self-signed client certificate no CA of the broker vouches for.
        keytool(concat(new String[] {"-genkeypair", "-alias", "mallory", "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=mallory", "-validity", "2", "-keystore", "mallory.p12"}, store));
        // The broker reads PEM: the server's private key as PKCS#8.
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(dir.resolve("server.p12").toFile())) {
            ks.load(in, PASS.toCharArray());
        }
        PrivateKey key = (PrivateKey) ks.getKey("server", PASS.toCharArray());
        Files.writeString(dir.resolve("server.key"), "-----BEGIN PRIVATE KEY-----\n"
                + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(key.getEncoded())
                + "\n-----END PRIVATE KEY-----\n");
    }

    static String[] concat(String[] a, String[] b) {
        String[] out = new String[a.length + b.length];
        System.arraycopy(a, 0, out, 0, a.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    static Properties tls(String bootstrap, String protocol) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, protocol);
        p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
        p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, dir.resolve("ca.pem").toString());
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(CommonClientConfigs.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        return p;
    }

    static Properties scram(String mechanism, String user, String password) {
        Properties p = tls(broker.extraAddr(1), "SASL_SSL");
        p.put(SaslConfigs.SASL_MECHANISM, mechanism);
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        return p;
    }

    static Properties mtls() {
        return mtls(broker.extraAddr(2), "alice");
    }

    static Properties mtls(String bootstrap, String who) {
        Properties p = tls(bootstrap, "SSL");
        p.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PKCS12");
        p.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, dir.resolve(who + ".p12").toString());
        p.put(SslConfigs.SSL_KEYSTORE_PASSWORD_CONFIG, PASS);
        p.put(SslConfigs.SSL_KEY_PASSWORD_CONFIG, PASS);
        return p;
    }

    /** Creates a topic, produces 3 records, consumes them in a new group and checks describeCluster's address. */
    static void roundTrip(Properties base, String listener) throws Exception {
        String topic = "security-" + System.nanoTime();
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            List<Node> nodes = new ArrayList<>(admin.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertEquals(1, nodes.size());
            assertEquals(listener, nodes.get(0).host() + ":" + nodes.get(0).port(), "describeCluster must answer with the listener's address");
        }
        Properties pp = (Properties) base.clone();
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 3; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        Properties cp = (Properties) base.clone();
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-g");
        cp.put("group.protocol", "classic");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (got.size() < 3 && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
            c.commitSync();
        }
        assertEquals(List.of("v0", "v1", "v2"), got);
    }

    @Test
    void saslSslScram() throws Exception {
        try (Admin admin = Admin.create(scram("SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD))) {
            admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion("java", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "java-pw"),
                    new UserScramCredentialUpsertion("java", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "java-pw")))
                    .all().get(30, TimeUnit.SECONDS);
            Map<String, UserScramCredentialsDescription> d = admin.describeUserScramCredentials(List.of("java")).all().get(30, TimeUnit.SECONDS);
            assertEquals(2, d.get("java").credentialInfos().size());
        }
        roundTrip(scram("SCRAM-SHA-512", "java", "java-pw"), broker.extraAddr(1));
        roundTrip(scram("SCRAM-SHA-256", "java", "java-pw"), broker.extraAddr(1));
        try (Admin bad = Admin.create(scram("SCRAM-SHA-512", "java", "wrong"))) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> bad.listTopics().names().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
        }
    }

    @Test
    void mutualTls() throws Exception {
        roundTrip(mtls(), broker.extraAddr(2));
        // No client certificate is fine (requested), but an untrusted server is not.
        Properties noTrust = mtls();
        noTrust.remove(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG);
        noTrust.remove(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG);
        try (Admin bad = Admin.create(noTrust)) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> bad.listTopics().names().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SslAuthenticationException.class, e.getCause());
        }
    }

    /** ssl-client-auth required: alice's certificate works, mallory's (self-signed) fails the handshake. */
    @Test
    void mutualTlsRequired() throws Exception {
        try (BrokerProcess strict = BrokerProcess.start(
                "--listeners", "PLAINTEXT://{0},SSL://{1}",
                "--ssl-cert-file", dir.resolve("server.pem").toString(),
                "--ssl-key-file", dir.resolve("server.key").toString(),
                "--ssl-client-ca-file", dir.resolve("ca.pem").toString(),
                "--ssl-client-auth", "required",
                "--group-initial-rebalance-delay", "0s")) {
            roundTrip(mtls(strict.extraAddr(1), "alice"), strict.extraAddr(1));
            try (Admin bad = Admin.create(mtls(strict.extraAddr(1), "mallory"))) {
                ExecutionException e = assertThrows(ExecutionException.class, () -> bad.listTopics().names().get(30, TimeUnit.SECONDS));
                assertInstanceOf(SslAuthenticationException.class, e.getCause());
            }
        }
    }
}
