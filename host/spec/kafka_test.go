package spec

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseKafka(t *testing.T) {
	src := `name: p
sources:
  - name: in
    type: kafka
    stream: s
    partitions: 3
    kafka:
      brokers: ["127.0.0.1:9092"]
      tls: {ca_file: ca.pem}
      sasl: {mechanism: SCRAM-SHA-512, username: u, password_env: KAFKA_PASSWORD}
      topic: orders
      event_time: {field: ts, format: unix_ms}
sinks:
  - name: out
    type: kafka
    streams: [s]
    format: payload
    kafka:
      brokers: ["127.0.0.1:9092"]
      tls: {}
      topic: orders-out
      key_fields: [customer]
`
	p, err := Parse("/dir/pipeline.yaml", []byte(src))
	require.NoError(t, err)
	k := p.Sources[0].Kafka
	require.Equal(t, KafkaStartEarliest, k.Start, "default start")
	require.Equal(t, IsolationReadCommitted, k.Isolation, "default isolation")
	require.Equal(t, filepath.Join("/dir", "ca.pem"), k.TLS.CAFile)
	require.Equal(t, SASLScramSHA512, k.SASL.Mechanism)
	require.Equal(t, &KafkaEventTime{Field: "ts", Format: TimeUnixMS}, k.EventTime)
	sk := p.Sinks[0].Kafka
	require.NotNil(t, sk.TLS, "tls: {} means TLS with the system roots")
	require.Equal(t, FormatPayload, p.Sinks[0].Format)
	require.Equal(t, []string{"customer"}, sk.KeyFields)
	require.True(t, sk.ExactlyOnce(true), "default delivery with a data directory")
	require.False(t, sk.ExactlyOnce(false), "default delivery without one")
	require.Equal(t, "flowhost-p-out", sk.TransactionalIDOf(p.Name, "out"))
	require.Equal(t, "flowhost-sink-p-out", sk.MarkerGroupOf(p.Name, "out"))
}

func TestKafkaSinkDelivery(t *testing.T) {
	tests := []struct {
		kafka          string
		store, noStore bool
		txnID, marker  string
	}{
		{"delivery: exactly_once", true, true, "flowhost-p-out", "flowhost-sink-p-out"},
		{"delivery: at_least_once", false, false, "flowhost-p-out", "flowhost-sink-p-out"},
		{"transactional_id: mine, marker_group: mine-m", true, false, "mine", "mine-m"},
	}
	for _, tt := range tests {
		t.Run(tt.kafka, func(t *testing.T) {
			src := "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: out, type: kafka, streams: [s], kafka: {brokers: [\"h:1\"], topic: t, " + tt.kafka + "}}]\n"
			p, err := Parse("pipeline.yaml", []byte(src))
			require.NoError(t, err)
			k := p.Sinks[0].Kafka
			require.Equal(t, tt.store, k.ExactlyOnce(true))
			require.Equal(t, tt.noStore, k.ExactlyOnce(false))
			require.Equal(t, tt.txnID, k.TransactionalIDOf("p", "out"))
			require.Equal(t, tt.marker, k.MarkerGroupOf("p", "out"))
		})
	}
}

func TestParseKafkaErrors(t *testing.T) {
	const kafkaSource = "name: p\nsources: [{name: in, type: kafka, stream: s, "
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"no brokers", kafkaSource + "kafka: »{topic: t}}]\n",
			[]string{`sources[0].kafka.brokers: required; expected a list of host:port such as ["127.0.0.1:9092"]`}},
		{"bad broker", kafkaSource + "kafka: {brokers: [»nohost], topic: t}}]\n",
			[]string{`sources[0].kafka.brokers[0]: expected host:port such as "127.0.0.1:9092"; got "nohost"`}},
		{"no topic", kafkaSource + "kafka: »{brokers: [\"h:1\"]}}]\n",
			[]string{`sources[0].kafka.topic: required; expected a topic name`}},
		{"missing block", "name: p\nsources: [»{name: in, type: kafka, stream: s}]\n",
			[]string{`sources[0].kafka: required when type is kafka`}},
		{"bad start", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, start: »yesterday}}]\n",
			[]string{`sources[0].kafka.start: expected earliest, latest, committed or an RFC 3339 time such as 2024-05-01T10:00:00Z; got "yesterday"`}},
		{"committed without group", kafkaSource + "kafka: »{brokers: [\"h:1\"], topic: t, start: committed}}]\n",
			[]string{`sources[0].kafka.group: required with start: committed; expected the consumer group whose offsets to start from`}},
		{"bad isolation", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, isolation: »dirty}}]\n",
			[]string{`sources[0].kafka.isolation: expected one of read_committed, read_uncommitted; got "dirty"`}},
		{"event time without format", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, event_time: »{field: ts}}}]\n",
			[]string{`sources[0].kafka.event_time.format: required; expected one of unix_s, unix_ms, unix_us, unix_ns, rfc3339`}},
		{"event time field and header", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, event_time: {field: ts, header: »h, format: unix_s}}}]\n",
			[]string{`sources[0].kafka.event_time.header: give field or header, not both`}},
		{"inline password refused", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, sasl: {mechanism: PLAIN, username: u, »password: x}}}]\n",
			[]string{`sources[0].kafka.sasl.password: unknown field; expected one of mechanism, username, password_file, password_env`}},
		{"sasl without password", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, sasl: »{mechanism: PLAIN, username: u}}}]\n",
			[]string{`sources[0].kafka.sasl: expected password_file (a file holding the password) or password_env (an environment variable holding it); the password itself never goes in the spec`}},
		{"bad mechanism", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, sasl: {mechanism: »GSSAPI, username: u, password_env: P}}}]\n",
			[]string{`sources[0].kafka.sasl.mechanism: expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; got "GSSAPI"`}},
		{"client cert without key", kafkaSource + "kafka: {brokers: [\"h:1\"], topic: t, tls: »{cert_file: c.pem}}}]\n",
			[]string{`sources[0].kafka.tls: cert_file and key_file go together: give both or neither`}},
		{"partition_by", kafkaSource + "partition_by: »[k], kafka: {brokers: [\"h:1\"], topic: t}}]\n",
			[]string{`sources[0].partition_by: a kafka source keeps each Kafka partition as its own partition; partition_by is not allowed`}},
		{"sink text format", "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: o, type: kafka, streams: [s], format: »text, kafka: {brokers: [\"h:1\"], topic: t}}]\n",
			[]string{`sinks[0].format: a kafka sink writes json (the record with every timestamp and id) or payload (the payload alone); got text`}},
		{"bad delivery", "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: o, type: kafka, streams: [s], kafka: {brokers: [\"h:1\"], topic: t, delivery: »twice}}]\n",
			[]string{`sinks[0].kafka.delivery: expected one of exactly_once, at_least_once; got "twice"`}},
		{"transactional id at least once", "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: o, type: kafka, streams: [s], kafka: {brokers: [\"h:1\"], topic: t, delivery: at_least_once, transactional_id: »x}}]\n",
			[]string{`sinks[0].kafka.transactional_id: only used with delivery: exactly_once; delivery is at_least_once`}},
		{"cluster without kafka", "name: p\nsources: [{name: in, type: generator, stream: s}]\ncluster: »{}\n",
			[]string{`cluster.kafka: required in a cluster block: the Kafka cluster the pipeline's store lives on, such as {brokers: ["127.0.0.1:9092"]}`}},
		{"cluster bad broker", "name: p\nsources: [{name: in, type: generator, stream: s}]\ncluster: {kafka: {brokers: [»nohost]}}\n",
			[]string{`cluster.kafka.brokers[0]: expected host:port such as "127.0.0.1:9092"; got "nohost"`}},
		{"cluster replication", "name: p\nsources: [{name: in, type: generator, stream: s}]\ncluster: {kafka: {brokers: [\"h:1\"], replication: »-2}}\n",
			[]string{`cluster.kafka.replication: expected a replication factor from 1 to 32767, or 0 for the brokers' default; got -2`}},
		{"cluster unknown field", "name: p\nsources: [{name: in, type: generator, stream: s}]\ncluster: {»zookeeper: x}\n",
			[]string{`cluster.zookeeper: unknown field; expected kafka`}},
		{"marker group at least once", "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: o, type: kafka, streams: [s], kafka: {brokers: [\"h:1\"], topic: t, delivery: at_least_once, marker_group: »g}}]\n",
			[]string{`sinks[0].kafka.marker_group: only used with delivery: exactly_once; delivery is at_least_once`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, positions := unmark(t, tt.src)
			_, err := Parse("pipeline.yaml", []byte(src))
			list := errorList(t, err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Path + ": " + e.Message
			}
			require.Equal(t, tt.want, got)
			require.Len(t, positions, len(list))
			for i, e := range list {
				require.Equal(t, "pipeline.yaml", e.File)
				require.Equal(t, positions[i], position{e.Line, e.Column}, "position of %q", got[i])
			}
		})
	}
}
