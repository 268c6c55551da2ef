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
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * KafkaShareConsumer on a native queue (issue 10 part 3, DESIGN.md "Two
 * backings"): messages sent over HTTP are consumed by the Java share
 * consumer in implicit acknowledgement mode (each delivered once, the
 * queue empty afterwards), and in explicit mode a REJECT moves the message
 * to the queue's DLQ, shown by the HTTP API; records a KafkaProducer
 * (idempotent, the 4.x default) produces into a queue are its messages,
 * received over HTTP with their key and headers and consumed by the share
 * consumer. Tagged "ours": Apache Kafka
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

    @Test
    void producedRecordsAreQueueMessages() throws Exception {
        String queue = unique("jqp");
        http("PUT", "/v1/queues/" + queue, "{}");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            ProducerRecord<String, String> first = new ProducerRecord<>(queue, "k-0", "p-0");
            first.headers().add("trace", "t-0".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            producer.send(first).get(30, java.util.concurrent.TimeUnit.SECONDS);
            for (int i = 1; i < 10; i++) {
                producer.send(new ProducerRecord<>(queue, "k-" + i, "p-" + i));
            }
            producer.flush();
        }
        // Over HTTP: the first message with its key and header.
        String got = http("POST", "/v1/queues/" + queue + "/receive", "{\"max_messages\":1,\"wait_ms\":5000}");
        assertTrue(got.contains("\"body\":\"p-0\"") && got.contains("\"key\":\"k-0\"") && got.contains("\"trace\":\"t-0\""),
                "HTTP receive of a produced record: " + got);
        // The share consumer gets the other nine, once each.
        Map<String, Integer> seen = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(unique("jqp-group"), "explicit")) {
            c.subscribe(List.of(queue));
            Instant deadline = Instant.now().plus(Duration.ofSeconds(60));
            while (seen.size() < 9 && Instant.now().isBefore(deadline)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    seen.merge(r.value(), 1, Integer::sum);
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
        assertEquals(9, seen.size(), "distinct produced messages consumed: " + seen);
        seen.forEach((v, n) -> assertEquals(1, n, v + " delivered " + n + " times"));
        assertTrue(!seen.containsKey("p-0"), "p-0 is leased over HTTP, never delivered to Kafka as well");
    }
}
