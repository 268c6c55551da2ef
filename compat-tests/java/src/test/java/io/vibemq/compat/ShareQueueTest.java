package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * KafkaShareConsumer on a native queue (issue 10 part 3, DESIGN.md "Two
 * backings"): messages sent over HTTP are consumed by the Java share
 * consumer in implicit acknowledgement mode (each delivered once, the
 * queue empty afterwards), and in explicit mode a REJECT moves the message
 * to the queue's DLQ, shown by the HTTP API. Tagged "ours": Apache Kafka
 * has no native queues. Needs kafka-clients 4.1+.
 */
@Tag("ours")
@BrokerTestBase.BrokerArgs({"--group-share-record-lock-duration", "5s",
        "--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "500ms"})
class ShareQueueTest extends BrokerTestBase {

    static final HttpClient HTTP = HttpClient.newHttpClient();

    static String http(String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://" + broker.httpAddr() + path))
                .timeout(Duration.ofSeconds(15))
                .header("Content-Type", "application/json");
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        assertTrue(r.statusCode() / 100 == 2, method + " " + path + ": " + r.statusCode() + " " + r.body());
        return r.body();
    }

    static KafkaShareConsumer<String, String> shareConsumer(String group, String mode) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put("share.acknowledgement.mode", mode);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return new KafkaShareConsumer<>(p);
    }

    static void send(String queue, List<String> bodies) throws Exception {
        StringBuilder sb = new StringBuilder("{\"messages\":[");
        for (int i = 0; i < bodies.size(); i++) {
            sb.append(i == 0 ? "" : ",").append("{\"body\":\"").append(bodies.get(i)).append("\"}");
        }
        http("POST", "/v1/queues/" + queue + "/messages", sb.append("]}").toString());
    }

    @Test
    void implicitModeConsumesTheQueue() throws Exception {
        String queue = unique("jq");
        http("PUT", "/v1/queues/" + queue, "{}");
        List<String> bodies = new java.util.ArrayList<>();
        for (int i = 0; i < 100; i++) {
            bodies.add(String.format("m-%03d", i));
        }
        send(queue, bodies);
        Map<String, Integer> seen = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(unique("jq-group"), "implicit")) {
            c.subscribe(List.of(queue));
            Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
            while (seen.size() < bodies.size() && Instant.now().isBefore(deadline)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    seen.merge(r.value(), 1, Integer::sum);
                    assertEquals(queue, r.topic());
                }
            }
            c.commitSync(); // implicit mode: accepts what the last poll returned
        }
        assertEquals(bodies.size(), seen.size(), "distinct messages consumed");
        seen.forEach((v, n) -> assertEquals(1, n, v + " delivered " + n + " times"));
        String stats = http("GET", "/v1/queues/" + queue + "/stats", null);
        assertTrue(stats.contains("\"available\":0") && stats.contains("\"inflight\":0"), "queue after the consumer: " + stats);
    }

    @Test
    void explicitRejectGoesToTheDeadLetterQueue() throws Exception {
        String queue = unique("jqx");
        http("PUT", "/v1/queues/" + queue, "{}");
        send(queue, List.of("ok-1", "bad-1", "ok-2"));
        int accepted = 0;
        try (KafkaShareConsumer<String, String> c = shareConsumer(unique("jqx-group"), "explicit")) {
            c.subscribe(List.of(queue));
            Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
            int got = 0;
            while (got < 3 && Instant.now().isBefore(deadline)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    got++;
                    if (r.value().startsWith("bad-")) {
                        c.acknowledge(r, AcknowledgeType.REJECT);
                    } else {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        accepted++;
                    }
                }
                c.commitSync();
            }
        }
        assertEquals(2, accepted);
        String dlq = http("GET", "/v1/queues/" + queue + "/dlq", null);
        assertTrue(dlq.contains("\"body\":\"bad-1\"") && dlq.contains("\"reason\":\"rejected\"") && !dlq.contains("ok-"),
                "the DLQ holds the rejected message only: " + dlq);
        String stats = http("GET", "/v1/queues/" + queue + "/stats", null);
        assertTrue(stats.contains("\"available\":0") && stats.contains("\"inflight\":0"), "queue after the consumer: " + stats);
    }
}
