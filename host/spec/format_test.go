package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSourceFormats(t *testing.T) {
	const kafka = `kafka: {brokers: ["127.0.0.1:9092"], topic: t}`
	tests := []struct {
		name   string
		source string // the flow mapping's fields after name, stream
		format SourceFormat
		event  *EventTime
	}{
		{"file default", "type: file, file: {path: in.jsonl}", SourceEnvelope, nil},
		{"http default", `type: http, http: {listen: "127.0.0.1:0"}`, SourceEnvelope, nil},
		{"kafka default", "type: kafka, " + kafka, SourceJSON, nil},
		{"generator has none", "type: generator", "", nil},
		{"file json with a field", "type: file, file: {path: in.jsonl}, format: json, event_time: {field: ts, format: rfc3339}",
			SourceJSON, &EventTime{Field: "ts", Format: TimeRFC3339}},
		{"file raw", "type: file, file: {path: in.log}, format: raw", SourceRaw, nil},
		{"http json", `type: http, http: {listen: "127.0.0.1:0"}, format: json, partition_by: [k], event_time: {field: at, format: unix_s}`,
			SourceJSON, &EventTime{Field: "at", Format: TimeUnixS}},
		{"kafka envelope", "type: kafka, format: envelope, " + kafka, SourceEnvelope, nil},
		{"kafka raw with a header", "type: kafka, format: raw, event_time: {header: ts, format: unix_ms}, " + kafka,
			SourceRaw, &EventTime{Header: "ts", Format: TimeUnixMS}},
		{"kafka event_time in the kafka block", `type: kafka, kafka: {brokers: ["127.0.0.1:9092"], topic: t, event_time: {field: ts, format: unix_ns}}`,
			SourceJSON, &EventTime{Field: "ts", Format: TimeUnixNS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: p\nsources: [{name: in, stream: s, " + tt.source + "}]\n"
			p, err := Parse("/d/p.yaml", []byte(src))
			require.NoError(t, err)
			require.Equal(t, tt.format, p.Sources[0].Format)
			require.Equal(t, tt.event, p.Sources[0].EventTime)
		})
	}
}

func TestParseSinkFormats(t *testing.T) {
	blocks := map[SinkType]string{
		SinkFile:   "file: {path: out.jsonl}",
		SinkStdout: "",
		SinkHTTP:   `http: {listen: "127.0.0.1:0"}`,
		SinkKafka:  `kafka: {brokers: ["127.0.0.1:9092"], topic: t}`,
	}
	allowed := map[SinkType][]SinkFormat{
		SinkFile:   {FormatJSON, FormatText, FormatPayload},
		SinkStdout: {FormatJSON, FormatText, FormatPayload},
		SinkHTTP:   {FormatJSON, FormatPayload},
		SinkKafka:  {FormatJSON, FormatPayload},
	}
	for typ, block := range blocks {
		for _, f := range FormatJSON.values() {
			t.Run(string(typ)+"/"+f, func(t *testing.T) {
				src := "name: p\nsources: [{name: in, type: generator, stream: s}]\nsinks: [{name: o, type: " + string(typ) + ", streams: [s], format: " + f
				if block != "" {
					src += ", " + block
				}
				p, err := Parse("/d/p.yaml", []byte(src+"}]\n"))
				ok := false
				for _, a := range allowed[typ] {
					ok = ok || string(a) == f
				}
				if !ok {
					list := errorList(t, err)
					require.Len(t, list, 1)
					require.Equal(t, "sinks[0].format", list[0].Path)
					return
				}
				require.NoError(t, err)
				require.Equal(t, SinkFormat(f), p.Sinks[0].Format)
			})
		}
	}
}

func TestParseFormatErrors(t *testing.T) {
	const file = "name: p\nsources: [{name: in, type: file, stream: s, file: {path: f}, "
	const kafka = "name: p\nsources: [{name: in, type: kafka, stream: s, kafka: {brokers: [\"h:1\"], topic: t}, "
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown format", file + "format: »csv}]\n",
			[]string{`sources[0].format: expected one of envelope, json, raw; got "csv"`}},
		{"generator format", "name: p\nsources: [{name: in, type: generator, stream: s, format: »json}]\n",
			[]string{`sources[0].format: a generator makes its own records (JSON objects with key, seq and filler); it has no format`}},
		{"generator event time", "name: p\nsources: [{name: in, type: generator, stream: s, event_time: »{field: ts, format: unix_s}}]\n",
			[]string{`sources[0].event_time: a generator stamps its own event times (see generator.event_lag); event_time is not allowed`}},
		{"raw partition_by", file + "format: raw, partition_by: »[k]}]\n",
			[]string{`sources[0].partition_by: format raw payloads are not read as JSON, so no field can pick a partition; use format json or leave partition_by out`}},
		{"field with envelope", file + "event_time: {field: »ts, format: unix_s}}]\n",
			[]string{`sources[0].event_time.field: format envelope carries the event time in its event_ts; event_time.field needs format: json`}},
		{"field with raw", file + "format: raw, event_time: {field: »ts, format: unix_s}}]\n",
			[]string{`sources[0].event_time.field: format raw payloads are not read as JSON, so the event time cannot come from a field; use format json, or leave event_time out for the arrival time`}},
		{"kafka field with raw", kafka + "format: raw, event_time: {field: »ts, format: unix_s}}]\n",
			[]string{`sources[0].event_time.field: format raw payloads are not read as JSON, so the event time cannot come from a field; use format json, or leave event_time out for the Kafka timestamp (or give event_time.header)`}},
		{"header on a file source", file + "format: json, event_time: {header: »ts, format: unix_s}}]\n",
			[]string{`sources[0].event_time.header: only kafka records have headers; a file source takes the event time from a field of its JSON payload`}},
		{"no field", file + "format: json, event_time: »{format: unix_s}}]\n",
			[]string{`sources[0].event_time: expected field (a top-level field of the JSON payload)`}},
		{"no time format", file + "format: json, event_time: »{field: ts}}]\n",
			[]string{`sources[0].event_time.format: required; expected one of unix_s, unix_ms, unix_us, unix_ns, rfc3339`}},
		{"bad time format", file + "format: json, event_time: {field: ts, format: »unix_h}}]\n",
			[]string{`sources[0].event_time.format: expected one of unix_s, unix_ms, unix_us, unix_ns, rfc3339; got "unix_h"`}},
		{"event time twice", "name: p\nsources: [{name: in, type: kafka, stream: s, event_time: {field: a, format: unix_s}, kafka: {brokers: [\"h:1\"], topic: t, event_time: »{field: b, format: unix_s}}}]\n",
			[]string{`sources[0].kafka.event_time: give event_time once, at the source level (sources[].event_time)`}},
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
				require.Equal(t, positions[i], position{e.Line, e.Column}, "position of %q", got[i])
			}
		})
	}
}
