package spec

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

func FuzzParse(f *testing.F) {
	full, err := os.ReadFile(filepath.Join("testdata", "full.yaml"))
	require.NoError(f, err)
	f.Add(full)
	for _, seed := range []string{
		"",
		"name: p\n",
		preamble,
		preamble + "computations: [{name: c, plugin: p, input_streams: [s], output_streams: [t], batch: &b {max_rows: 5}}]\nsinks: [{name: o, type: stdout, streams: [t]}]\n",
		preamble + "computations:\n  - {name: a, plugin: p, input_streams: [s, y], output_streams: [x]}\n  - {name: b, plugin: p, input_streams: [x], output_streams: [y]}\n",
		preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: {<<: {a: 1}, b: [1.5, .inf, null, true]}}]\n",
		`{"name": "j", "sources": [{"name": "in", "type": "generator", "stream": "s", "generator": {"event_lag": 100}}]}`,
		"name: p\nsources: [{name: in, type: file, stream: s, file: {path: x}, partitions: 0}]\n",
		"a: &a [*a]\nname: *b\n",
		"name: t\ntenants: [{name: a, plugin_dirs: [d], weight: 2, engine: wasmtime, quotas: {memory_pages: 64, cpu_per_batch: 1s, cpu_limit: 0.5, ingest_rate: 10, max_state_bytes_per_key: 1KiB}, forbid: [clock]}]\n" +
			"streams: [{name: s, shared_with: [\"*\"]}]\nsources: [{name: in, type: generator, stream: s, tenant: a}]\ncomputations: [{name: c, plugin: p, tenant: a, input_streams: [s]}]\n",
		"name: p\n---\nname: q\n",
		preamble + "computations: [{name: c, plugin: p, input_streams: [s], parameters: {x: .nan, y: -.inf, z: \"0x10\", v: '1e3', m: 18446744073709551615, n: -9223372036854775808, dt: 2024-01-01}}]\n",
		"name: p\nsources: [{name: in, type: generator, stream: s, generator: {rate: 1e300, seed: -9223372036854775808}}]\n",
		// A misspelled stream (did you mean) and a syntax error (source context).
		"name: p\nstreams: [{name: ordres}]\nsources: [{name: in, type: generator, stream: orders}]\ncomputations: [{name: c, plugin: p, input_streams: [ordrs, ordres], input_ordering: {stream_delays: {order: 1m}}}]\n",
		"name: p\nsources:\n  - name: in\n    type: generator\n     stream: s\n",
		// On the bounds of the ranges Parse checks.
		"name: p\nsources: [{name: in, type: generator, stream: s, partitions: 65536, partition_by: [key], watermark: {out_of_orderness_bound: 0, idle_partitions: {duration: 0, max_ratio: 1}}}]\n",
		"name: p\nsources: [{name: in, type: generator, stream: s, generator: {rate: 1.0e-10, payload_bytes: 64MiB, event_lag: 2562047h47m16.854775806s}}]\n",
		preamble + "computations: [{name: c, plugin: p, partitions: 65537, group_by: [a..b], input_streams: [s]}]\n",
		preamble + "tenants: [{name: t, plugin_dirs: [d], quotas: {cpu_limit: .nan, ingest_rate: 1.0e9}}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			require.Nil(t, p)
			list := errorList(t, err)
			for _, e := range list {
				require.Equal(t, "fuzz.yaml", e.File)
				require.GreaterOrEqual(t, e.Line, 1, "%v", e)
				require.GreaterOrEqual(t, e.Column, 1, "%v", e)
				require.NotEmpty(t, e.Message)
			}
			require.NotEmpty(t, FormatError(err, false))
			return
		}
		// What parses survives a round trip through the encoder. The
		// marshaled forms are compared rather than the pipelines, because a NaN
		// among the parameters is not equal to itself.
		out, err := yaml.Marshal(p)
		require.NoError(t, err)
		again, err := Parse("fuzz.yaml", out)
		require.NoError(t, err, "marshaled:\n%s", out)
		out2, err := yaml.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2))
	})
}

func FuzzParseSize(f *testing.F) {
	for _, seed := range []string{"0", "65536", "10MB", "64MiB", " 1 tib ", "9223372036854775807", "8388608TiB", "1.5MB", "-1", "MB", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			require.Zero(t, n)
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		again, err := ParseSize(strconv.FormatInt(n, 10))
		require.NoError(t, err)
		require.Equal(t, n, again, "a size is its own number of bytes")
	})
}
