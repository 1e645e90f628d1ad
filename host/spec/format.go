package spec

import "strings"

// SourceFormat is how a source reads the bytes of a record: the line of a
// file or HTTP body, or the value of a Kafka record.
type SourceFormat string

// The source formats.
const (
	// SourceEnvelope reads the wrapper {write_ts, event_ts, id, payload}:
	// the record's timestamps and idempotency key travel with it. The
	// default of file and http sources.
	SourceEnvelope SourceFormat = "envelope"
	// SourceJSON takes the bytes themselves, which must be valid JSON, as
	// the payload; the event time comes from event_time. The default of
	// kafka sources.
	SourceJSON SourceFormat = "json"
	// SourceRaw takes the bytes as they are as the payload, JSON or not;
	// the event time is the Kafka timestamp (or an event_time header) or
	// the arrival time.
	SourceRaw SourceFormat = "raw"
)

func (SourceFormat) values() []string { return []string{"envelope", "json", "raw"} }

// DefaultSourceFormat returns the format of a source of type t that gives
// none: envelope for file and http sources (what they have always read),
// json for kafka sources, and "" for a generator, which makes its own
// records.
func DefaultSourceFormat(t SourceType) SourceFormat {
	switch t {
	case SourceFile, SourceHTTP:
		return SourceEnvelope
	case SourceKafka:
		return SourceJSON
	}
	return ""
}

// EventTime says where a record's event time is: a top-level field of its
// JSON payload (format json) or, for kafka sources, a record header, in a
// time format. Without it the event time is the Kafka timestamp for kafka
// sources and the write time (arrival) for the others.
type EventTime struct {
	// Field is a top-level field of the JSON payload.
	Field string `yaml:"field,omitempty"`
	// Header is the name of a Kafka record header (kafka sources only).
	Header string `yaml:"header,omitempty"`
	// Format is the time's format. Required.
	Format TimeFormat `yaml:"format,omitempty"`
}

// EventTimeSpec returns the source's event_time block and its path under
// sourcePath, or nil: the block at the source level, or the one an older
// spec wrote inside its kafka block.
func (s *Source) EventTimeSpec(sourcePath string) (*EventTime, string) {
	if s.EventTime != nil {
		return s.EventTime, fieldPath(sourcePath, "event_time")
	}
	if s.Kafka != nil && s.Kafka.EventTime != nil {
		return s.Kafka.EventTime, fieldPath(sourcePath, "kafka.event_time")
	}
	return nil, ""
}

// sourceFormat checks a source's format, event_time and partition_by
// against each other and the source type.
func (v *validator) sourceFormat(path string, s *Source) {
	fp := fieldPath(path, "format")
	if s.Type == SourceGenerator {
		if s.Format != "" {
			v.errorf(fp, "a generator makes its own records (JSON objects with key, seq and filler); it has no format")
		}
		if s.EventTime != nil {
			v.errorf(fieldPath(path, "event_time"), "a generator stamps its own event times (see generator.event_lag); event_time is not allowed")
		}
		return
	}
	if s.Type == "" {
		return // reported already
	}
	if s.Kafka != nil && s.Kafka.EventTime != nil && s.EventTime != nil {
		v.errorf(fieldPath(path, "kafka.event_time"), "give event_time once, at the source level (sources[].event_time)")
	}
	f := s.Format
	if f == "" {
		f = DefaultSourceFormat(s.Type)
	}
	if f == SourceRaw && len(s.PartitionBy) > 0 {
		v.errorf(fieldPath(path, "partition_by"), "format raw payloads are not read as JSON, so no field can pick a partition; use format json or leave partition_by out")
	}
	e, ep := s.EventTimeSpec(path)
	if e == nil {
		return
	}
	switch {
	case e.Field != "" && e.Header != "":
		v.errorf(fieldPath(ep, "header"), "give field or header, not both")
	case e.Field == "" && e.Header == "":
		if s.Type == SourceKafka {
			v.errorf(ep, "expected field (a top-level field of the JSON value) or header (a record header)")
		} else {
			v.errorf(ep, "expected field (a top-level field of the JSON payload)")
		}
	case e.Format == "":
		v.errorf(fieldPath(ep, "format"), "required; expected one of %s", strings.Join(e.Format.values(), ", "))
	}
	switch {
	case e.Header != "" && s.Type != SourceKafka:
		v.errorf(fieldPath(ep, "header"), "only kafka records have headers; a %s source takes the event time from a field of its JSON payload", s.Type)
	case e.Field != "" && f == SourceEnvelope:
		v.errorf(fieldPath(ep, "field"), "format envelope carries the event time in its event_ts; event_time.field needs format: json")
	case e.Field != "" && f == SourceRaw:
		v.errorf(fieldPath(ep, "field"), "format raw payloads are not read as JSON, so the event time cannot come from a field; use format json, or leave event_time out for the %s", rawEventTime(s.Type))
	}
}

// rawEventTime says what a raw record's event time is without event_time.
func rawEventTime(t SourceType) string {
	if t == SourceKafka {
		return "Kafka timestamp (or give event_time.header)"
	}
	return "arrival time"
}
