package spec

import (
	"net"
	"strings"
	"time"
)

// KafkaTLS is how a Kafka client checks the brokers and, with a
// certificate, shows itself to them. `tls: {}` uses the system's roots and
// no client certificate.
type KafkaTLS struct {
	// CAFile is a PEM file of the certificates that sign the brokers';
	// relative to the spec's directory. Default: the system's roots.
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile is a PEM file of the client certificate; with KeyFile.
	CertFile string `yaml:"cert_file,omitempty"`
	// KeyFile is the PEM file of the client certificate's private key;
	// with CertFile.
	KeyFile string `yaml:"key_file,omitempty"`
}

// KafkaSASLMechanism names a SASL mechanism.
type KafkaSASLMechanism string

// The SASL mechanisms.
const (
	SASLPlain       KafkaSASLMechanism = "PLAIN"
	SASLScramSHA256 KafkaSASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 KafkaSASLMechanism = "SCRAM-SHA-512"
)

func (KafkaSASLMechanism) values() []string {
	return []string{string(SASLPlain), string(SASLScramSHA256), string(SASLScramSHA512)}
}

// KafkaSASL authenticates a Kafka client. The password is in a file or an
// environment variable, exactly one of them, never in the spec.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Required.
	Mechanism KafkaSASLMechanism `yaml:"mechanism"`
	// Username is the user to authenticate as. Required.
	Username string `yaml:"username"`
	// PasswordFile is a file holding the password (surrounding white space
	// is not part of it); relative to the spec's directory.
	PasswordFile string `yaml:"password_file,omitempty"`
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string `yaml:"password_env,omitempty"`
}

// KafkaConnection is how a Kafka source or sink reaches the cluster: the
// fields brokers, tls and sasl of its kafka block.
type KafkaConnection struct {
	Brokers []string
	TLS     *KafkaTLS
	SASL    *KafkaSASL
}

// KafkaStart is where a kafka source starts reading on its first run.
type KafkaStart string

// The start positions, besides an RFC 3339 time.
const (
	KafkaStartEarliest  KafkaStart = "earliest"
	KafkaStartLatest    KafkaStart = "latest"
	KafkaStartCommitted KafkaStart = "committed"
)

// Time returns the time of a start position written as an RFC 3339 time.
func (s KafkaStart) Time() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(s))
	return t, err == nil
}

// KafkaIsolation is the isolation level a kafka source reads with.
type KafkaIsolation string

// The isolation levels.
const (
	IsolationReadCommitted   KafkaIsolation = "read_committed"
	IsolationReadUncommitted KafkaIsolation = "read_uncommitted"
)

func (KafkaIsolation) values() []string {
	return []string{string(IsolationReadCommitted), string(IsolationReadUncommitted)}
}

// TimeFormat is how an event time is written in a field or header.
type TimeFormat string

// The time formats.
const (
	TimeUnixS   TimeFormat = "unix_s"
	TimeUnixMS  TimeFormat = "unix_ms"
	TimeUnixUS  TimeFormat = "unix_us"
	TimeUnixNS  TimeFormat = "unix_ns"
	TimeRFC3339 TimeFormat = "rfc3339"
)

func (TimeFormat) values() []string {
	return []string{"unix_s", "unix_ms", "unix_us", "unix_ns", "rfc3339"}
}

// KafkaEventTime is the event_time block older specs wrote inside the
// kafka block; it is the source-level EventTime.
type KafkaEventTime = EventTime

// KafkaSource configures a source of type kafka.
type KafkaSource struct {
	// Brokers are the host:port addresses to bootstrap from. At least one.
	Brokers []string `yaml:"brokers,omitempty"`
	// TLS, when set, connects with TLS.
	TLS *KafkaTLS `yaml:"tls,omitempty"`
	// SASL, when set, authenticates.
	SASL *KafkaSASL `yaml:"sasl,omitempty"`
	// Topic is the topic to read. Required.
	Topic string `yaml:"topic"`
	// Start is where the first run starts: earliest, latest, an RFC 3339
	// time (the first record at or after it) or committed (the group's
	// committed offsets, earliest where it has none). Later runs with a
	// data directory continue from the offsets stored with the records.
	// Default earliest.
	Start KafkaStart `yaml:"start"`
	// Group is the consumer group whose committed offsets start: committed
	// uses (required with it) and to which the source commits the offsets
	// it has stored, for monitoring tools (the data directory stays the
	// source of truth).
	Group string `yaml:"group,omitempty"`
	// Isolation is read_committed (the default) or read_uncommitted.
	Isolation KafkaIsolation `yaml:"isolation"`
	// EventTime is the source's event_time written inside the kafka
	// block, as older specs did; prefer sources[].event_time.
	EventTime *KafkaEventTime `yaml:"event_time,omitempty"`
}

func (k *KafkaSource) setDefaults() {
	k.Start = KafkaStartEarliest
	k.Isolation = IsolationReadCommitted
}

// Connection returns the source's connection settings.
func (k *KafkaSource) Connection() KafkaConnection {
	return KafkaConnection{Brokers: k.Brokers, TLS: k.TLS, SASL: k.SASL}
}

// KafkaSink configures a sink of type kafka.
type KafkaSink struct {
	// Brokers are the host:port addresses to bootstrap from. At least one.
	Brokers []string `yaml:"brokers,omitempty"`
	// TLS, when set, connects with TLS.
	TLS *KafkaTLS `yaml:"tls,omitempty"`
	// SASL, when set, authenticates.
	SASL *KafkaSASL `yaml:"sasl,omitempty"`
	// Topic is the topic to produce to. Required.
	Topic string `yaml:"topic"`
	// KeyFields, when set, are top-level fields of the JSON payload whose
	// values make the Kafka key (as group_by makes a message key);
	// otherwise the Kafka key is the message key.
	KeyFields []string `yaml:"key_fields,omitempty"`
	// Delivery is exactly_once or at_least_once. Default: exactly_once
	// when the run has a data directory, at_least_once without one
	// (--in-memory); exactly_once written out without a data directory
	// is refused when the run starts.
	Delivery KafkaDelivery `yaml:"delivery,omitempty"`
	// TransactionalID is the transactional id of an exactly-once sink;
	// default flowhost-<pipeline>-<sink>. One writer per id: a second
	// one fences the first.
	TransactionalID string `yaml:"transactional_id,omitempty"`
	// MarkerGroup is the consumer group whose offset on partition 0 of
	// the topic records the last batch an exactly-once sink committed;
	// default flowhost-sink-<pipeline>-<sink>.
	MarkerGroup string `yaml:"marker_group,omitempty"`
}

// KafkaDelivery is a kafka sink's delivery guarantee.
type KafkaDelivery string

// The delivery guarantees of a kafka sink.
const (
	DeliveryExactlyOnce KafkaDelivery = "exactly_once"
	DeliveryAtLeastOnce KafkaDelivery = "at_least_once"
)

func (KafkaDelivery) values() []string {
	return []string{string(DeliveryExactlyOnce), string(DeliveryAtLeastOnce)}
}

// ExactlyOnce reports whether the sink runs exactly once, given whether
// the run has a data directory: the default follows it.
func (k *KafkaSink) ExactlyOnce(store bool) bool {
	if k.Delivery == "" {
		return store
	}
	return k.Delivery == DeliveryExactlyOnce
}

// TransactionalIDOf returns the sink's transactional id, its default
// derived from the pipeline's and the sink's names.
func (k *KafkaSink) TransactionalIDOf(pipeline, sink string) string {
	if k.TransactionalID != "" {
		return k.TransactionalID
	}
	return "flowhost-" + pipeline + "-" + sink
}

// MarkerGroupOf returns the sink's marker group, its default derived from
// the pipeline's and the sink's names.
func (k *KafkaSink) MarkerGroupOf(pipeline, sink string) string {
	if k.MarkerGroup != "" {
		return k.MarkerGroup
	}
	return "flowhost-sink-" + pipeline + "-" + sink
}

// Connection returns the sink's connection settings.
func (k *KafkaSink) Connection() KafkaConnection {
	return KafkaConnection{Brokers: k.Brokers, TLS: k.TLS, SASL: k.SASL}
}

// completeKafka makes the connection's file paths absolute.
func completeKafka(tls *KafkaTLS, sasl *KafkaSASL, resolve func(*string)) {
	if tls != nil {
		for _, p := range []*string{&tls.CAFile, &tls.CertFile, &tls.KeyFile} {
			if *p != "" {
				resolve(p)
			}
		}
	}
	if sasl != nil && sasl.PasswordFile != "" {
		resolve(&sasl.PasswordFile)
	}
}

// kafkaConnection checks the brokers, tls and sasl fields of a kafka block.
func (v *validator) kafkaConnection(path string, c KafkaConnection) {
	if len(c.Brokers) == 0 {
		v.errorf(fieldPath(path, "brokers"), `required; expected a list of host:port such as ["127.0.0.1:9092"]`)
	}
	for i, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || !validPort(port) || port == "0" {
			v.errorf(indexPath(fieldPath(path, "brokers"), i), `expected host:port such as "127.0.0.1:9092"; got %q`, b)
		}
	}
	if t := c.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.errorf(fieldPath(path, "tls"), "cert_file and key_file go together: give both or neither")
	}
	if s := c.SASL; s != nil {
		sp := fieldPath(path, "sasl")
		if s.Mechanism == "" {
			v.errorf(fieldPath(sp, "mechanism"), "required; expected one of %s", strings.Join(s.Mechanism.values(), ", "))
		}
		if s.Username == "" {
			v.errorf(fieldPath(sp, "username"), "required")
		}
		switch {
		case s.PasswordFile != "" && s.PasswordEnv != "":
			v.errorf(fieldPath(sp, "password_env"), "give password_file or password_env, not both")
		case s.PasswordFile == "" && s.PasswordEnv == "":
			v.errorf(sp, "expected password_file (a file holding the password) or password_env (an environment variable holding it); the password itself never goes in the spec")
		}
	}
}

func (v *validator) kafkaSource(sourcePath string, s *Source) {
	path, k := fieldPath(sourcePath, "kafka"), s.Kafka
	v.kafkaConnection(path, k.Connection())
	if k.Topic == "" {
		v.errorf(fieldPath(path, "topic"), "required; expected a topic name")
	}
	switch k.Start {
	case KafkaStartEarliest, KafkaStartLatest, KafkaStartCommitted:
	default:
		if _, ok := k.Start.Time(); !ok {
			v.errorf(fieldPath(path, "start"), "expected earliest, latest, committed or an RFC 3339 time such as 2024-05-01T10:00:00Z; got %q", k.Start)
		}
	}
	if k.Start == KafkaStartCommitted && k.Group == "" {
		v.errorf(fieldPath(path, "group"), "required with start: committed; expected the consumer group whose offsets to start from")
	}
	if len(s.PartitionBy) > 0 {
		v.errorf(fieldPath(sourcePath, "partition_by"), "a kafka source keeps each Kafka partition as its own partition; partition_by is not allowed")
	}
}

func (v *validator) kafkaSink(sinkPath string, s *Sink) {
	path, k := fieldPath(sinkPath, "kafka"), s.Kafka
	v.kafkaConnection(path, k.Connection())
	if k.Topic == "" {
		v.errorf(fieldPath(path, "topic"), "required; expected a topic name")
	}
	v.fields(fieldPath(path, "key_fields"), k.KeyFields)
	if k.Delivery == DeliveryAtLeastOnce {
		if k.TransactionalID != "" {
			v.errorf(fieldPath(path, "transactional_id"), "only used with delivery: exactly_once; delivery is at_least_once")
		}
		if k.MarkerGroup != "" {
			v.errorf(fieldPath(path, "marker_group"), "only used with delivery: exactly_once; delivery is at_least_once")
		}
	}
	if s.Format != FormatJSON && s.Format != FormatPayload {
		v.errorf(fieldPath(sinkPath, "format"), "a kafka sink writes json (the record with every timestamp and id) or payload (the payload alone); got %s", s.Format)
	}
}

// Cluster is the cluster block: where a pipeline's store lives when it is
// not a data directory.
type Cluster struct {
	// Kafka keeps the store on a Kafka cluster: every commit is one
	// transaction on the compacted topic flowhost.NAME.store. Hosts
	// started on the same spec, on any machines, join its hosts group:
	// one runs the pipeline, resuming from the topic, and the others stand
	// by to take over. Required in a cluster block.
	Kafka *ClusterKafka `yaml:"kafka,omitempty"`
}

// ClusterKafka is the kafka block of the cluster block.
type ClusterKafka struct {
	// Brokers are the host:port addresses to bootstrap from. At least one.
	Brokers []string `yaml:"brokers,omitempty"`
	// TLS, when set, connects with TLS.
	TLS *KafkaTLS `yaml:"tls,omitempty"`
	// SASL, when set, authenticates.
	SASL *KafkaSASL `yaml:"sasl,omitempty"`
	// Replication is the store topic's replication factor when flowhost
	// creates it; 0 means the brokers' default (default.replication.factor).
	Replication int `yaml:"replication,omitempty"`
	// SessionTimeout is how long the hosts' group waits for a host that
	// stopped heartbeating before a standby takes the pipeline over. 0
	// means 10s; the brokers bound it (group.min.session.timeout.ms, 6 s
	// by default, and group.max.session.timeout.ms).
	SessionTimeout time.Duration `yaml:"session_timeout,omitempty"`
}

// Connection returns the block's connection settings.
func (k *ClusterKafka) Connection() KafkaConnection {
	return KafkaConnection{Brokers: k.Brokers, TLS: k.TLS, SASL: k.SASL}
}

func (v *validator) cluster() {
	c := v.p.Cluster
	if c == nil {
		return
	}
	if c.Kafka == nil {
		v.errorf("cluster.kafka", "required in a cluster block: the Kafka cluster the pipeline's store lives on, such as {brokers: [\"127.0.0.1:9092\"]}")
		return
	}
	v.kafkaConnection("cluster.kafka", c.Kafka.Connection())
	if c.Kafka.SessionTimeout < 0 {
		v.errorf("cluster.kafka.session_timeout", "expected a duration above 0, such as 10s; got %v", c.Kafka.SessionTimeout)
	}
	if r := c.Kafka.Replication; r < 0 || r > 32767 {
		v.errorf("cluster.kafka.replication", "expected a replication factor from 1 to 32767, or 0 for the brokers' default; got %d", r)
	}
}

// WithCluster sets p's cluster block to c (replacing the spec's, as the
// CLI's --cluster does) and checks it as Parse checks a spec's.
func (p *Pipeline) WithCluster(c *Cluster) error {
	p.Cluster = c
	v := &validator{p: p}
	v.cluster()
	if len(v.errs) > 0 {
		return v.errs
	}
	return nil
}
