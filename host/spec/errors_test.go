package spec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// marker stands in a test spec right before the node an error must point at;
// it is removed before parsing.
const marker = "»"

type position struct{ line, column int }

// unmark removes the markers from src and returns their positions, in order.
func unmark(t *testing.T, src string) (string, []position) {
	t.Helper()
	var positions []position
	lines := strings.Split(src, "\n")
	for i, line := range lines {
		for {
			at := strings.Index(line, marker)
			if at < 0 {
				break
			}
			line = line[:at] + line[at+len(marker):]
			positions = append(positions, position{i + 1, at + 1})
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n"), positions
}

// errorList asserts err is an ErrorList and returns it.
func errorList(t interface {
	require.TestingT
	Helper()
}, err error) ErrorList {
	t.Helper()
	require.Error(t, err)
	var list ErrorList
	require.ErrorAs(t, err, &list)
	require.NotEmpty(t, list)
	return list
}

// The preamble most cases build on: one source writing s.
const preamble = "name: p\nsources: [{name: in, type: generator, stream: s}]\n"

// tenantPreamble opens a tenant's flow mapping; a case adds its fields and
// closes it with "}]\n".
const tenantPreamble = preamble + "tenants: [{name: t, plugin_dirs: [d], "

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		// src marks with » the place of each expected error.
		src string
		// want is "path: message" of each error, in file order.
		want []string
	}{
		// Form: syntax, shape, types.
		{"syntax error", "name: p\nsources: [»{name: in\n",
			[]string{`could not find flow mapping end token '}'`}},
		{"duplicate key", "name: p\n»name: q\n",
			[]string{`mapping key "name" already defined at [1:1]`}},
		{"empty spec", "»# nothing here\n",
			[]string{`the spec is empty; expected a mapping with name, sources, computations and sinks`}},
		{"root is a list", "»- name: p\n",
			[]string{`expected a mapping; got a list`}},
		{"two documents", "name: p\n---\n»name: q\n",
			[]string{`expected a single YAML document; document 2 is another`}},
		{"unknown field close to a known one", preamble + "computations:\n  - name: c\n    plugin: p\n    input_streams: [s]\n    »partitons: 2\n",
			[]string{`computations[0].partitons: unknown field; did you mean "partitions"?`}},
		{"unknown field far from any", "name: p\n»owner: me\nsources: [{name: in, type: generator, stream: s}]\n",
			[]string{`owner: unknown field; expected one of name, tenants, streams, sources, computations, sinks, dead_letter, retention, cluster`}},
		{"unknown nested field", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {»rows: 5}}]\n",
			[]string{`computations[0].batch.rows: unknown field; expected one of max_rows, max_bytes, max_duration`}},
		{"string for an integer", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: »four}]\n",
			[]string{`sources[0].partitions: expected an integer; got "four"`}},
		{"fraction for an integer", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: »1.5}]\n",
			[]string{`sources[0].partitions: expected an integer; got number 1.5`}},
		{"integer for a string", "name: »12\nsources: [{name: in, type: generator, stream: s}]\n",
			[]string{`name: expected a string; got integer 12 (quote it to make it a string)`}},
		{"scalar for a list", preamble + "computations: [{name: c, plugin: p, input_streams: »s}]\n",
			[]string{`computations[0].input_streams: expected a list; got "s"`}},
		{"list for a mapping", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: »[1]}]\n",
			[]string{`computations[0].batch: expected a mapping; got a list`}},
		{"parameters not a mapping", preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: »[1, 2]}]\n",
			[]string{`computations[0].parameters: expected a mapping; got a list`}},
		{"integer too large", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {count: »18446744073709551615}}]\n",
			[]string{`sources[0].generator.count: integer 18446744073709551615 is out of range`}},
		{"misspelled kind", preamble + "computations:\n  - name: c\n    plugin: p\n    input_streams: [s]\n    kind: »transfrom\n",
			[]string{`computations[0].kind: expected one of transform, map; got "transfrom"`}},
		{"misspelled source type", "name: p\nsources: [{name: in, type: »kafk, stream: s}]\n",
			[]string{`sources[0].type: expected one of file, http, generator, kafka; got "kafk"`}},
		{"misspelled time type", preamble + "computations: [{name: c, plugin: p, input_streams: [s], input_ordering: {time_type: »processing}}]\n",
			[]string{`computations[0].input_ordering.time_type: expected one of event, alignment; got "processing"`}},
		{"misspelled distribution ordering", preamble + "computations: [{name: c, plugin: p, input_streams: [s], distribution_ordering: »loose}]\n",
			[]string{`computations[0].distribution_ordering: expected one of strict, relaxed; got "loose"`}},
		{"integer key in parameters", preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: {»1: x}}]\n",
			[]string{`computations[0].parameters: expected a string key; got integer 1 (quote it to make it a string)`}},
		{"merge key without a mapping", preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: {»<<}}]\n",
			[]string{`computations[0].parameters: << is YAML's merge key; expected a mapping or a list of mappings to merge after it`}},
		{"merge of a scalar", preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: {<<: »3}}]\n",
			[]string{`computations[0].parameters: expected a mapping or a list of mappings to merge; got integer 3`}},
		{"unknown alias", "name: p\nsources: [{name: in, type: generator, stream: »*str}]\n",
			[]string{`sources[0].stream: alias *str refers to no anchor defined before it`}},
		{"several form errors at once", "name: p\n»sorces: []\nsources: [{name: in, type: »gen, stream: s, partitions: »x}]\n",
			[]string{
				`sorces: unknown field; did you mean "sources"?`,
				`sources[0].type: expected one of file, http, generator, kafka; got "gen"`,
				`sources[0].partitions: expected an integer; got "x"`,
			}},

		// Durations and sizes.
		{"duration in words", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_duration: »1 second}}]\n",
			[]string{`computations[0].batch.max_duration: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got "1 second"`}},
		{"duration as a fraction", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_duration: »1.5}}]\n",
			[]string{`computations[0].batch.max_duration: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got number 1.5`}},
		{"negative delay", preamble + "computations: [{name: c, plugin: p, input_streams: [s], input_ordering: {stream_delays: {s: »-5m}}}]\n",
			[]string{`computations[0].input_ordering.stream_delays.s: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got "-5m"`}},
		{"negative milliseconds", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {out_of_orderness_bound: »-1000}}]\n",
			[]string{`sources[0].watermark.out_of_orderness_bound: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got integer -1000 (negative)`}},
		{"milliseconds overflow", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {event_lag: »9223372036854775807}}]\n",
			[]string{`sources[0].generator.event_lag: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got integer 9223372036854775807 (too large: the limit is about 292 years)`}},
		{"size with an unknown unit", preamble + "computations: [{name: c, plugin: p, input_streams: [s], buffer_bytes: »64 parsecs}]\n",
			[]string{`computations[0].buffer_bytes: expected a size such as 65536, "10MB" or "64MiB"; got "64 parsecs"`}},
		{"negative size", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_bytes: »-1}}]\n",
			[]string{`computations[0].batch.max_bytes: expected a size such as 65536, "10MB" or "64MiB"; got integer -1`}},
		{"size too large", preamble + "computations: [{name: c, plugin: p, input_streams: [s], buffer_bytes: »9000000TiB}]\n",
			[]string{`computations[0].buffer_bytes: size too large: the limit is 8EiB; got "9000000TiB"`}},

		{"list for a size", preamble + "computations: [{name: c, plugin: p, input_streams: [s], buffer_bytes: »[1]}]\n",
			[]string{`computations[0].buffer_bytes: expected a size such as 65536, "10MB" or "64MiB"; got a list`}},
		{"mapping for a duration", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_duration: »{s: 1}}}]\n",
			[]string{`computations[0].batch.max_duration: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got a mapping`}},

		// Names.
		{"missing pipeline name", "»sources: [{name: in, type: generator, stream: s}]\n",
			[]string{`name: required; expected ` + nameExpected}},
		{"bad name", "name: p\nsources: [{name: »in put, type: generator, stream: s}]\n",
			[]string{`sources[0].name: expected ` + nameExpected + `; got "in put"`}},
		{"duplicate stream", "name: p\nstreams: [{name: s}, {name: »s}]\nsources: [{name: in, type: generator, stream: s}]\n",
			[]string{`streams[1].name: duplicate stream name "s"; first defined at 2:18`}},
		{"duplicate source", "name: p\nsources:\n  - {name: in, type: generator, stream: s}\n  - {name: »in, type: generator, stream: t}\n",
			[]string{`sources[1].name: duplicate source name "in"; first defined at 3:12`}},
		{"duplicate computation", preamble + "computations:\n  - {name: c, plugin: p, input_streams: [s]}\n  - {name: »c, plugin: p, input_streams: [s]}\n",
			[]string{`computations[1].name: duplicate computation name "c"; first defined at 4:12`}},
		{"duplicate sink", preamble + "sinks:\n  - {name: out, type: stdout, streams: [s]}\n  - {name: »out, type: stdout, streams: [s]}\n",
			[]string{`sinks[1].name: duplicate sink name "out"; first defined at 4:12`}},
		{"one name in different sections", "name: p\nsources: [{name: x, type: generator, stream: x}]\ncomputations: [{name: x, plugin: x, input_streams: [x]}]\nsinks: [{name: x, type: stdout, streams: [x]}]\n",
			nil},

		// Sources.
		{"no sources", "»name: p\n",
			[]string{`sources: a pipeline needs at least one source`}},
		{"source without type and stream", "name: p\nsources:\n  - »»name: in\n",
			[]string{
				`sources[0].type: required; expected one of file, http, generator, kafka`,
				`sources[0].stream: required; expected ` + nameExpected,
			}},
		{"source partitions zero", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: »0}]\n",
			[]string{`sources[0].partitions: expected at least 1; got 0`}},
		{"file source without file", "name: p\nsources:\n  - »name: in\n    type: file\n    stream: s\n",
			[]string{`sources[0].file: required when type is file`}},
		{"file source without path", "name: p\nsources: [{name: in, type: file, stream: s, file: »{}}]\n",
			[]string{`sources[0].file.path: required; expected a file path`}},
		{"block of another type", "name: p\nsources: [{name: in, type: generator, stream: s, file: »{path: x}}]\n",
			[]string{`sources[0].file: only allowed when type is file; type is generator`}},
		{"http source with a bad address", "name: p\nsources: [{name: in, type: http, stream: s, http: {listen: »localhost}}]\n",
			[]string{`sources[0].http.listen: expected host:port such as "127.0.0.1:8080"; got "localhost"`}},
		{"http source with a bad path", "name: p\nsources: [{name: in, type: http, stream: s, http: {listen: \":80\", path: »ingest}}]\n",
			[]string{`sources[0].http.path: expected a URL path starting with '/'; got "ingest"`}},
		{"two http endpoints alike", "name: p\nsources:\n  - {name: a, type: http, stream: s, http: {listen: \"127.0.0.1:80\"}}\nsinks:\n  - {name: b, type: http, streams: [s], http: »{listen: \"127.0.0.1:80\", path: /}}\n",
			[]string{`sinks[0].http: 127.0.0.1:80/ is already served by the HTTP endpoint at 3:44`}},
		{"http endpoints on port 0 never clash", "name: p\nsources:\n  - {name: a, type: http, stream: s, http: {listen: \"127.0.0.1:0\"}}\n  - {name: b, type: http, stream: t, http: {listen: \"127.0.0.1:0\"}}\n",
			nil},
		{"twins writing one stream", preamble + "computations:\n  - {name: c, plugin: p, input_streams: [s], output_streams: [t]}\n  - {name: »c, plugin: p, input_streams: [s], output_streams: [»t]}\n",
			[]string{
				`computations[1].name: duplicate computation name "c"; first defined at 4:12`,
				`computations[1].output_streams[0]: stream "t" already has a writer, computation "c" at 4:63; a stream has exactly one writer`,
			}},
		{"partition_by repeats a field", "name: p\nsources: [{name: in, type: file, stream: s, file: {path: x}, partition_by: [a, »a]}]\n",
			[]string{`sources[0].partition_by[1]: duplicate field "a"`}},
		{"generator without keys", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {keys: »0}}]\n",
			[]string{`sources[0].generator.keys: expected at least 1; got 0`}},
		{"generator with a negative rate", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {rate: »-1.5}}]\n",
			[]string{`sources[0].generator.rate: expected a finite number of records per second, at least 0; got -1.5`}},
		{"idle ratio above 1", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {idle_partitions: {max_ratio: »1.5}}}]\n",
			[]string{`sources[0].watermark.idle_partitions.max_ratio: expected a ratio between 0 and 1; got 1.5`}},
		{"idle ratio 1 runs", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {idle_partitions: {max_ratio: 1}}}]\n",
			nil},
		{"idle ratio NaN", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {idle_partitions: {max_ratio: ».nan}}}]\n",
			[]string{`sources[0].watermark.idle_partitions.max_ratio: expected a ratio between 0 and 1; got NaN`}},
		{"negative idle duration", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {idle_partitions: {duration: »-1s}}}]\n",
			[]string{`sources[0].watermark.idle_partitions.duration: expected ` + durationExpected + `; got "-1s"`}},
		{"idle detection off", "name: p\nsources: [{name: in, type: generator, stream: s, watermark: {out_of_orderness_bound: 0, idle_partitions: {duration: 0}}}]\n",
			nil},
		{"source partitions above the maximum", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: »65537}]\n",
			[]string{`sources[0].partitions: expected at most 65536; got 65537`}},
		{"source partitions at the maximum", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: 65536}]\n",
			nil},
		{"partition_by with an empty path segment", "name: p\nsources: [{name: in, type: file, stream: s, file: {path: x}, partition_by: [»\"user..id\"]}]\n",
			[]string{`sources[0].partition_by[0]: field "user..id" has an empty path segment; expected field names joined by single dots, such as user.id`}},
		{"generator partitioned by a field it does not make", "name: p\nsources: [{name: in, type: generator, stream: s, partitions: 2, partition_by: [key, »user]}]\n",
			[]string{`sources[0].partition_by[1]: a generator's records have only the fields key, seq and filler; got "user"`}},
		{"generator payload too large", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {payload_bytes: »1GiB}}]\n",
			[]string{`sources[0].generator.payload_bytes: expected at most 67108864 (64MiB); got 1073741824`}},
		{"generator rate too low to wait for", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {rate: »1.0e-300}}]\n",
			[]string{`sources[0].generator.rate: expected 0 (as fast as possible) or at least one record in 292 years; got 1e-300`}},
		{"generator lag at the end of durations", "name: p\nsources: [{name: in, type: generator, stream: s, generator: {event_lag: »2562047h47m16.854775807s}}]\n",
			[]string{`sources[0].generator.event_lag: expected a lag below 2562047h47m16.854775807s; got 2562047h47m16.854775807s`}},

		// Computations.
		{"computation without plugin", preamble + "computations: [»{name: c, input_streams: [s]}]\n",
			[]string{`computations[0].plugin: required; expected ` + nameExpected}},
		{"computation without inputs", preamble + "computations: [»{name: c, plugin: p}]\n",
			[]string{`computations[0].input_streams: a computation needs at least one input stream`}},
		{"computation partitions negative", preamble + "computations: [{name: c, plugin: p, input_streams: [s], partitions: »-2}]\n",
			[]string{`computations[0].partitions: expected at least 1; got -2`}},
		{"input listed twice", preamble + "computations: [{name: c, plugin: p, input_streams: [s, »s]}]\n",
			[]string{`computations[0].input_streams[1]: stream "s" is listed twice`}},
		{"delay of a stream that is no input", preamble + "computations: [{name: c, plugin: p, input_streams: [s], input_ordering: {stream_delays: {»payments: 5m}}}]\n",
			[]string{`computations[0].input_ordering.stream_delays.payments: stream "payments" is not an input of this computation; expected one of its input_streams`}},
		{"map with a watermark strategy", preamble + "computations: [{name: c, plugin: p, kind: map, input_streams: [s], watermark_strategy: »{out_of_orderness_bound: 1s}}]\n",
			[]string{`computations[0].watermark_strategy: not allowed for kind map: a map sets no timers and passes its input's watermark on; use kind transform`}},
		{"batch rows zero", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_rows: »0}}]\n",
			[]string{`computations[0].batch.max_rows: expected at least 1; got 0`}},
		{"batch bytes zero", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_bytes: »0B}}]\n",
			[]string{`computations[0].batch.max_bytes: expected at least 1; got 0`}},
		{"batch duration zero", preamble + "computations: [{name: c, plugin: p, input_streams: [s], batch: {max_duration: »0s}}]\n",
			[]string{`computations[0].batch.max_duration: expected a duration above 0; got 0s`}},
		{"buffer zero", preamble + "computations: [{name: c, plugin: p, input_streams: [s], buffer_bytes: »0}]\n",
			[]string{`computations[0].buffer_bytes: expected at least 1; got 0`}},
		{"computation partitions above the maximum", preamble + "computations: [{name: c, plugin: p, input_streams: [s], partitions: »100000}]\n",
			[]string{`computations[0].partitions: expected at most 65536; got 100000`}},
		{"group_by ending in a dot", preamble + "computations: [{name: c, plugin: p, input_streams: [s], group_by: [»user.]}]\n",
			[]string{`computations[0].group_by[0]: field "user." has an empty path segment; expected field names joined by single dots, such as user.id`}},
		{"group_by of a nested field", preamble + "computations: [{name: c, plugin: p, input_streams: [s], group_by: [user.id, region]}]\n",
			nil},
		{"group_by with an empty field", preamble + "computations: [{name: c, plugin: p, input_streams: [s], group_by: [»\"\"]}]\n",
			[]string{`computations[0].group_by[0]: expected a payload field name; got an empty string`}},
		{"dead letters into an output", preamble + "computations: [{name: c, plugin: p, input_streams: [s], output_streams: [t], dead_letter: {stream: »t}}]\n",
			[]string{`computations[0].dead_letter.stream: stream "t" is also an output stream; dead letters need a stream of their own`}},

		// Tenants' quotas that are numbers.
		{"cpu_limit NaN", tenantPreamble + "quotas: {cpu_limit: ».nan}}]\n",
			[]string{`tenants[0].quotas.cpu_limit: expected 0 (no cap) or a finite number of cores, at least 0.001; got NaN`}},
		{"cpu_limit infinite", tenantPreamble + "quotas: {cpu_limit: ».inf}}]\n",
			[]string{`tenants[0].quotas.cpu_limit: expected 0 (no cap) or a finite number of cores, at least 0.001; got +Inf`}},
		{"cpu_limit too small to wait for", tenantPreamble + "quotas: {cpu_limit: »1.0e-9}}]\n",
			[]string{`tenants[0].quotas.cpu_limit: expected 0 (no cap) or a finite number of cores, at least 0.001; got 1e-09`}},
		{"cpu_limit at its least", tenantPreamble + "quotas: {cpu_limit: 0.001}}]\n",
			nil},
		{"ingest_rate NaN", tenantPreamble + "quotas: {ingest_rate: ».nan}}]\n",
			[]string{`tenants[0].quotas.ingest_rate: expected records per second, 0 (no cap) to 1e+09; got NaN`}},
		{"ingest_rate beyond a bucket", tenantPreamble + "quotas: {ingest_rate: »1.0e300}}]\n",
			[]string{`tenants[0].quotas.ingest_rate: expected records per second, 0 (no cap) to 1e+09; got 1e+300`}},

		// Streams: writers and readers.
		{"dangling input", preamble + "computations: [{name: c, plugin: p, input_streams: [»orders]}]\n",
			[]string{`computations[0].input_streams[0]: stream "orders" is not declared: no source or computation writes it and streams does not list it`}},
		{"declared input without writer", "name: p\nstreams: [{name: orders}]\nsources: [{name: in, type: generator, stream: s}]\ncomputations: [{name: c, plugin: p, input_streams: [s, »orders]}]\n",
			[]string{`computations[0].input_streams[1]: stream "orders" has no writer: no source or computation writes it`}},
		{"declared stream nobody writes or reads", "name: p\nstreams: [{name: »spare}]\nsources: [{name: in, type: generator, stream: s}]\n",
			[]string{`streams[0].name: stream "spare" is declared but no source or computation writes it`}},
		{"two sources write one stream", "name: p\nsources:\n  - {name: a, type: generator, stream: s}\n  - {name: b, type: generator, stream: »s}\n",
			[]string{`sources[1].stream: stream "s" already has a writer, source "a" at 3:40; a stream has exactly one writer`}},
		{"a computation writes a source's stream", preamble + "computations: [{name: c, plugin: p, input_streams: [s], output_streams: [»s]}]\n",
			[]string{`computations[0].output_streams[0]: stream "s" already has a writer, source "in" at 2:47; a stream has exactly one writer`}},
		{"two computations write one stream", preamble + "computations:\n  - {name: a, plugin: p, input_streams: [s], output_streams: [t]}\n  - {name: b, plugin: p, input_streams: [s], output_streams: [»t]}\n",
			[]string{`computations[1].output_streams[0]: stream "t" already has a writer, computation "a" at 4:63; a stream has exactly one writer`}},
		{"sink reads nothing", preamble + "sinks: [»{name: out, type: stdout}]\n",
			[]string{`sinks[0].streams: a sink needs at least one stream to read`}},
		{"sink reads an unwritten stream", preamble + "sinks: [{name: out, type: stdout, streams: [»joined]}]\n",
			[]string{`sinks[0].streams[0]: stream "joined" is not declared: no source or computation writes it and streams does not list it`}},
		{"misspelled input stream", "name: p\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [»ordrs]}]\n",
			[]string{`computations[0].input_streams[0]: stream "ordrs" is not declared: no source or computation writes it and streams does not list it; did you mean "orders"?`}},
		{"misspelled sink stream", "name: p\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [orders], output_streams: [joined]}]\nsinks: [{name: out, type: stdout, streams: [»jioned]}]\n",
			[]string{`sinks[0].streams[0]: stream "jioned" is not declared: no source or computation writes it and streams does not list it; did you mean "joined"?`}},
		{"misspelled stream, declared", "name: p\nstreams: [{name: orders}, {name: ordres}]\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [orders, »ordres]}]\n",
			[]string{`computations[0].input_streams[1]: stream "ordres" has no writer: no source or computation writes it; did you mean "orders"?`}},
		{"misspelled stream delay", "name: p\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [orders], input_ordering: {stream_delays: {»order: 1m}}}]\n",
			[]string{`computations[0].input_ordering.stream_delays.order: stream "order" is not an input of this computation; expected one of its input_streams; did you mean "orders"?`}},
		{"misspelled stream far from any", "name: p\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [»clicks]}]\n",
			[]string{`computations[0].input_streams[0]: stream "clicks" is not declared: no source or computation writes it and streams does not list it`}},
		{"text format for an http sink", preamble + "sinks: [{name: out, type: http, streams: [s], http: {listen: \"127.0.0.1:0\"}, format: »text}]\n",
			[]string{`sinks[0].format: text is a format for people, of file and stdout sinks; an http sink serves json (the record with every timestamp and id) or payload (the payload alone)`}},
		{"file sink without file", preamble + "sinks: [»{name: out, type: file, streams: [s]}]\n",
			[]string{`sinks[0].file: required when type is file`}},
		{"stdout sink with an http block", preamble + "sinks: [{name: out, type: stdout, streams: [s], http: »{listen: \":1\"}}]\n",
			[]string{`sinks[0].http: only allowed when type is http; type is stdout`}},
		{"dead-letter file for stdout", preamble + "dead_letter: {type: stdout, file: »{path: x}}\n",
			[]string{`dead_letter.file: only allowed when type is file; type is stdout`}},

		// Cycles.
		{"self loop", preamble + "computations: [{name: c, plugin: p, input_streams: [s, »t], output_streams: [t]}]\n",
			[]string{`computations[0].input_streams[1]: cycle in the computation graph: c -> c (through streams "t")`}},
		{"two-step cycle", preamble + "computations:\n  - {name: a, plugin: p, input_streams: [s, »y], output_streams: [x]}\n  - {name: b, plugin: p, input_streams: [x], output_streams: [y]}\n",
			[]string{`computations[0].input_streams[1]: cycle in the computation graph: a -> b -> a (through streams "x", "y")`}},
		{"three-step cycle listed out of order", preamble + "computations:\n  - {name: c, plugin: p, input_streams: [»y], output_streams: [z]}\n  - {name: a, plugin: p, input_streams: [s, z], output_streams: [x]}\n  - {name: b, plugin: p, input_streams: [x], output_streams: [y]}\n",
			[]string{`computations[0].input_streams[0]: cycle in the computation graph: c -> a -> b -> c (through streams "z", "x", "y")`}},
		{"cycle through dead letters", preamble + "computations:\n  - {name: a, plugin: p, input_streams: [s, »rejects], output_streams: [x]}\n  - {name: b, plugin: p, input_streams: [x], dead_letter: {stream: rejects}}\n",
			[]string{`computations[0].input_streams[1]: cycle in the computation graph: a -> b -> a (through streams "x", "rejects")`}},
		{"two separate cycles", preamble + "computations:\n  - {name: a, plugin: p, input_streams: [s, »a], output_streams: [a]}\n  - {name: b, plugin: p, input_streams: [s, »b], output_streams: [b]}\n",
			[]string{
				`computations[0].input_streams[1]: cycle in the computation graph: a -> a (through streams "a")`,
				`computations[1].input_streams[1]: cycle in the computation graph: b -> b (through streams "b")`,
			}},

		// Several problems of meaning at once.
		{"all semantic errors reported", "»sources: [{name: in, type: generator, stream: s, partitions: »0}]\ncomputations:\n  - {name: c, plugin: p, input_streams: [»nope], batch: {max_rows: »0}}\n  - {name: »c, plugin: p, kind: map, input_streams: [s], watermark_strategy: »{}}\nsinks: [{name: out, type: stdout, streams: [»gone]}]\n",
			[]string{
				`name: required; expected ` + nameExpected,
				`sources[0].partitions: expected at least 1; got 0`,
				`computations[0].input_streams[0]: stream "nope" is not declared: no source or computation writes it and streams does not list it`,
				`computations[0].batch.max_rows: expected at least 1; got 0`,
				`computations[1].name: duplicate computation name "c"; first defined at 3:12`,
				`computations[1].watermark_strategy: not allowed for kind map: a map sets no timers and passes its input's watermark on; use kind transform`,
				`sinks[0].streams[0]: stream "gone" is not declared: no source or computation writes it and streams does not list it`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, positions := unmark(t, tt.src)
			p, err := Parse("pipeline.yaml", []byte(src))
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, p)
				return
			}
			require.Nil(t, p)
			list := errorList(t, err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Path + ": " + e.Message
				if e.Path == "" {
					got[i] = e.Message
				}
			}
			require.Equal(t, tt.want, got)
			require.Len(t, positions, len(list), "one marker per expected error")
			for i, e := range list {
				require.Equal(t, "pipeline.yaml", e.File)
				require.Equal(t, positions[i], position{e.Line, e.Column}, "position of %q", got[i])
			}
		})
	}
}

func TestRetentionErrors(t *testing.T) {
	base := "name: p\nsources: [{name: s, type: generator, stream: a}]\nsinks: [{name: o, type: stdout, streams: [a]}]\n"
	for _, tc := range []struct{ retention, want string }{
		{"retention: {sink_log_records: 0}", "retention.sink_log_records"},
		{"retention: {interval: 0s}", "retention.interval: expected a duration above 0"},
		{"retention: {sources: -1s}", "retention.sources"},
	} {
		_, err := Parse("p.yaml", []byte(base+tc.retention+"\n"))
		require.ErrorContains(t, err, tc.want, tc.retention)
	}
	p, err := Parse("p.yaml", []byte(base))
	require.NoError(t, err)
	require.Equal(t, Retention{Sources: DefaultRetentionSources, SinkLogRecords: DefaultRetentionSinkLogRecords,
		Interval: DefaultRetentionInterval, Idempotency: DefaultRetentionIdempotency}, p.Retention)
}
