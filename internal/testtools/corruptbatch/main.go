// Command corruptbatch damages one stored record batch of a stopped
// broker's data directory, for tests of `broker storage verify`: it
// rewrites the batch holding an offset, through pebblestore, with one
// record byte flipped, so the batch's CRC-32C no longer matches. Pebble's
// own checksums stay valid: only the broker's check can notice.
//
//	corruptbatch -data-dir DIR -topic NAME [-partition 0] [-offset 0]
//
// It prints the damaged batch's base offset. Never run it on data you
// care about.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

func main() {
	dir := flag.String("data-dir", "", "data directory of a stopped broker")
	topic := flag.String("topic", "", "topic name")
	partition := flag.Int("partition", 0, "partition")
	offset := flag.Int64("offset", 0, "an offset inside the batch to damage")
	flag.Parse()
	if err := run(*dir, *topic, int32(*partition), *offset); err != nil {
		fmt.Fprintln(os.Stderr, "corruptbatch:", err)
		os.Exit(1)
	}
}

func run(dir, topic string, partition int32, offset int64) error {
	if dir == "" || topic == "" {
		return fmt.Errorf("-data-dir and -topic are required")
	}
	if err := pebblestore.CheckDataDir(dir); err != nil {
		return err
	}
	store, err := pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer store.Close()
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		return err
	}
	t, ok := tm.Topic(topic)
	if !ok {
		return fmt.Errorf("no topic %q", topic)
	}
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixBatch, t.ID, partition)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	if !it.SeekLT(pebblestore.BatchKey(t.ID, partition, offset+1)) {
		_ = it.Close()
		return fmt.Errorf("no batch of %s/%d holds offset %d", topic, partition, offset)
	}
	key := append([]byte(nil), it.Key()...)
	v, err := it.Value()
	if err != nil {
		_ = it.Close()
		return err
	}
	value := append([]byte(nil), v...)
	if err := it.Close(); err != nil {
		return err
	}
	if len(value) <= topics.BatchHeaderSize {
		return fmt.Errorf("the batch at %x has no records to damage", key)
	}
	value[len(value)-1] ^= 0x5a // inside the last record: covered by the CRC
	b := store.NewBatch()
	b.Set(key, value)
	if err := b.Commit(); err != nil {
		return err
	}
	fmt.Println(pebblestore.OffsetFromKey(key))
	return nil
}
