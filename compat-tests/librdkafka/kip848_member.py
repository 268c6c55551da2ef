"""One member of a KIP-848 consumer group (group.protocol=consumer) run by
compat-tests/librdkafka_test.go through confluent-kafka (librdkafka).

    kip848_member.py BOOTSTRAP GROUP TOPIC NAME

It polls one record at a time and commits its offset synchronously before
it prints the value on stdout: a printed value is a consumed and committed
record, so the test's ledger counts each record once. A failed commit
prints nothing and seeks back, so the record is read again (by this member
or, after a revocation, by the partition's next owner). Revocations run
inside poll (on_revoke), never between a poll and its commit. SIGTERM
closes the consumer (a clean leave: epoch -1); kill -9 leaves nothing.
Progress and rebalances go to stderr.
"""

import signal
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition


def main():
    bootstrap, group, topic, name = sys.argv[1:5]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    def log(*args):
        print(name, *args, file=sys.stderr, flush=True)

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "client.id": "compat-rdk-" + name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    })

    def on_assign(_, parts):
        log("assigned", sorted(p.partition for p in parts))

    def on_revoke(_, parts):
        log("revoked", sorted(p.partition for p in parts))

    def on_lost(_, parts):
        log("lost", sorted(p.partition for p in parts))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            log("error", msg.error())
            continue
        tp = TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)
        try:
            consumer.commit(offsets=[tp], asynchronous=False)
        except KafkaException as e:
            log("commit failed at", msg.partition(), msg.offset(), e)
            try:
                consumer.seek(TopicPartition(msg.topic(), msg.partition(), msg.offset()))
            except KafkaException as e2:
                log("seek failed", e2)
            continue
        print(msg.value().decode(), flush=True)
    consumer.close()
    log("closed")


if __name__ == "__main__":
    main()
