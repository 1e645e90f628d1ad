package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/connect/kafkatest"
	"github.com/flowhost/flowhost/host/keys"
)

// The Kafka tests run against an in-process kfake cluster on 127.0.0.1,
// or against FLOWHOST_KAFKA_BROKERS (see package kafkatest).

// testKafka returns the brokers of a cluster holding a fresh topic of
// partitions partitions, and the topic's name. With opts (a cluster with
// SASL) it only names the topic: the test makes its own client.
func testKafka(t *testing.T, partitions int, opts ...kfake.Opt) (brokers []string, topic string) {
	t.Helper()
	brokers = kafkatest.Brokers(t, opts...)
	if len(opts) > 0 {
		return brokers, fmt.Sprintf("flowhost-test-%d", time.Now().UnixNano())
	}
	return brokers, kafkatest.Topic(t, brokers, partitions, nil)
}

// produce writes recs synchronously, each to the partition it names.
func produce(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	kafkatest.Produce(t, brokers, recs...)
}

// runSource runs src until it has emitted want records and rejected
// wantRejected, or fails the test after a deadline.
func runSource(t *testing.T, cfg KafkaSourceConfig, want, wantRejected int) ([]Record, []Rejection) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []Record
	var rejs []Rejection
	done := func() {
		if len(recs) >= want && len(rejs) >= wantRejected {
			cancel()
		}
	}
	cfg.Reject = func(r Rejection) error { rejs = append(rejs, r); done(); return nil }
	src, err := NewKafkaSource(cfg)
	require.NoError(t, err)
	err = src.Run(ctx, func(r Record) error { recs = append(recs, r); done(); return nil })
	require.ErrorIs(t, err, context.Canceled, "the source stopped before it read everything: %v", err)
	require.Len(t, recs, want)
	require.Len(t, rejs, wantRejected)
	return recs, rejs
}

func TestKafkaSourceReadsEveryPartition(t *testing.T) {
	brokers, topic := testKafka(t, 3)
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var sent []*kgo.Record
	for i := range 30 {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		sent = append(sent, &kgo.Record{
			Topic: topic, Partition: int32(i % 3), Timestamp: ts,
			Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, i, ts.Add(-time.Second).UnixMilli()),
		})
	}
	produce(t, brokers, sent...)
	recs, _ := runSource(t, KafkaSourceConfig{
		Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 3,
		EventTime: EventTimeSource{Field: "ts", Format: "unix_ms"},
	}, 30, 0)
	seen := map[string]bool{}
	for _, r := range recs {
		var i int
		_, err := fmt.Sscanf(string(r.Payload), `{"n":%d,`, &i)
		require.NoError(t, err)
		require.False(t, seen[string(r.Payload)], "read twice: %s", r.Payload)
		seen[string(r.Payload)] = true
		require.Equal(t, i%3, r.Partition, "Kafka partition is the source partition")
		require.Equal(t, "s", r.Stream)
		require.True(t, r.HasWrite)
		require.Equal(t, base.Add(time.Duration(i)*time.Millisecond).UnixNano(), r.Write, "write time is the Kafka timestamp")
		require.True(t, r.HasEvent)
		require.Equal(t, base.Add(time.Duration(i)*time.Millisecond-time.Second).UnixNano(), r.Event, "event time is the field")
		require.Equal(t, r.More, r.Resume == nil, "only the last record of a group carries the offsets")
	}
}

func TestKafkaSourceEventTimeFromHeaderOrTimestamp(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	ts := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	produce(t, brokers, &kgo.Record{Topic: topic, Timestamp: ts, Value: []byte(`{}`),
		Headers: []kgo.RecordHeader{{Key: "event", Value: []byte("2026-04-30T00:00:00.5Z")}}})
	conn := KafkaConnection{Brokers: brokers}
	recs, _ := runSource(t, KafkaSourceConfig{Conn: conn, Topic: topic, Stream: "s", Partitions: 1,
		EventTime: EventTimeSource{Header: "event", Format: "rfc3339"}}, 1, 0)
	require.Equal(t, time.Date(2026, 4, 30, 0, 0, 0, 5e8, time.UTC).UnixNano(), recs[0].Event)
	recs, _ = runSource(t, KafkaSourceConfig{Conn: conn, Topic: topic, Stream: "s", Partitions: 1}, 1, 0)
	require.Equal(t, ts.UnixNano(), recs[0].Event, "without event_time the event time is the Kafka timestamp")
}

func TestKafkaSourceDeadLettersWhatItCannotDecode(t *testing.T) {
	brokers, topic := testKafka(t, 2)
	produce(t, brokers,
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{"ts":1}`)},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte(`not json`)},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{"ts":"soon"}`)},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{"other":1}`)},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{"ts":2}`)},
	)
	recs, rejs := runSource(t, KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 2,
		EventTime: EventTimeSource{Field: "ts", Format: "unix_s"}}, 2, 3)
	require.ElementsMatch(t, []int64{1e9, 2e9}, []int64{recs[0].Event, recs[1].Event})
	got := map[string]string{}
	for _, r := range rejs {
		require.Equal(t, StageIngest, r.Stage)
		got[r.Origin] = r.Err.Error()
	}
	prefix := "kafka:" + topic
	require.Contains(t, got[prefix+"/0@1"], fmt.Sprintf("topic %s partition 0 offset 1: ", topic))
	require.Contains(t, got[prefix+"/0@1"], "not JSON")
	require.Contains(t, got[prefix+"/1@0"], `field ts: expected an integer (unix_s); got "soon"`)
	require.Contains(t, got[prefix+"/1@1"], "no field ts")
}

func TestKafkaSourceResumesFromItsToken(t *testing.T) {
	brokers, topic := testKafka(t, 2)
	send := func(from, to int) {
		var sent []*kgo.Record
		for i := from; i < to; i++ {
			sent = append(sent, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
		}
		produce(t, brokers, sent...)
	}
	send(0, 6)
	cfg := KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 2}
	all, _ := runSource(t, cfg, 6, 0)
	// Records come in all-or-nothing groups: only a group's last record
	// carries the offsets, and the host commits a group whole.
	for i, r := range all {
		require.Equal(t, r.More, r.Resume == nil, "record %d: More %v, resume %q", i, r.More, r.Resume)
	}
	last := all[len(all)-1]
	require.False(t, last.More, "the last record read ends its group")
	require.JSONEq(t, `[3,3]`, string(last.Resume))
	// Resume after it: only what came later is read, whatever the start
	// position says.
	send(6, 10)
	cfg.Resume, cfg.Start = last.Resume, KafkaStart{Kind: "earliest"}
	rest, _ := runSource(t, cfg, 4, 0)
	var got []string
	for _, r := range rest {
		got = append(got, string(r.Payload))
	}
	require.ElementsMatch(t, []string{"6", "7", "8", "9"}, got)
}

func TestKafkaSourceStartPositions(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	produce(t, brokers,
		&kgo.Record{Topic: topic, Timestamp: old, Value: []byte(`"old"`)},
		&kgo.Record{Topic: topic, Timestamp: old.Add(time.Hour), Value: []byte(`"new"`)})
	conn := KafkaConnection{Brokers: brokers}
	recs, _ := runSource(t, KafkaSourceConfig{Conn: conn, Topic: topic, Stream: "s", Partitions: 1,
		Start: KafkaStart{Kind: "time", Time: old.Add(time.Minute)}}, 1, 0)
	require.Equal(t, `"new"`, string(recs[0].Payload))

	// committed: from the group's offset.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "g", offsets)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	recs, _ = runSource(t, KafkaSourceConfig{Conn: conn, Topic: topic, Stream: "s", Partitions: 1,
		Start: KafkaStart{Kind: "committed", Group: "g"}}, 1, 0)
	require.Equal(t, `"new"`, string(recs[0].Payload))

	// latest: only what is produced after the start.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: conn, Topic: topic, Stream: "s", Partitions: 1, Start: KafkaStart{Kind: "latest"}})
	require.NoError(t, err)
	var got []string
	errc := make(chan error, 1)
	go func() {
		errc <- src.Run(ctx, func(r Record) error { got = append(got, string(r.Payload)); cancel(); return nil })
	}()
	// Produce until the source, which started at the end, reads one.
	for i := 0; ctx.Err() == nil; i++ {
		produce(t, brokers, &kgo.Record{Topic: topic, Value: []byte(`"latest"`)})
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a retry interval, not a synchronisation
		}
	}
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Equal(t, []string{`"latest"`}, got)
}

func TestKafkaSourceRefusesAnotherPartitionCount(t *testing.T) {
	brokers, topic := testKafka(t, 3)
	src, err := NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic, Stream: "s", Partitions: 2})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = src.Run(ctx, func(Record) error { return nil })
	require.EqualError(t, err, fmt.Sprintf("kafka source, topic %s: the topic has 3 partitions and the source 2: set the source's partitions to 3 (each Kafka partition is a source partition)", topic))

	src, err = NewKafkaSource(KafkaSourceConfig{Conn: KafkaConnection{Brokers: brokers}, Topic: topic + "-missing", Stream: "s", Partitions: 2})
	require.NoError(t, err)
	err = src.Run(ctx, func(Record) error { return nil })
	require.ErrorContains(t, err, "cannot read the topic")
}

func TestParseEventTime(t *testing.T) {
	tests := []struct {
		text, format string
		want         int64
		err          string
	}{
		{"1714557600", "unix_s", 1714557600e9, ""},
		{"1714557600123", "unix_ms", 1714557600123e6, ""},
		{"1714557600123456", "unix_us", 1714557600123456e3, ""},
		{"1714557600123456789", "unix_ns", 1714557600123456789, ""},
		{"-1", "unix_s", -1e9, ""},
		{"2024-05-01T10:00:00.5Z", "rfc3339", 1714557600500000000, ""},
		{"2024-05-01T12:00:00+02:00", "rfc3339", 1714557600e9, ""},
		{"1.5", "unix_s", 0, "expected an integer (unix_s)"},
		{"99999999999", "unix_s", 0, "outside the int64 nanosecond range"},
		{"2024-05-01", "rfc3339", 0, "expected an RFC 3339 time"},
		{"3000-01-01T00:00:00Z", "rfc3339", 0, "outside the years"},
		{"1", "unix_min", 0, `unknown time format "unix_min"`},
	}
	for _, tt := range tests {
		got, err := ParseEventTime(tt.text, tt.format)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%s %s", tt.text, tt.format)
			continue
		}
		require.NoError(t, err, "%s %s", tt.text, tt.format)
		require.Equal(t, tt.want, got, "%s %s", tt.text, tt.format)
	}
}

func FuzzParseEventTime(f *testing.F) {
	for _, s := range []string{"0", "1714557600", "-9223372036", "2024-05-01T10:00:00.5Z", "9223372036854775807", ""} {
		for _, format := range []string{"unix_s", "unix_ms", "unix_us", "unix_ns", "rfc3339"} {
			f.Add(s, format)
		}
	}
	f.Fuzz(func(t *testing.T, text, format string) {
		got, err := ParseEventTime(text, format)
		if err != nil {
			return
		}
		switch format {
		case "unix_ns":
			n, perr := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			require.NoError(t, perr)
			require.Equal(t, n, got)
		case "rfc3339":
			parsed, perr := time.Parse(time.RFC3339Nano, strings.TrimSpace(text))
			require.NoError(t, perr)
			require.Equal(t, parsed.UnixNano(), got)
		case "unix_s", "unix_ms", "unix_us":
			n, perr := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			require.NoError(t, perr)
			unit := map[string]int64{"unix_s": 1e9, "unix_ms": 1e6, "unix_us": 1e3}[format]
			require.Equal(t, n, got/unit)
			require.Zero(t, got%unit)
		default:
			t.Fatalf("format %q accepted", format)
		}
	})
}

func TestKafkaSinkWritesKeysAndHeaders(t *testing.T) {
	brokers, topic := testKafka(t, 1)
	conn := KafkaConnection{Brokers: brokers}
	recs := []SinkRecord{
		{Stream: "s", MessageID: "m1", Parents: []string{"p1", "p2"}, Key: "k1", EventTS: 10, AlignmentTS: 20, Payload: []byte(`{"c":"x"}`)},
		{Stream: "s", MessageID: "m2", Key: "k2", EventTS: 11, AlignmentTS: 21, Payload: []byte(`{"c":"y"}`)},
	}
	sink, err := NewKafkaSink(KafkaSinkConfig{Conn: conn, Topic: topic})
	require.NoError(t, err)
	require.NoError(t, sink.Write(context.Background(), recs))
	require.NoError(t, sink.Close())
	sink, err = NewKafkaSink(KafkaSinkConfig{Conn: conn, Topic: topic, KeyFields: []string{"c"}, PayloadOnly: true})
	require.NoError(t, err)
	require.NoError(t, sink.Write(context.Background(), recs[:1]))
	require.NoError(t, sink.Close())

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	require.Len(t, got, 3)
	headers := func(r *kgo.Record) map[string]string {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		return h
	}
	require.Equal(t, "k1", string(got[0].Key))
	require.Equal(t, map[string]string{"flowhost-message-id": "m1", "flowhost-event-ts": "10", "flowhost-alignment-ts": "20", "flowhost-parents": "p1,p2"}, headers(got[0]))
	var line SinkRecord
	require.NoError(t, json.Unmarshal(got[0].Value, &line))
	require.Equal(t, "m1", line.MessageID, "format json: the value is the full record")
	require.Equal(t, "k2", string(got[1].Key))
	require.Equal(t, `{"c":"x"}`, string(got[2].Value), "format payload: the value is the payload")
	e, err := keys.NewExtractor([]string{"c"})
	require.NoError(t, err)
	want, err := e.Key([]byte(`{"c":"x"}`))
	require.NoError(t, err)
	require.Equal(t, want, string(got[2].Key), "key_fields: the key is the payload's, as group_by makes it")
}

func TestKafkaClientOpts(t *testing.T) {
	dir := t.TempDir()
	notPEM := dir + "/ca.pem"
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name string
		conn KafkaConnection
		err  string
	}{
		{"plain", KafkaConnection{Brokers: []string{"127.0.0.1:1"}}, ""},
		{"system roots", KafkaConnection{Brokers: []string{"127.0.0.1:1"}, TLS: &KafkaTLS{}}, ""},
		{"no brokers", KafkaConnection{}, "no brokers"},
		{"missing ca file", KafkaConnection{Brokers: []string{"h:1"}, TLS: &KafkaTLS{CAFile: dir + "/missing.pem"}}, "tls.ca_file: open"},
		{"ca file without PEM", KafkaConnection{Brokers: []string{"h:1"}, TLS: &KafkaTLS{CAFile: notPEM}}, "no PEM certificate in it"},
		{"bad client certificate", KafkaConnection{Brokers: []string{"h:1"}, TLS: &KafkaTLS{CertFile: notPEM, KeyFile: notPEM}}, "tls.cert_file, tls.key_file"},
		{"scram 256", KafkaConnection{Brokers: []string{"h:1"}, SASL: &KafkaSASL{Mechanism: "SCRAM-SHA-256", Username: "u", Password: "p"}}, ""},
		{"scram 512", KafkaConnection{Brokers: []string{"h:1"}, SASL: &KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p"}}, ""},
		{"unknown mechanism", KafkaConnection{Brokers: []string{"h:1"}, SASL: &KafkaSASL{Mechanism: "GSSAPI"}}, `sasl.mechanism "GSSAPI" is unknown`},
	}
	for _, tt := range tests {
		_, err := KafkaClientOpts(tt.conn)
		if tt.err == "" {
			require.NoError(t, err, tt.name)
		} else {
			require.ErrorContains(t, err, tt.err, tt.name)
		}
	}
}

// TestKafkaSASLAgainstKfake authenticates with each mechanism against a
// kfake cluster that requires SASL; a wrong password is refused.
func TestKafkaSASLAgainstKfake(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "flowhost", "secret"))
			require.NoError(t, err)
			t.Cleanup(c.Close)
			ping := func(password string) error {
				opts, err := KafkaClientOpts(KafkaConnection{Brokers: c.ListenAddrs(), SASL: &KafkaSASL{Mechanism: mech, Username: "flowhost", Password: password}})
				require.NoError(t, err)
				cl, err := kgo.NewClient(opts...)
				require.NoError(t, err)
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return cl.Ping(ctx)
			}
			require.NoError(t, ping("secret"))
			require.Error(t, ping("wrong"))
		})
	}
}

// FuzzParseKafkaResume checks the decoder of a kafka source's stored
// resume position: it refuses what is not a list of offsets, and what it
// accepts is written back by kafkaResume to a token that decodes to the
// same offsets.
func FuzzParseKafkaResume(f *testing.F) {
	for _, s := range []string{"[0]", "[0,5,9223372036854775807]", "[]", "[-1]", "{}", "[1.5]", "", "null", "[1,]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		next, err := parseKafkaResume(tok)
		if err != nil {
			return
		}
		require.NotEmpty(t, next)
		for _, o := range next {
			require.GreaterOrEqual(t, o, int64(0))
		}
		again, err := parseKafkaResume(kafkaResume(next))
		require.NoError(t, err)
		require.Equal(t, next, again)
	})
}
