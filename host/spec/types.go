package spec

import "time"

// Defaults filled in by Parse for fields the spec leaves out. They are Flow's
// defaults where Flow has one (flow-reference.md).
const (
	// DefaultPartitions is the partition count of a source or computation.
	DefaultPartitions = 1
	// DefaultBatchMaxRows bounds the messages handed to a guest in one call.
	DefaultBatchMaxRows = 1000
	// DefaultBatchMaxBytes bounds the payload bytes handed to a guest in one
	// call: Flow's "10 MB", which YTsaurus code counts in binary units.
	DefaultBatchMaxBytes int64 = 10 << 20
	// DefaultBatchMaxDuration bounds how long the oldest message of a batch
	// waits for the batch to fill up (a linger). Flow's default is 1s, sized
	// for a cluster whose latency is seconds anyway; flowhost runs on one
	// machine and aims at tens of milliseconds end to end, so it lingers
	// 10ms: enough for batches to fill under load, little added latency
	// when the input trickles.
	DefaultBatchMaxDuration = 10 * time.Millisecond
	// DefaultBufferBytes bounds the input buffer of one computation partition;
	// a full buffer holds back the senders (backpressure).
	DefaultBufferBytes int64 = 64 << 20
	// DefaultOutOfOrdernessBound is how far behind the newest event timestamp
	// a source's event watermark stays.
	DefaultOutOfOrdernessBound = time.Minute
	// DefaultIdleDuration is how long a source partition must be silent before
	// it is left out of the watermark minimum.
	DefaultIdleDuration = time.Minute
	// DefaultIdleMaxRatio is the largest share of a source's partitions that may
	// be left out of the watermark minimum as idle.
	DefaultIdleMaxRatio = 0.4
	// DefaultGeneratorKeys is the number of distinct keys a generator cycles through.
	DefaultGeneratorKeys = 1000
	// DefaultGeneratorPayloadBytes is the size of the filler in a generated record.
	DefaultGeneratorPayloadBytes int64 = 100
	// DefaultGeneratorSeed seeds a generator's random numbers.
	DefaultGeneratorSeed = 1
	// DefaultHTTPPath is the URL path of an HTTP source or sink without one.
	DefaultHTTPPath = "/"
	// DefaultDeadLetterFile is where dead letters go when the spec has no
	// dead_letter section: a file beside the spec, so that bad records are never
	// lost and never mixed into stdout (a sink may write there) or stderr (logs).
	DefaultDeadLetterFile = "dead-letter.jsonl"
	// DefaultRetentionSources is how long consumed source records stay in a
	// data directory for replays.
	DefaultRetentionSources = time.Hour
	// DefaultRetentionSinkLogRecords is how many records an HTTP sink's log
	// keeps for resuming subscribers.
	DefaultRetentionSinkLogRecords = 100000
	// DefaultRetentionInterval is how often retention runs.
	DefaultRetentionInterval = 10 * time.Second
	// DefaultRetentionIdempotency is how far behind the event watermark a
	// source remembers the idempotency keys it accepted.
	DefaultRetentionIdempotency = time.Hour
	// DefaultRetries is how many times a failed batch is retried on a
	// fresh instance before its failure policy's Then applies.
	DefaultRetries = 2
	// DefaultBackoff is the wait before a failed batch's first retry; each
	// further retry waits twice as long, up to DefaultMaxBackoff.
	DefaultBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff caps the wait between two attempts of a batch.
	DefaultMaxBackoff = 2 * time.Second
	// DefaultQuarantineAfter is how many batches in a row may end with
	// every input failed before a computation partition is quarantined.
	DefaultQuarantineAfter = 3
)

// Upper bounds of spec fields, checked by Parse so that what parses also
// runs.
const (
	// MaxPartitions bounds the partitions of a source or computation:
	// every partition has its own queues, watermarks and (for a
	// computation) guest instance, and message ids hold 31 bits of it.
	MaxPartitions = 1 << 16
	// MaxGeneratorPayloadBytes bounds a generated record's filler.
	MaxGeneratorPayloadBytes int64 = 64 << 20
)

// Pipeline is a parsed, defaulted and validated pipeline spec. Parse
// guarantees: every name is valid and unique in its section, every stream has
// exactly one writer (a source or a computation), every stream that is read
// has that writer, the computation graph is acyclic, every relative file path
// is made absolute against the spec file's directory, and every optional
// section that the runtime needs (a generator's settings, the dead-letter
// sink) is present with its defaults.
type Pipeline struct {
	// File is the name the spec was parsed from; it is not part of the format.
	File string `yaml:"-"`
	// Name names the pipeline (logs, metrics, state directories). Required.
	Name string `yaml:"name"`
	// Tenants are the parties whose computations share this host, each
	// with its plugin directories, quotas and capability policy. Optional:
	// computations and sources without a tenant are the operator's.
	Tenants []Tenant `yaml:"tenants,omitempty"`
	// Streams declares streams explicitly. Optional: a stream is also declared
	// by the source or computation that writes it. Declaring a stream that no
	// one writes is an error.
	Streams []Stream `yaml:"streams,omitempty"`
	// Sources bring records into the pipeline. At least one is required.
	Sources []Source `yaml:"sources,omitempty"`
	// Computations are the graph's processing nodes, run as plugins.
	Computations []Computation `yaml:"computations,omitempty"`
	// Sinks emit the records of streams out of the pipeline.
	Sinks []Sink `yaml:"sinks,omitempty"`
	// DeadLetter is where records that cannot be processed go (a guest that
	// rejects or traps on a record, a record that cannot be decoded), unless a
	// computation routes its own into a stream. Default: a file named
	// DefaultDeadLetterFile in the spec file's directory.
	DeadLetter DeadLetter `yaml:"dead_letter"`
	// Retention says how long a durable run (one with a data directory)
	// keeps what it no longer needs for exactly-once: consumed source
	// records (kept for replays with --from) and the logs HTTP sinks
	// serve resuming subscribers from.
	Retention Retention `yaml:"retention"`
	// Cluster, when set, runs the pipeline on a Kafka cluster instead of
	// a data directory (see [Cluster]).
	Cluster *Cluster `yaml:"cluster,omitempty"`

	// src maps paths to nodes of the document, for positions in errors.
	src *source
}

// Stream declares a stream: a named flow of records with one writer and any
// number of readers.
type Stream struct {
	// Name names the stream. Required.
	Name string `yaml:"name"`
	// SharedWith lists the tenants, other than the one that writes the
	// stream, whose computations may read it; "*" shares it with every
	// tenant. Default: none (see Tenant for who may read what).
	SharedWith []string `yaml:"shared_with,omitempty"`
}

// SourceType names the kind of connector a source reads from.
type SourceType string

// The source types.
const (
	// SourceFile replays a file of JSON lines, one record per line.
	SourceFile SourceType = "file"
	// SourceHTTP accepts records POSTed to an HTTP endpoint.
	SourceHTTP SourceType = "http"
	// SourceGenerator makes synthetic records (tests, benchmarks, demos).
	SourceGenerator SourceType = "generator"
	// SourceKafka reads a Kafka topic, each Kafka partition a source
	// partition.
	SourceKafka SourceType = "kafka"
)

func (SourceType) values() []string { return []string{"file", "http", "generator", "kafka"} }

// Source reads records from outside the pipeline into one stream.
type Source struct {
	// Name names the source. Required, unique among sources.
	Name string `yaml:"name"`
	// Type selects the connector; its settings are in the block of the same
	// name (File, HTTP or Generator), and only that block may be present.
	// Required.
	Type SourceType `yaml:"type"`
	// Stream is the stream the source writes; the source is its only writer.
	// Required.
	Stream string `yaml:"stream"`
	// Tenant, when set, names the tenant the source and its stream belong
	// to; its quotas.ingest_rate paces the source. Default: the operator's.
	Tenant string `yaml:"tenant,omitempty"`
	// Partitions is the number of source partitions; each keeps its own
	// non-decreasing AlignmentTimestamp. 1..MaxPartitions; default 1.
	Partitions int `yaml:"partitions"`
	// PartitionBy lists top-level fields of a record's JSON payload whose
	// values are hashed to pick the record's partition. Empty: records are
	// spread round robin.
	PartitionBy []string `yaml:"partition_by,omitempty"`
	// File configures a source of type file; required for it.
	File *FileSource `yaml:"file,omitempty"`
	// HTTP configures a source of type http; required for it.
	HTTP *HTTPEndpoint `yaml:"http,omitempty"`
	// Generator configures a source of type generator; Parse fills it with
	// defaults when the spec leaves it out.
	Generator *GeneratorSource `yaml:"generator,omitempty"`
	// Kafka configures a source of type kafka; required for it.
	Kafka *KafkaSource `yaml:"kafka,omitempty"`
	// Format is how the source reads a record's bytes: envelope, json or
	// raw (see SourceFormat). Parse fills in the type's default
	// (DefaultSourceFormat): envelope for file and http, json for kafka.
	// Refused for a generator.
	Format SourceFormat `yaml:"format,omitempty"`
	// EventTime says where the event time is, for formats json (a field)
	// and, for kafka sources, raw and json (a header). Default: the Kafka
	// timestamp for kafka sources, the write time for the others.
	EventTime *EventTime `yaml:"event_time,omitempty"`
	// Watermark configures how the source's event watermark is estimated.
	Watermark SourceWatermark `yaml:"watermark"`
}

func (s *Source) setDefaults() {
	s.Partitions = DefaultPartitions
	s.Watermark.setDefaults()
}

// FileSource configures a file source.
type FileSource struct {
	// Path is the file of JSON lines to read. A relative path in the spec is
	// resolved against the directory of the spec file. Required.
	Path string `yaml:"path"`
}

// HTTPEndpoint is an address and URL path served by the host, for an HTTP
// source (records are POSTed to it) or an HTTP sink (subscribers read from it).
// No two HTTP sources or sinks may share an address and path, unless the
// port is 0 (a fresh port each).
type HTTPEndpoint struct {
	// Listen is the host:port to listen on, for example "127.0.0.1:8081";
	// port 0 picks a free port. A listen without a host (":8081") means
	// 127.0.0.1: Parse fills it in. A host that is not a loopback address
	// needs TLS, or flowhost run --insecure-listen. Required.
	Listen string `yaml:"listen"`
	// Path is the URL path, starting with "/". Default "/".
	Path string `yaml:"path"`
	// TLS, when set, serves HTTPS with its certificate and key.
	TLS *EndpointTLS `yaml:"tls,omitempty"`
	// Auth, when set, requires every request to carry a bearer token.
	Auth *EndpointAuth `yaml:"auth,omitempty"`
}

// EndpointTLS is the certificate an HTTP endpoint serves HTTPS with.
type EndpointTLS struct {
	// CertFile is a PEM file of the certificate (chain, leaf first);
	// relative to the spec's directory. Required.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM file of its private key; relative to the spec's
	// directory. Required.
	KeyFile string `yaml:"key_file"`
}

// EndpointAuth says where the bearer token of an HTTP endpoint is: in a
// file or in an environment variable, exactly one of them, never in the
// spec itself (specs are committed, shared and logged; secrets should not
// be). The host reads it when the run starts.
type EndpointAuth struct {
	// BearerTokenFile is a file holding the token (surrounding white
	// space, such as a final newline, is not part of it); relative to the
	// spec's directory.
	BearerTokenFile string `yaml:"bearer_token_file,omitempty"`
	// BearerTokenEnv names an environment variable holding the token.
	BearerTokenEnv string `yaml:"bearer_token_env,omitempty"`
}

func (h *HTTPEndpoint) setDefaults() { h.Path = DefaultHTTPPath }

// GeneratorSource configures a generator source: records with a key field
// cycling over Keys values and a filler payload, deterministic for a seed.
type GeneratorSource struct {
	// Count is the number of records to generate; 0 means no end. Default 0.
	Count int64 `yaml:"count"`
	// Rate is the number of records per second; 0 means as fast as possible.
	// Default 0.
	Rate float64 `yaml:"rate"`
	// Keys is the number of distinct keys. At least 1; default 1000.
	Keys int64 `yaml:"keys"`
	// PayloadBytes is the size of each record's filler payload. Default 100.
	PayloadBytes int64 `yaml:"payload_bytes" spec:"size"`
	// Seed seeds the random numbers, so a run can be repeated. Default 1.
	Seed int64 `yaml:"seed"`
	// EventLag makes events arrive out of order: each record's
	// EventTimestamp is its generation time minus a uniformly random lag in
	// [0, EventLag]. Default 0 (in order).
	EventLag time.Duration `yaml:"event_lag"`
}

func (g *GeneratorSource) setDefaults() {
	g.Keys = DefaultGeneratorKeys
	g.PayloadBytes = DefaultGeneratorPayloadBytes
	g.Seed = DefaultGeneratorSeed
}

// SourceWatermark configures the event watermark of a source: per partition
// the newest event timestamp minus OutOfOrdernessBound, over partitions the
// minimum, leaving idle partitions out.
type SourceWatermark struct {
	// OutOfOrdernessBound is how late an event may arrive relative to the newest
	// one seen and still be ahead of the watermark. Default 1m.
	OutOfOrdernessBound time.Duration `yaml:"out_of_orderness_bound"`
	// IdlePartitions says when a silent partition stops holding the watermark back.
	IdlePartitions IdlePartitions `yaml:"idle_partitions"`
}

func (w *SourceWatermark) setDefaults() {
	w.OutOfOrdernessBound = DefaultOutOfOrdernessBound
	w.IdlePartitions.setDefaults()
}

// IdlePartitions configures idle-partition detection for a source
// watermark. A partition is idle when it has had no record accepted or
// read for Duration of processing time and has none waiting; when every
// partition is, the source is idle and left out of the event watermark of
// the computations it feeds until it accepts a record again (see the
// "source watermark" section of README.md).
type IdlePartitions struct {
	// Duration is the idle timeout; 0 turns detection off. Default 1m.
	Duration time.Duration `yaml:"duration"`
	// MaxRatio is the largest share of partitions that may be left out of
	// the source's own minimum as idle while some partition is not, in
	// [0, 1] (never all of them). Default 0.4.
	MaxRatio float64 `yaml:"max_ratio"`
}

func (i *IdlePartitions) setDefaults() {
	i.Duration = DefaultIdleDuration
	i.MaxRatio = DefaultIdleMaxRatio
}

// ComputationKind says what a computation may do and how its outputs are
// timestamped.
type ComputationKind string

// The computation kinds.
const (
	// KindTransform is arbitrary logic with keyed state and timers; its
	// outputs are stamped with the time they are made.
	KindTransform ComputationKind = "transform"
	// KindMap is a deterministic per-message function without state or
	// timers; its outputs inherit their parent's timestamps.
	KindMap ComputationKind = "map"
)

func (ComputationKind) values() []string { return []string{"transform", "map"} }

// TimeType selects the timestamp a computation merges its input streams on.
type TimeType string

// The time types.
const (
	// TimeEvent merges on AlignmentTimestamp plus each stream's bias (the
	// StabilizedEventTimestamp) plus the stream's delay.
	TimeEvent TimeType = "event"
	// TimeAlignment merges on the raw AlignmentTimestamp plus the stream's
	// delay, with the bias off.
	TimeAlignment TimeType = "alignment"
)

func (TimeType) values() []string { return []string{"event", "alignment"} }

// DistributionOrdering selects whether the route from a sending partition to a
// destination key is FIFO.
type DistributionOrdering string

// The distribution orderings.
const (
	// OrderingStrict keeps every (sending partition, destination computation,
	// destination key) route FIFO, which gives derived messages their
	// ordering guarantee.
	OrderingStrict DistributionOrdering = "strict"
	// OrderingRelaxed gives up that FIFO for throughput.
	OrderingRelaxed DistributionOrdering = "relaxed"
)

func (DistributionOrdering) values() []string { return []string{"strict", "relaxed"} }

// Computation is a node of the pipeline graph, run by a plugin: it reads its
// input streams in the guaranteed order and writes its output streams.
type Computation struct {
	// Name names the computation. Required, unique among computations.
	Name string `yaml:"name"`
	// Plugin names the plugin that implements the computation; it is resolved
	// later against the plugin directories. Required.
	Plugin string `yaml:"plugin"`
	// Tenant, when set, names the tenant the computation belongs to: its
	// plugin is looked up in the tenant's plugin directories, runs under
	// the tenant's quotas, policy and share of the workers, and may read
	// only the streams the tenant may read. Default: the operator's (the
	// plugin directories given to the host, no quotas beyond the
	// manifest's limits).
	Tenant string `yaml:"tenant,omitempty"`
	// Kind is transform or map. Default transform.
	Kind ComputationKind `yaml:"kind"`
	// Partitions is the number of computation partitions; the key picks one.
	// 1..MaxPartitions; default 1.
	Partitions int `yaml:"partitions"`
	// GroupBy lists top-level fields of a record's JSON payload that form its
	// key, the unit of state, timers and ordering. Empty: unkeyed.
	GroupBy []string `yaml:"group_by,omitempty"`
	// InputStreams are the streams the computation reads. At least one.
	InputStreams []string `yaml:"input_streams,omitempty"`
	// OutputStreams are the streams the computation writes; it is their only
	// writer. May be empty.
	OutputStreams []string `yaml:"output_streams,omitempty"`
	// InputOrdering configures the merge of the input streams.
	InputOrdering InputOrdering `yaml:"input_ordering"`
	// WatermarkStrategy, when set, holds the event watermark of what the
	// computation emits at most at the newest event timestamp it emitted
	// minus the bound (none before its first output); the inputs'
	// watermark, lowered to what is in flight, still caps it. Only for
	// kind transform.
	WatermarkStrategy *WatermarkStrategy `yaml:"watermark_strategy,omitempty"`
	// DistributionOrdering is strict or relaxed. Default strict.
	DistributionOrdering DistributionOrdering `yaml:"distribution_ordering"`
	// Batch bounds what the guest receives in one call.
	Batch Batch `yaml:"batch"`
	// BufferBytes bounds the input buffer of each partition; when it is full,
	// senders wait (backpressure). At least 1; default 64MiB.
	BufferBytes int64 `yaml:"buffer_bytes" spec:"size"`
	// Parameters is free-form configuration passed to the plugin's init.
	// Values are nil, bool, int64 (uint64 above the int64 range), float64,
	// string, []any or map[string]any.
	Parameters map[string]any `yaml:"parameters,omitempty"`
	// DeadLetter, when set, routes the computation's dead letters into a stream
	// (of which the computation becomes the writer); otherwise they go to the
	// pipeline's dead-letter sink.
	DeadLetter *DeadLetterRoute `yaml:"dead_letter,omitempty"`
	// OnFailure says what happens to a batch the guest fails: how often it
	// is retried, how long between attempts, what then, and when the
	// partition stops calling the guest.
	OnFailure OnFailure `yaml:"on_failure"`
}

func (c *Computation) setDefaults() {
	c.Kind = KindTransform
	c.Partitions = DefaultPartitions
	c.InputOrdering.TimeType = TimeEvent
	c.DistributionOrdering = OrderingStrict
	c.Batch.setDefaults()
	c.BufferBytes = DefaultBufferBytes
	c.OnFailure.setDefaults()
}

// FailureAction is what happens to a batch that failed every attempt.
type FailureAction string

// The failure actions.
const (
	// FailDeadLetter sends the batch's inputs (messages and due timers) to
	// the computation's dead-letter route with the last attempt's error, in
	// the batch's epoch, and the run goes on.
	FailDeadLetter FailureAction = "dead_letter"
	// FailStop fails the run. With a data directory nothing of the batch
	// was committed, so the next run retries it.
	FailStop FailureAction = "stop"
)

func (FailureAction) values() []string { return []string{"dead_letter", "stop"} }

// OnFailure is a computation's failure policy: what the host does when the
// guest fails a batch (a trap, a deadline, a response that cannot be
// decoded or breaks the ABI's rules, or the guest reporting the batch
// failed) or a key (the guest reporting that key failed).
//
// A failed batch is retried, on a fresh instance, with the same inputs,
// state and due timers (the state lives in the host, so a retry loses
// nothing) and the same epoch, which commits once, with the effects of
// the attempt that succeeded only. The k-th retry waits Backoff *
// 2^(k-1), at most MaxBackoff. When every attempt failed, Then applies:
// dead_letter narrows the batch down (and a failed key at once, without a
// retry) until only the inputs that fail on their own are dead-lettered,
// the rest committing in order; stop fails the run. After QuarantineAfter
// batches in a row in which every input failed the partition is
// quarantined: it no longer calls the guest and dead-letters every
// further batch, until the run restarts.
//
// The zero value (a Computation built without Parse) retries nothing,
// dead-letters and never quarantines.
type OnFailure struct {
	// Retries is how many times a failed batch is retried, so a batch is
	// tried at most Retries+1 times. At least 0; default 2.
	Retries int `yaml:"retries"`
	// Backoff is the wait before the first retry; each further retry waits
	// twice as long as the one before. At most MaxBackoff; default 50ms.
	Backoff time.Duration `yaml:"backoff"`
	// MaxBackoff caps the wait between two attempts. Default 2s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Then is what happens when the retries are exhausted: dead_letter
	// (default: narrow the batch down and dead-letter the inputs that fail
	// on their own) or stop.
	Then FailureAction `yaml:"then"`
	// QuarantineAfter is how many batches in a row of one partition may
	// end with every input failed (after retries and narrowing, no input
	// of the batch succeeded) before the partition is quarantined; a batch
	// in which any input succeeds starts the count again, so one bad input
	// among good ones never counts. 0 never quarantines; with Then stop the
	// run stops at the first batch that failed every attempt. At least 0;
	// default 3.
	QuarantineAfter int `yaml:"quarantine_after"`
}

func (f *OnFailure) setDefaults() {
	f.Retries = DefaultRetries
	f.Backoff = DefaultBackoff
	f.MaxBackoff = DefaultMaxBackoff
	f.Then = FailDeadLetter
	f.QuarantineAfter = DefaultQuarantineAfter
}

// InputOrdering configures how a computation merges its input streams.
type InputOrdering struct {
	// TimeType is event or alignment. Default event.
	TimeType TimeType `yaml:"time_type"`
	// StreamDelays holds back input streams: a stream's messages are merged as
	// if their timestamps were later by its delay. Keys must be input streams
	// of the computation; a stream not listed has no delay.
	StreamDelays map[string]time.Duration `yaml:"stream_delays,omitempty"`
}

// WatermarkStrategy configures the event watermark a transform computes for
// what it emits: for a transform that sets its outputs' event timestamps
// itself, so that its inputs' watermark says nothing about them.
type WatermarkStrategy struct {
	// OutOfOrdernessBound is how far behind the newest emitted event timestamp
	// the watermark stays. Default 1m.
	OutOfOrdernessBound time.Duration `yaml:"out_of_orderness_bound"`
}

func (w *WatermarkStrategy) setDefaults() { w.OutOfOrdernessBound = DefaultOutOfOrdernessBound }

// Batch bounds one call into a guest; a batch is cut when any limit is reached.
type Batch struct {
	// MaxRows is the most messages in a batch. At least 1; default 1000.
	MaxRows int `yaml:"max_rows"`
	// MaxBytes is the most payload bytes in a batch. At least 1; default 10MiB.
	MaxBytes int64 `yaml:"max_bytes" spec:"size"`
	// MaxDuration is the longest a batch waits to fill. Above 0; default 1s.
	MaxDuration time.Duration `yaml:"max_duration"`
}

func (b *Batch) setDefaults() {
	b.MaxRows = DefaultBatchMaxRows
	b.MaxBytes = DefaultBatchMaxBytes
	b.MaxDuration = DefaultBatchMaxDuration
}

// DeadLetterRoute routes a computation's dead letters into a stream.
type DeadLetterRoute struct {
	// Stream receives the dead letters. Required.
	Stream string `yaml:"stream"`
}

// SinkType names the kind of connector a sink writes to.
type SinkType string

// The sink types.
const (
	// SinkFile appends records to a file as JSON lines.
	SinkFile SinkType = "file"
	// SinkStdout writes records to standard output as JSON lines.
	SinkStdout SinkType = "stdout"
	// SinkHTTP serves records to HTTP subscribers.
	SinkHTTP SinkType = "http"
	// SinkKafka produces records to a Kafka topic (exactly once with a data
	// directory; see [KafkaSink.Delivery]).
	SinkKafka SinkType = "kafka"
)

func (SinkType) values() []string { return []string{"file", "stdout", "http", "kafka"} }

// Sink emits the records of one or more streams out of the pipeline.
type Sink struct {
	// Name names the sink. Required, unique among sinks.
	Name string `yaml:"name"`
	// Type selects the connector; file and http take the block of the same
	// name, and only that block may be present. Required.
	Type SinkType `yaml:"type"`
	// Streams are the streams the sink reads. At least one.
	Streams []string `yaml:"streams,omitempty"`
	// File configures a sink of type file; required for it.
	File *FileSink `yaml:"file,omitempty"`
	// HTTP configures a sink of type http; required for it.
	HTTP *HTTPEndpoint `yaml:"http,omitempty"`
	// Kafka configures a sink of type kafka; required for it.
	Kafka *KafkaSink `yaml:"kafka,omitempty"`
	// Format is how the sink writes records: json (the record with every
	// timestamp and id, the default; every sink), payload (the payload
	// alone; every sink) or text (one aligned line per record, for
	// people; file and stdout sinks).
	Format SinkFormat `yaml:"format"`
}

// SinkFormat is the record format of a sink.
type SinkFormat string

// Sink formats.
const (
	FormatJSON SinkFormat = "json"
	FormatText SinkFormat = "text"
	// FormatPayload writes the payload alone: one per line for file,
	// stdout and http sinks (a payload that is JSON compacted; one that
	// is not and holds a newline is refused), the value for kafka sinks.
	FormatPayload SinkFormat = "payload"
)

func (SinkFormat) values() []string { return []string{"json", "text", "payload"} }

func (s *Sink) setDefaults() { s.Format = FormatJSON }

// FileSink configures a file sink.
type FileSink struct {
	// Path is the file to append JSON lines to. A relative path in the spec is
	// resolved against the directory of the spec file. Required.
	Path string `yaml:"path"`
}

// DeadLetterType names where the pipeline's dead letters go.
type DeadLetterType string

// The dead-letter sink types.
const (
	// DeadLetterFile appends dead letters to a file as JSON lines.
	DeadLetterFile DeadLetterType = "file"
	// DeadLetterStdout writes dead letters to standard output as JSON lines.
	DeadLetterStdout DeadLetterType = "stdout"
)

func (DeadLetterType) values() []string { return []string{"file", "stdout"} }

// DeadLetter is the pipeline's dead-letter sink.
type DeadLetter struct {
	// Type is file or stdout. Default file.
	Type DeadLetterType `yaml:"type"`
	// File configures type file; Parse fills it in with DefaultDeadLetterFile
	// when the spec leaves it out. Only for type file.
	File *FileSink `yaml:"file,omitempty"`
}

func (p *Pipeline) setDefaults() {
	p.DeadLetter.Type = DeadLetterFile
	p.Retention.setDefaults()
}

// Retention bounds what a durable run keeps after it is consumed.
type Retention struct {
	// Sources is how long a source record is kept, counted from its
	// WriteTimestamp, once every reader has it: the window that
	// `flowhost run --from` can replay. 0 deletes records as soon as they
	// are routed. Default 1h.
	Sources time.Duration `yaml:"sources"`
	// SinkLogRecords is how many of its most recent records an HTTP sink's
	// log keeps for subscribers that resume with ?from=N. At least 1;
	// default 100000.
	SinkLogRecords int64 `yaml:"sink_log_records"`
	// Interval is how often retention runs. Above 0; default 10s.
	Interval time.Duration `yaml:"interval"`
	// Idempotency is how long, in event time behind a source's event
	// watermark, the source remembers the idempotency keys (the record
	// field "id") it accepted: a record sent again within it is not
	// appended twice. Default 1h.
	Idempotency time.Duration `yaml:"idempotency"`
}

func (r *Retention) setDefaults() {
	r.Sources = DefaultRetentionSources
	r.SinkLogRecords = DefaultRetentionSinkLogRecords
	r.Interval = DefaultRetentionInterval
	r.Idempotency = DefaultRetentionIdempotency
}
