// Package depspin holds the module's dependencies in go.mod while the packages
// that use them are being written. It is removed once they are.
package depspin

import (
	_ "github.com/IBM/sarama"
	_ "github.com/cockroachdb/datadriven"
	_ "github.com/klauspost/compress/gzip"
	_ "github.com/klauspost/compress/s2"
	_ "github.com/klauspost/compress/snappy"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kerr"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/urfave/cli/v2"
	_ "gopkg.in/yaml.v3"
)
