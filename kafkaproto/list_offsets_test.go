package kafkaproto

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestListOffsetsEarliestLocal pins the bug where ListOffsets v8, advertised,
// answered its one addition, timestamp -4 (earliest local, KIP-405), with
// UNSUPPORTED_VERSION: the Java Admin's listOffsets(OffsetSpec.earliestLocal())
// failed with UnsupportedVersionException. Without tiered storage Kafka
// answers the log start offset, as for -2. Below v8, -4 stays unsupported, and
// -5 (v9) is refused.
func TestListOffsetsEarliestLocal(t *testing.T) {
	_, addr := startTestServer(t)
	ctx := context.Background()

	cl := newClient(t, addr, kgo.AllowAutoTopicCreation())
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "local", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "local"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = 2
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	if dresp, err := dr.RequestWith(ctx, cl); err != nil || dresp.Topics[0].Partitions[0].LowWatermark != 2 {
		t.Fatalf("delete records: %v %+v", err, dresp)
	}

	v3Client := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0())) // ListOffsets v7
	for _, c := range []struct {
		version   int16
		timestamp int64
		code      int16
		offset    int64
	}{
		{8, -4, 0, 2},
		{8, -2, 0, 2},
		{7, -4, kerr.UnsupportedVersion.Code, -1},
		{8, -5, kerr.UnsupportedVersion.Code, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = c.version
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "local"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = c.timestamp
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		c7 := cl
		if c.version < 8 {
			c7 = v3Client // kgo sends the highest version both sides know: pin it
		}
		resp, err := req.RequestWith(ctx, c7)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != c.code || p.Offset != c.offset {
			t.Errorf("v%d timestamp %d: error %d offset %d, want error %d offset %d", resp.Version, c.timestamp,
				p.ErrorCode, p.Offset, c.code, c.offset)
		}
	}
}
