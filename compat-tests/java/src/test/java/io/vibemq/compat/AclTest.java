package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java Admin's ACL calls (what kafka-acls.sh does) against a broker with
 * authorizer-enabled over SASL_PLAINTEXT SCRAM-SHA-512: the admin (a super
 * user) creates, describes (ANY and MATCH filters) and deletes bindings;
 * alice cannot describe a topic until an ACL allows it, and may not create
 * ACLs herself (ClusterAuthorizationException).
 */
class AclTest {
    static final String ADMIN = "admin";
    static final String ADMIN_PASSWORD = "admin-secret";

    static Path dir;
    static BrokerProcess broker;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("java-compat-acl-");
        Path pw = dir.resolve("admin.password");
        Files.writeString(pw, ADMIN_PASSWORD + "\n");
        broker = BrokerProcess.start(
                "--listeners", "PLAINTEXT://{0},SASL_PLAINTEXT://{1}",
                "--authorizer-enabled", "--super-users", "User:" + ADMIN,
                "--sasl-bootstrap-user", ADMIN, "--sasl-bootstrap-password-file", pw.toString(),
                "--connection-failed-authentication-delay", "10ms");
    }

    @AfterAll
    static void stop() throws Exception {
        if (broker != null) {
            String problem = broker.stop();
            assertTrue(problem == null, problem);
        }
    }

    static Admin admin(String user, String password) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, broker.extraAddr(1));
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        p.put(CommonClientConfigs.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static AclBinding allow(ResourceType type, String name, PatternType pattern, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
                new AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW));
    }

    @Test
    void createDescribeDeleteAcls() throws Exception {
        try (Admin root = admin(ADMIN, ADMIN_PASSWORD)) {
            root.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("alice",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "alice-secret"))).all().get();
            root.createTopics(List.of(new NewTopic("acl-orders", 1, (short) 1))).all().get();
            try (Admin alice = admin("alice", "alice-secret")) {
                ExecutionException denied = assertThrows(ExecutionException.class,
                        () -> alice.describeTopics(List.of("acl-orders")).allTopicNames().get());
                assertInstanceOf(TopicAuthorizationException.class, denied.getCause());

                root.createAcls(List.of(
                        allow(ResourceType.TOPIC, "acl-", PatternType.PREFIXED, AclOperation.READ),
                        allow(ResourceType.GROUP, "billing", PatternType.LITERAL, AclOperation.READ))).all().get();
                Collection<AclBinding> all = root.describeAcls(AclBindingFilter.ANY).values().get();
                assertEquals(2, all.size(), all.toString());
                AclBindingFilter match = new AclBindingFilter(
                        new ResourcePatternFilter(ResourceType.TOPIC, "acl-orders", PatternType.MATCH),
                        AccessControlEntryFilter.ANY);
                assertEquals(Set.of(allow(ResourceType.TOPIC, "acl-", PatternType.PREFIXED, AclOperation.READ)),
                        Set.copyOf(root.describeAcls(match).values().get()));

                // READ implies DESCRIBE.
                assertEquals(1, alice.describeTopics(List.of("acl-orders")).allTopicNames().get().size());

                ExecutionException notAdmin = assertThrows(ExecutionException.class, () -> alice.createAcls(List.of(
                        allow(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.ALL))).all().get());
                assertInstanceOf(ClusterAuthorizationException.class, notAdmin.getCause());

                Collection<AclBinding> deleted = root.deleteAcls(List.of(new AclBindingFilter(
                        ResourcePatternFilter.ANY, new AccessControlEntryFilter("User:alice", null, AclOperation.ANY,
                                AclPermissionType.ANY)))).all().get();
                assertEquals(2, deleted.size(), deleted.toString());
                assertEquals(0, root.describeAcls(AclBindingFilter.ANY).values().get().size());
                denied = assertThrows(ExecutionException.class,
                        () -> alice.describeTopics(List.of("acl-orders")).allTopicNames().get());
                assertInstanceOf(TopicAuthorizationException.class, denied.getCause());
            }
        }
    }
}
