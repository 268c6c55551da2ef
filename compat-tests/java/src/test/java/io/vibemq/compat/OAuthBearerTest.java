package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java client with SASL OAUTHBEARER (KIP-255) over SASL_PLAINTEXT: its
 * login callback handler ({@link SignedTokenHandler}) returns an RS256 JWT
 * signed in the test with a key whose public half the broker reads from a
 * PEM file. Produce, consume in a group and admin calls work; a token
 * signed by another key fails with SaslAuthenticationException.
 */
class OAuthBearerTest {
    static Path dir;
    static BrokerProcess broker;
    static KeyPair trusted;
    static KeyPair untrusted;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("java-compat-oauth-");
        KeyPairGenerator gen = KeyPairGenerator.getInstance("RSA");
        gen.initialize(2048);
        trusted = gen.generateKeyPair();
        untrusted = gen.generateKeyPair();
        Path pem = dir.resolve("idp.pem");
        Files.writeString(pem, "-----BEGIN PUBLIC KEY-----\n"
                + Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(trusted.getPublic().getEncoded())
                + "\n-----END PUBLIC KEY-----\n");
        broker = BrokerProcess.start(
                "--listeners", "PLAINTEXT://{0},SASL_PLAINTEXT://{1}",
                "--sasl-enabled-mechanisms", "OAUTHBEARER",
                "--sasl-oauthbearer-public-key-files", pem.toString(),
                "--sasl-oauthbearer-expected-audience", "broker",
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

    static Properties oauth(String signer) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, broker.extraAddr(1));
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "OAUTHBEARER");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required signer=\""
                + signer + "\";");
        p.put(SaslConfigs.SASL_LOGIN_CALLBACK_HANDLER_CLASS, SignedTokenHandler.class.getName());
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(CommonClientConfigs.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        return p;
    }

    @Test
    void signedToken() throws Exception {
        SecurityTest.roundTrip(oauth("trusted"), broker.extraAddr(1));
    }

    @Test
    void untrustedSignature() throws Exception {
        try (Admin bad = Admin.create(oauth("untrusted"))) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> bad.listTopics().names().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
        }
    }

    /** Signs an RS256 JWT (sub "java-svc", aud "broker", 10 minutes) with the key the JAAS option signer names. */
    public static class SignedTokenHandler implements AuthenticateCallbackHandler {
        private KeyPair key;

        @Override
        public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
            Object signer = entries.get(0).getOptions().get("signer");
            key = "trusted".equals(signer) ? trusted : untrusted;
        }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback cb : callbacks) {
                if (!(cb instanceof OAuthBearerTokenCallback tc)) {
                    throw new UnsupportedCallbackException(cb);
                }
                long now = System.currentTimeMillis();
                long exp = now + 600_000;
                String jwt = sign("{\"alg\":\"RS256\",\"typ\":\"JWT\"}",
                        "{\"sub\":\"java-svc\",\"aud\":\"broker\",\"iat\":" + now / 1000 + ",\"exp\":" + exp / 1000 + "}");
                tc.token(new OAuthBearerToken() {
                    public String value() { return jwt; }
                    public Set<String> scope() { return Set.of(); }
                    public long lifetimeMs() { return exp; }
                    public String principalName() { return "java-svc"; }
                    public Long startTimeMs() { return now; }
                });
            }
        }

        private String sign(String header, String payload) {
            Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
            String input = b64.encodeToString(header.getBytes(StandardCharsets.UTF_8)) + "."
                    + b64.encodeToString(payload.getBytes(StandardCharsets.UTF_8));
            try {
                Signature s = Signature.getInstance("SHA256withRSA");
                s.initSign(key.getPrivate());
                s.update(input.getBytes(StandardCharsets.US_ASCII));
                return input + "." + b64.encodeToString(s.sign());
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public void close() {}
    }
}
