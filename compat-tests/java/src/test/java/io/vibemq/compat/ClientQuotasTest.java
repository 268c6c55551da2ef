package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.junit.jupiter.api.Test;

/**
 * The Java Admin's client quota calls (what kafka-configs.sh --entity-type
 * users/clients does; issue 12 part 6): alterClientQuotas on a user and a
 * user with the default client-id, validateOnly storing nothing,
 * describeClientQuotas with exact, default and strict filters, Kafka's
 * InvalidRequestException for an unknown key, removal. Runs against both
 * brokers: the entities are unique to this run and removed at the end.
 */
class ClientQuotasTest extends BrokerTestBase {

    static ClientQuotaAlteration set(ClientQuotaEntity e, String key, Double value) {
        return new ClientQuotaAlteration(e, List.of(new ClientQuotaAlteration.Op(key, value)));
    }

    static ClientQuotaEntity entity(String user, String clientId, boolean withClient) {
        Map<String, String> m = new HashMap<>();
        m.put(ClientQuotaEntity.USER, user);
        if (withClient) {
            m.put(ClientQuotaEntity.CLIENT_ID, clientId);
        }
        return new ClientQuotaEntity(m);
    }

    /** Describes until the answer equals want: Apache Kafka's broker learns a change from its metadata log. */
    static Map<ClientQuotaEntity, Map<String, Double>> describeUntil(ClientQuotaFilter f, Map<ClientQuotaEntity, Map<String, Double>> want)
            throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (true) {
            Map<ClientQuotaEntity, Map<String, Double>> got = admin.describeClientQuotas(f).entities().get(10, TimeUnit.SECONDS);
            if (got.equals(want) || System.nanoTime() > deadline) {
                return got;
            }
            Thread.sleep(100);
        }
    }

    @Test
    void alterDescribeRemove() throws Exception {
        String user = unique("java-quota-user");
        ClientQuotaEntity userOnly = entity(user, null, false);
        ClientQuotaEntity userDefaultClient = entity(user, null, true);
        try {
            admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(userOnly, List.of(
                            new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                            new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0))),
                    set(userDefaultClient, "request_percentage", 50.0))).all().get(20, TimeUnit.SECONDS);
            admin.alterClientQuotas(List.of(set(entity(user + "-validate", null, false), "producer_byte_rate", 1.0)),
                    new AlterClientQuotasOptions().validateOnly(true)).all().get(20, TimeUnit.SECONDS);

            ClientQuotaFilter byUser = ClientQuotaFilter.contains(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
            Map<ClientQuotaEntity, Map<String, Double>> want = Map.of(
                    userOnly, Map.of("producer_byte_rate", 1048576.0, "consumer_byte_rate", 2097152.0),
                    userDefaultClient, Map.of("request_percentage", 50.0));
            assertEquals(want, describeUntil(byUser, want));

            ClientQuotaFilter strict = ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
            assertEquals(Map.of(userOnly, want.get(userOnly)), admin.describeClientQuotas(strict).entities().get(10, TimeUnit.SECONDS));
            ClientQuotaFilter defaultClient = ClientQuotaFilter.containsOnly(List.of(
                    ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user),
                    ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID)));
            assertEquals(Map.of(userDefaultClient, want.get(userDefaultClient)),
                    admin.describeClientQuotas(defaultClient).entities().get(10, TimeUnit.SECONDS));
            ClientQuotaFilter validated = ClientQuotaFilter.contains(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user + "-validate")));
            assertEquals(Map.of(), admin.describeClientQuotas(validated).entities().get(10, TimeUnit.SECONDS), "validateOnly stored nothing");

            ExecutionException bad = assertThrows(ExecutionException.class, () -> admin.alterClientQuotas(
                    List.of(set(entity(user + "-bad", null, false), "fetch_byte_rate", 1.0))).all().get(20, TimeUnit.SECONDS));
            assertInstanceOf(InvalidRequestException.class, bad.getCause());
            assertTrue(bad.getCause().getMessage().contains("Invalid configuration key fetch_byte_rate"), bad.getCause().getMessage());
            bad = assertThrows(ExecutionException.class, () -> admin.alterClientQuotas(
                    List.of(set(entity(user + "-bad", null, false), "producer_byte_rate", 1.5))).all().get(20, TimeUnit.SECONDS));
            assertInstanceOf(InvalidRequestException.class, bad.getCause());
            assertTrue(bad.getCause().getMessage().contains("producer_byte_rate cannot be a fractional value."), bad.getCause().getMessage());

            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(userOnly, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get(20, TimeUnit.SECONDS);
            Map<ClientQuotaEntity, Map<String, Double>> after = Map.of(
                    userOnly, Map.of("consumer_byte_rate", 2097152.0),
                    userDefaultClient, Map.of("request_percentage", 50.0));
            assertEquals(after, describeUntil(byUser, after));
        } finally {
            admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(userOnly, List.of(
                            new ClientQuotaAlteration.Op("producer_byte_rate", null),
                            new ClientQuotaAlteration.Op("consumer_byte_rate", null))),
                    new ClientQuotaAlteration(userDefaultClient, List.of(
                            new ClientQuotaAlteration.Op("request_percentage", null))))).all().get(20, TimeUnit.SECONDS);
        }
    }
}
