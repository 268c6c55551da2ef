package io.vibemq.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.junit.jupiter.api.Test;

/** The classic group protocol from the Java consumer, and the consumer group Admin methods. */
class ConsumerGroupTest extends BrokerTestBase {

    /** Records every callback of the rebalance listener. */
    static final class Recorder implements ConsumerRebalanceListener {
        final List<Set<TopicPartition>> revoked = new ArrayList<>();
        final List<Set<TopicPartition>> assigned = new ArrayList<>();
        final List<Set<TopicPartition>> lost = new ArrayList<>();

        @Override
        public synchronized void onPartitionsRevoked(Collection<TopicPartition> ps) {
            if (!ps.isEmpty()) {
                revoked.add(new HashSet<>(ps));
            }
        }

        @Override
        public synchronized void onPartitionsAssigned(Collection<TopicPartition> ps) {
            assigned.add(new HashSet<>(ps));
        }

        @Override
        public synchronized void onPartitionsLost(Collection<TopicPartition> ps) {
            lost.add(new HashSet<>(ps));
        }
    }

    static Map<String, Object> groupOverrides(String assignor, String instanceId) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 300);
        m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
        if (instanceId != null) {
            m.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        return m;
    }

    /** Polls every consumer in turn (one thread, short polls) into out until cond holds. */
    static void pollAll(List<KafkaConsumer<String, String>> cs, List<ConsumerRecord<String, String>> out,
            java.util.function.BooleanSupplier cond, String what) {
        Instant deadline = Instant.now().plus(DEADLINE);
        while (!cond.getAsBoolean()) {
            if (Instant.now().isAfter(deadline)) {
                throw new AssertionError("not within " + DEADLINE + ": " + what + "; assignments "
                        + cs.stream().map(c -> c.assignment().toString()).collect(Collectors.joining(" | ")));
            }
            for (KafkaConsumer<String, String> c : cs) {
                c.poll(Duration.ofMillis(100)).forEach(out::add);
            }
        }
    }

    static void pollAll(List<KafkaConsumer<String, String>> cs, java.util.function.BooleanSupplier cond, String what) {
        pollAll(cs, new ArrayList<>(), cond, what);
    }

    static void produce(String topic, int n) throws Exception {
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            p.flush();
        }
    }

    static Set<TopicPartition> partitions(String topic, int n) {
        Set<TopicPartition> s = new HashSet<>();
        for (int i = 0; i < n; i++) {
            s.add(new TopicPartition(topic, i));
        }
        return s;
    }

    /** Consumes n records across cs, commits, and asserts each value was seen exactly once. */
    static void consumeOnce(List<KafkaConsumer<String, String>> cs, int n) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        pollAll(cs, got, () -> got.size() >= n, n + " records");
        for (KafkaConsumer<String, String> c : cs) {
            c.poll(Duration.ofMillis(200)).forEach(got::add);
            c.commitSync(Duration.ofSeconds(10));
        }
        Set<String> values = got.stream().map(ConsumerRecord::value).collect(Collectors.toSet());
        assertEquals(n, got.size(), "records consumed (duplicates?)");
        assertEquals(n, values.size());
    }

    /**
     * Two members, eager RangeAssignor: b's join makes a give up all four
     * partitions (eager), then 2 + 2; 200 records each consumed once.
     */
    @Test
    void eagerRangeAssignor() throws Exception {
        String topic = createTopic("eager", 4);
        String group = unique("eager");
        Recorder ra = new Recorder();
        try (KafkaConsumer<String, String> a = consumer(group, groupOverrides(RangeAssignor.class.getName(), null));
             KafkaConsumer<String, String> b = consumer(group, groupOverrides(RangeAssignor.class.getName(), null))) {
            a.subscribe(List.of(topic), ra);
            pollAll(List.of(a), () -> a.assignment().size() == 4, "a owns all 4 partitions");
            int gen1 = a.groupMetadata().generationId();
            b.subscribe(List.of(topic), new Recorder());
            pollAll(List.of(a, b), () -> a.assignment().size() == 2 && b.assignment().size() == 2, "2 + 2 after b joined");
            assertEquals(List.of(partitions(topic, 4)), ra.revoked, "eager: a gives up all 4 partitions once");
            Set<TopicPartition> union = new HashSet<>(a.assignment());
            union.addAll(b.assignment());
            assertEquals(partitions(topic, 4), union);
            assertEquals(a.groupMetadata().generationId(), b.groupMetadata().generationId());
            assertTrue(a.groupMetadata().generationId() > gen1, "new generation after the rebalance");

            produce(topic, 200);
            consumeOnce(List.of(a, b), 200);

            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(10, TimeUnit.SECONDS);
            assertEquals(ConsumerGroupState.STABLE, d.state());
            assertEquals("range", d.partitionAssignor());
            assertEquals(2, d.members().size());
            Set<TopicPartition> described = new HashSet<>();
            d.members().forEach(m -> described.addAll(m.assignment().topicPartitions()));
            assertEquals(partitions(topic, 4), described, "describeConsumerGroups assignments");
        }
    }

    /**
     * Cooperative-sticky: b's join revokes only the two partitions that move;
     * a keeps the other two throughout (two rebalances, KIP-429).
     */
    @Test
    void cooperativeStickyAssignor() throws Exception {
        String topic = createTopic("coop", 4);
        String group = unique("coop");
        Recorder ra = new Recorder();
        try (KafkaConsumer<String, String> a = consumer(group, groupOverrides(CooperativeStickyAssignor.class.getName(), null));
             KafkaConsumer<String, String> b = consumer(group, groupOverrides(CooperativeStickyAssignor.class.getName(), null))) {
            a.subscribe(List.of(topic), ra);
            pollAll(List.of(a), () -> a.assignment().size() == 4, "a owns all 4 partitions");
            Set<TopicPartition> kept = new HashSet<>(partitions(topic, 4));
            b.subscribe(List.of(topic), new Recorder());
            pollAll(List.of(a, b), () -> a.assignment().size() == 2 && b.assignment().size() == 2, "2 + 2 after b joined");
            assertEquals(1, ra.revoked.size(), "a revoked once: " + ra.revoked);
            assertEquals(2, ra.revoked.get(0).size(), "cooperative: a revokes only the 2 partitions that move: " + ra.revoked);
            kept.removeAll(ra.revoked.get(0));
            assertEquals(kept, a.assignment(), "a keeps the others");
            assertTrue(ra.lost.isEmpty(), "no partitions lost: " + ra.lost);

            produce(topic, 200);
            consumeOnce(List.of(a, b), 200);
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(10, TimeUnit.SECONDS);
            assertEquals("cooperative-sticky", d.partitionAssignor());
        }
    }

    /**
     * Static membership (KIP-345): a member with group.instance.id that
     * restarts within the session timeout gets its partitions back in the
     * same generation, without a rebalance; removeMembersFromConsumerGroup
     * then removes it by instance ID and the other member takes over.
     */
    @Test
    void staticMembershipRejoinWithoutRebalance() throws Exception {
        String topic = createTopic("static", 4);
        String group = unique("static");
        String assignor = RangeAssignor.class.getName();
        Recorder ra = new Recorder();
        try (KafkaConsumer<String, String> a = consumer(group, groupOverrides(assignor, "inst-a"))) {
            a.subscribe(List.of(topic), ra);
            Set<TopicPartition> bOwned;
            int gen;
            try (KafkaConsumer<String, String> b = consumer(group, groupOverrides(assignor, "inst-b"))) {
                b.subscribe(List.of(topic));
                pollAll(List.of(a, b), () -> a.assignment().size() == 2 && b.assignment().size() == 2, "2 + 2");
                bOwned = new HashSet<>(b.assignment());
                gen = a.groupMetadata().generationId();
                assertEquals(gen, b.groupMetadata().generationId());
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                        .get(10, TimeUnit.SECONDS);
                assertEquals(Set.of("inst-a", "inst-b"), d.members().stream()
                        .map(m -> m.groupInstanceId().orElse("none")).collect(Collectors.toSet()));
            } // a static member's close sends no LeaveGroup: the group keeps its slot
            int callbacks = ra.assigned.size();
            try (KafkaConsumer<String, String> b2 = consumer(group, groupOverrides(assignor, "inst-b"))) {
                b2.subscribe(List.of(topic));
                pollAll(List.of(a, b2), () -> !b2.assignment().isEmpty(), "b restarted gets partitions");
                assertEquals(bOwned, b2.assignment(), "the restarted static member gets its old partitions");
                assertEquals(gen, b2.groupMetadata().generationId(), "no new generation: no rebalance");
                // a heartbeats every 300 ms; a rebalance would reach it within a few polls.
                for (int i = 0; i < 10; i++) {
                    a.poll(Duration.ofMillis(100));
                }
                assertEquals(gen, a.groupMetadata().generationId(), "a saw a rebalance");
                assertEquals(callbacks, ra.assigned.size(), "a's listener ran again: a rebalance happened");
            }
            // b2 closed without leaving: remove it by instance ID; a takes all 4.
            admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove("inst-b")))).all().get(10, TimeUnit.SECONDS);
            pollAll(List.of(a), () -> a.assignment().size() == 4, "a owns all 4 after inst-b was removed");
            int gen2 = a.groupMetadata().generationId();
            assertTrue(gen2 > gen);
            // No members named: remove every member (KIP-571); a rejoins in a new generation.
            admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions())
                    .all().get(10, TimeUnit.SECONDS);
            pollAll(List.of(a), () -> a.groupMetadata().generationId() > gen2 && a.assignment().size() == 4,
                    "a rejoins after removeMembersFromConsumerGroup(all)");
        }
    }

    /**
     * listConsumerGroups, describeConsumerGroups, listConsumerGroupOffsets,
     * alterConsumerGroupOffsets, deleteConsumerGroupOffsets,
     * deleteConsumerGroups on an empty and a non-empty group.
     */
    @Test
    void consumerGroupAdmin() throws Exception {
        String topic = createTopic("grp-admin", 2);
        String group = unique("grp-admin");
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k", "v" + i));
            }
        }
        try (KafkaConsumer<String, String> c = consumer(group, groupOverrides(RangeAssignor.class.getName(), null))) {
            c.subscribe(List.of(topic));
            pollAll(List.of(c), () -> c.assignment().size() == 2, "assignment");
            c.commitSync(Map.of(tp0, new OffsetAndMetadata(5, "meta0"), tp1, new OffsetAndMetadata(3)));

            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get(10, TimeUnit.SECONDS);
            ConsumerGroupListing l = listed.stream().filter(g -> g.groupId().equals(group)).findFirst()
                    .orElseThrow(() -> new AssertionError(group + " not listed: " + listed));
            assertFalse(l.isSimpleConsumerGroup());
            assertEquals(ConsumerGroupState.STABLE, l.state().orElseThrow());

            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(10, TimeUnit.SECONDS);
            assertEquals(1, d.members().size());
            MemberDescription m = d.members().iterator().next();
            assertEquals(Set.of(tp0, tp1), m.assignment().topicPartitions());
            assertEquals(1, d.coordinator().id());

            // Offsets of a group with members cannot be altered or the group deleted.
            Throwable e = causeOf(() -> admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(1)))
                    .all().get(10, TimeUnit.SECONDS));
            assertInstanceOf(UnknownMemberIdException.class, e, "alter offsets of an active group: " + e);
            e = causeOf(() -> admin.deleteConsumerGroups(List.of(group)).all().get(10, TimeUnit.SECONDS));
            assertInstanceOf(GroupNotEmptyException.class, e);
            e = causeOf(() -> admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all().get(10, TimeUnit.SECONDS));
            assertInstanceOf(org.apache.kafka.common.errors.GroupSubscribedToTopicException.class, e,
                    "deleting offsets of a topic the active group subscribes to");
        }
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        assertEquals(5, offs.get(tp0).offset());
        assertEquals("meta0", offs.get(tp0).metadata());
        assertEquals(3, offs.get(tp1).offset());
        waitFor(() -> describeState(group) == ConsumerGroupState.EMPTY, () -> "group empty after the member left");

        admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(1), tp1, new OffsetAndMetadata(2)))
                .all().get(10, TimeUnit.SECONDS);
        offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        assertEquals(1, offs.get(tp0).offset());
        assertEquals(2, offs.get(tp1).offset());

        admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all().get(10, TimeUnit.SECONDS);
        offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        assertEquals(1, offs.get(tp0).offset());
        assertTrue(offs.get(tp1) == null, "offset of " + tp1 + " deleted: " + offs);

        admin.deleteConsumerGroups(List.of(group)).all().get(10, TimeUnit.SECONDS);
        assertFalse(admin.listConsumerGroups().all().get(10, TimeUnit.SECONDS).stream()
                .anyMatch(g -> g.groupId().equals(group)), "deleted group still listed");
        offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        assertTrue(offs.values().stream().allMatch(o -> o == null), "offsets after deleteConsumerGroups: " + offs);
        Throwable e = causeOf(() -> admin.deleteConsumerGroups(List.of(group)).all().get(10, TimeUnit.SECONDS));
        assertInstanceOf(GroupIdNotFoundException.class, e, "deleting a deleted group");
    }

    static ConsumerGroupState describeState(String group) {
        try {
            return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(10, TimeUnit.SECONDS).state();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * A dynamic member's close() sends LeaveGroup: the other member gets its
     * partitions at the next heartbeat, long before the session timeout.
     * Auto-commit commits what was consumed on close.
     */
    @Test
    void leaveGroupOnCloseAndAutoCommit() throws Exception {
        String topic = createTopic("leave", 4);
        String group = unique("leave");
        produce(topic, 40);
        Map<String, Object> o = groupOverrides(RangeAssignor.class.getName(), null);
        o.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 30_000);
        o.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, true);
        o.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, 100);
        try (KafkaConsumer<String, String> a = consumer(group, o)) {
            KafkaConsumer<String, String> b = consumer(group, o);
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            pollAll(List.of(a, b), got, () -> a.assignment().size() == 2 && b.assignment().size() == 2 && got.size() >= 40,
                    "2 + 2 and 40 records");
            Set<TopicPartition> bOwned = new HashSet<>(b.assignment());
            Instant closed = Instant.now();
            b.close(Duration.ofSeconds(10));
            pollAll(List.of(a), () -> a.assignment().size() == 4, "a takes over after b's LeaveGroup");
            Duration took = Duration.between(closed, Instant.now());
            assertTrue(took.compareTo(Duration.ofSeconds(20)) < 0, "takeover took " + took + ": no LeaveGroup, waited for the session timeout?");
            Map<TopicPartition, OffsetAndMetadata> committed = a.committed(bOwned, Duration.ofSeconds(10));
            long sum = 0;
            for (TopicPartition tp : bOwned) {
                assertTrue(committed.get(tp) != null, "b's auto-commit on close for " + tp);
                sum += committed.get(tp).offset();
            }
            long ends = a.endOffsets(bOwned).values().stream().mapToLong(Long::longValue).sum();
            assertEquals(ends, sum, "b committed everything it consumed");
        }
    }

    /**
     * Admin.listGroups and Admin.describeClassicGroups (4.x only, KIP-1043;
     * called by reflection so the class compiles against 3.9): the group
     * is listed as CLASSIC with protocol type "consumer".
     */
    @Test
    void listGroupsAndDescribeClassicGroups() throws Exception {
        java.lang.reflect.Method listGroups;
        try {
            listGroups = admin.getClass().getMethod("listGroups");
        } catch (NoSuchMethodException e) {
            org.junit.jupiter.api.Assumptions.abort("Admin.listGroups is not in this client (4.0+)");
            return;
        }
        String topic = createTopic("classic-list", 1);
        String group = unique("classic-list");
        try (KafkaConsumer<String, String> c = consumer(group, groupOverrides(RangeAssignor.class.getName(), null))) {
            c.subscribe(List.of(topic));
            pollAll(List.of(c), () -> c.assignment().size() == 1, "assignment");
            Object res = listGroups.invoke(admin);
            Collection<?> all = (Collection<?>) ((org.apache.kafka.common.KafkaFuture<?>) res.getClass().getMethod("all").invoke(res))
                    .get(10, TimeUnit.SECONDS);
            Object mine = null;
            for (Object l : all) {
                if (group.equals(l.getClass().getMethod("groupId").invoke(l))) {
                    mine = l;
                }
            }
            assertTrue(mine != null, group + " not in listGroups: " + all);
            assertEquals("OPTIONAL[CLASSIC]", String.valueOf(mine.getClass().getMethod("type").invoke(mine)).toUpperCase());
            assertEquals("consumer", mine.getClass().getMethod("protocol").invoke(mine));
            assertEquals("OPTIONAL[STABLE]", String.valueOf(mine.getClass().getMethod("groupState").invoke(mine)).toUpperCase());

            java.lang.reflect.Method describe;
            try {
                describe = admin.getClass().getMethod("describeClassicGroups", Collection.class);
            } catch (NoSuchMethodException e) {
                return; // 4.0: listGroups only
            }
            Object dres = describe.invoke(admin, List.of(group));
            Map<?, ?> ds = (Map<?, ?>) ((org.apache.kafka.common.KafkaFuture<?>) dres.getClass().getMethod("all").invoke(dres))
                    .get(10, TimeUnit.SECONDS);
            Object d = ds.get(group);
            assertEquals("consumer", d.getClass().getMethod("protocol").invoke(d));
            assertEquals("range", d.getClass().getMethod("protocolData").invoke(d));
            assertEquals(1, ((Collection<?>) d.getClass().getMethod("members").invoke(d)).size());
        }
    }
}
