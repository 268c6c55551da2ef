#!/usr/bin/env bash
# Starts Apache Kafka (the reference broker) as a single-node KRaft
# broker+controller on loopback, in the foreground, from the jars that
# `mvn -f compat-tests/reference/pom.xml dependency:copy-dependencies
# -DoutputDirectory=target/lib` copied. Its data directory is formatted on
# first use.
#
#   run-kafka.sh DATA_DIR [KAFKA_PORT [CONTROLLER_PORT]] [key=value ...]
#
# Defaults: ports 19092 and 19093. Extra key=value pairs are appended to the
# server properties (e.g. flush.messages=1 for fsync per message).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="${KAFKA_REFERENCE_LIB:-$here/target/lib}"
if ! ls "$lib"/kafka_2.13-*.jar >/dev/null 2>&1; then
	echo "run-kafka.sh: no Apache Kafka jars in $lib; run: mvn -B -q -f $here/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib" >&2
	exit 2
fi
data="${1:?usage: run-kafka.sh DATA_DIR [KAFKA_PORT [CONTROLLER_PORT]] [key=value ...]}"
shift
port=19092
cport=19093
if [ $# -gt 0 ] && [[ "$1" != *=* ]]; then port="$1"; shift; fi
if [ $# -gt 0 ] && [[ "$1" != *=* ]]; then cport="$1"; shift; fi
mkdir -p "$data/log"
props="$data/server.properties"
cat >"$props" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/log
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.share.min.session.timeout.ms=6000
group.share.session.timeout.ms=6000
group.share.min.heartbeat.interval.ms=500
group.share.heartbeat.interval.ms=500
group.share.min.record.lock.duration.ms=1000
group.share.record.lock.duration.ms=3000
group.share.delivery.count.limit=3
PROPS
for kv in "$@"; do echo "$kv" >>"$props"; done
cp="$lib/*"
heap="${KAFKA_REFERENCE_HEAP:--Xmx768m}"
if [ ! -f "$data/log/meta.properties" ]; then
	id="$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)"
	java $heap -cp "$cp" kafka.tools.StorageTool format -t "$id" -c "$props" --standalone >/dev/null
fi
exec java $heap -XX:+UseG1GC -Djava.awt.headless=true -cp "$cp" kafka.Kafka "$props"
