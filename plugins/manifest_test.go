package plugins

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const testManifestPath = "plugins/join/plugin.yaml"

func TestParseManifestFull(t *testing.T) {
	m, err := ParseManifest(testManifestPath, []byte(fullManifest))
	require.NoError(t, err)
	require.Equal(t, &Manifest{
		Name:        "order-join",
		Version:     "1.2.0-rc.1+build.5",
		ABI:         1,
		Wasm:        "join.wasm",
		SHA256:      abcSHA256,
		Kinds:       []Kind{KindTransform, KindMap},
		Description: "joins orders and payments",
		Parameters:  map[string]any{"window": "1m", "fields": []any{"id", "amount"}},
		Limits: Limits{
			MemoryPages:      256,
			BatchTimeout:     5 * time.Second,
			MaxResponseBytes: 64 << 20,
		},
		Capabilities: Capabilities{Clock: true, ReadOnlyDirs: []string{"data", "ref"}},
		Engine:       EngineWasmtime,
	}, m)
	require.True(t, m.Serves(KindMap))
}

func TestParseManifestDefaults(t *testing.T) {
	m, err := ParseManifest(testManifestPath, []byte(validManifest))
	require.NoError(t, err)
	require.Equal(t, EngineDefault, m.Engine)
	require.Zero(t, m.Limits)
	require.Zero(t, m.Capabilities)
	require.Nil(t, m.Parameters)
	require.Empty(t, m.Description)
	require.True(t, m.Serves(KindTransform))
	require.False(t, m.Serves(KindMap))
}

func TestParseManifestYAMLForms(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, m *Manifest)
	}{
		{
			name: "flow mapping",
			yaml: "{name: a, version: 0.1.0, abi: 1, wasm: a.wasm, sha256: " + abcSHA256 + ", kinds: [map]}",
			check: func(t *testing.T, m *Manifest) {
				require.Equal(t, "a", m.Name)
				require.Equal(t, []Kind{KindMap}, m.Kinds)
			},
		},
		{
			name: "quoted and block values",
			yaml: strings.Replace(validManifest, "name: order-join", "name: \"007\"\ndescription: |\n  two\n  lines", 1),
			check: func(t *testing.T, m *Manifest) {
				require.Equal(t, "007", m.Name)
				require.Equal(t, "two\nlines\n", m.Description)
			},
		},
		{
			name:  "digits-only name keeps its text",
			yaml:  strings.Replace(validManifest, "name: order-join", "name: 007", 1),
			check: func(t *testing.T, m *Manifest) { require.Equal(t, "007", m.Name) },
		},
		{
			name: "anchors, aliases and standard tags",
			yaml: validManifest + "description: &d shared\nparameters:\n  note: *d\n  version: !!str 2\n",
			check: func(t *testing.T, m *Manifest) {
				require.Equal(t, "shared", m.Description)
				require.Equal(t, map[string]any{"note": "shared", "version": "2"}, m.Parameters)
			},
		},
		{
			name: "merge key inside parameters",
			yaml: validManifest + "parameters:\n  defaults: &d {window: 1m}\n  <<: *d\n  size: 3\n",
			check: func(t *testing.T, m *Manifest) {
				require.Equal(t, map[string]any{
					"defaults": map[string]any{"window": "1m"},
					"window":   "1m",
					"size":     uint64(3),
				}, m.Parameters)
			},
		},
		{
			name: "null optional fields",
			yaml: validManifest + "description:\nparameters: ~\nlimits: null\n",
			check: func(t *testing.T, m *Manifest) {
				require.Empty(t, m.Description)
				require.Nil(t, m.Parameters)
				require.Zero(t, m.Limits)
			},
		},
		{
			name:  "size units",
			yaml:  validManifest + "limits:\n  max_response_bytes: 512 kib\n",
			check: func(t *testing.T, m *Manifest) { require.EqualValues(t, 512*1024, m.Limits.MaxResponseBytes) },
		},
		{
			name: "integer size and hex pages",
			yaml: validManifest + "limits:\n  max_response_bytes: 1000\n  memory_pages: 0x10\n",
			check: func(t *testing.T, m *Manifest) {
				require.EqualValues(t, 1000, m.Limits.MaxResponseBytes)
				require.EqualValues(t, 16, m.Limits.MemoryPages)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest(testManifestPath, []byte(tt.yaml))
			require.NoError(t, err)
			tt.check(t, m)
		})
	}
}

// replaceLine returns validManifest with line n (1-based) replaced by repl,
// so that each error case states which line it breaks.
func replaceLine(n int, repl string) string {
	lines := strings.Split(validManifest, "\n")
	lines[n-1] = repl
	return strings.Join(lines, "\n")
}

func TestParseManifestErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want holds each error as line:column: field: message, in order.
		want []string
	}{
		{"sha256 too short", replaceLine(5, "sha256: 3a7b12345678"),
			[]string{"5:9: sha256: expected 64 hex digits, got 12 characters"}},
		{"sha256 not hex", replaceLine(5, "sha256: "+strings.Repeat("g", 64)),
			[]string{`5:9: sha256: expected 64 hex digits, found 'g'`}},
		{"sha256 with prefix", replaceLine(5, "sha256: sha256:"+abcSHA256),
			[]string{`5:9: sha256: expected 64 hex digits, got 71 characters; drop the "sha256:" prefix`}},
		{"name with a space", replaceLine(1, "name: order join"),
			[]string{`1:7: name: invalid character ' ' in "order join"; a name may hold only letters, digits, '_', '-' and '.'`}},
		{"name with a leading dash", replaceLine(1, "name: -join"),
			[]string{`1:7: name: "-join" must start with a letter or digit`}},
		{"name too long", replaceLine(1, "name: "+strings.Repeat("a", 129)),
			[]string{`1:7: name: is 129 characters long, at most 128 are allowed`}},
		{"name is a list", replaceLine(1, "name: [a, b]"),
			[]string{`1:7: name: expected a string, got a list`}},
		{"name without value", replaceLine(1, "name:"),
			[]string{`1:1: name: required field has no value`}},
		{"name missing", replaceLine(1, "description: no name"),
			[]string{`1:1: name: required field is missing`}},
		{"version not semver", replaceLine(2, "version: 1.2"),
			[]string{`2:10: version: expected a semantic version MAJOR.MINOR.PATCH[-PRERELEASE], got "1.2"`}},
		{"version with v", replaceLine(2, "version: v1.2.0"),
			[]string{`2:10: version: expected a semantic version MAJOR.MINOR.PATCH[-PRERELEASE], got "v1.2.0"; drop the leading 'v'`}},
		{"version with leading zero", replaceLine(2, "version: 1.02.0"),
			[]string{`2:10: version: expected a semantic version MAJOR.MINOR.PATCH[-PRERELEASE], got "1.02.0"`}},
		{"abi from the future", replaceLine(3, "abi: 2"),
			[]string{`3:6: abi: the plugin is built for ABI 2, this host speaks ABI 1`}},
		{"abi as string", replaceLine(3, `abi: "1"`),
			[]string{`3:6: abi: expected an integer, got string "1"`}},
		{"abi overflows", replaceLine(3, "abi: 18446744073709551615"),
			[]string{`3:6: abi: integer 18446744073709551615 is out of range`}},
		{"wasm escapes", replaceLine(4, "wasm: ../x.wasm"),
			[]string{`4:7: wasm: "../x.wasm" escapes the plugin directory`}},
		{"wasm escapes after cleaning", replaceLine(4, "wasm: bin/../../x.wasm"),
			[]string{`4:7: wasm: "bin/../../x.wasm" escapes the plugin directory`}},
		{"wasm absolute", replaceLine(4, "wasm: /opt/x.wasm"),
			[]string{`4:7: wasm: "/opt/x.wasm" is absolute; give a path relative to the plugin directory`}},
		{"wasm with backslash", replaceLine(4, `wasm: 'bin\x.wasm'`),
			[]string{`4:7: wasm: "bin\\x.wasm": use '/' as the path separator`}},
		{"wasm is the directory", replaceLine(4, "wasm: ./"),
			[]string{`4:7: wasm: "./" names the plugin directory itself, not a file in it`}},
		{"kinds empty", replaceLine(6, "kinds: []"),
			[]string{`6:8: kinds: at least one kind is required: transform or map`}},
		{"kinds scalar", replaceLine(6, "kinds: transform"),
			[]string{`6:8: kinds: expected a list such as [transform], got string "transform"`}},
		{"kinds unknown and repeated", replaceLine(6, "kinds: [transform, reduce, transform]"),
			[]string{
				`6:20: kinds[1]: unknown kind "reduce"; use transform or map`,
				`6:28: kinds[2]: "transform" is listed twice`,
			}},
		{"kinds block list", replaceLine(6, "kinds:\n  - map\n  - 7"),
			[]string{`8:5: kinds[1]: unknown kind "7"; use transform or map`}},
		{"unknown field with suggestion", validManifest + "descripton: x\n",
			[]string{`7:1: descripton: unknown field "descripton" (did you mean "description"?); known fields: name, version, abi, wasm, sha256, kinds, description, parameters, limits, capabilities, engine`}},
		{"unknown nested field", validManifest + "limits:\n  memory: 5\n",
			[]string{`8:3: limits.memory: unknown field "memory"; known fields: memory_pages, batch_timeout, max_response_bytes`}},
		{"limits not a mapping", validManifest + "limits: 5\n",
			[]string{`7:9: limits: expected a mapping with memory_pages, batch_timeout, max_response_bytes, got integer 5`}},
		{"memory pages zero", validManifest + "limits:\n  memory_pages: 0\n",
			[]string{`8:17: limits.memory_pages: must be between 1 and 65536 (64 KiB pages), got 0`}},
		{"memory pages above 4 GiB", validManifest + "limits:\n  memory_pages: 65537\n",
			[]string{`8:17: limits.memory_pages: must be between 1 and 65536 (64 KiB pages), got 65537`}},
		{"batch timeout without unit", validManifest + "limits:\n  batch_timeout: 5000\n",
			[]string{`8:18: limits.batch_timeout: expected a duration with a unit such as "5s" or "250ms", got integer 5000`}},
		{"batch timeout unparsable", validManifest + "limits:\n  batch_timeout: 5 parsecs\n",
			[]string{`8:18: limits.batch_timeout: expected a duration such as "5s" or "250ms", got "5 parsecs"`}},
		{"batch timeout negative", validManifest + "limits:\n  batch_timeout: -1s\n",
			[]string{`8:18: limits.batch_timeout: must be positive, got -1s`}},
		{"response size unit unknown", validManifest + "limits:\n  max_response_bytes: 64 zebibytes\n",
			[]string{`8:23: limits.max_response_bytes: expected a byte count such as 1048576 or "64MiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "64 zebibytes"`}},
		{"response size fraction", validManifest + "limits:\n  max_response_bytes: 1.5GiB\n",
			[]string{`8:23: limits.max_response_bytes: expected a byte count such as 1048576 or "64MiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "1.5GiB"`}},
		{"response size above 4 GiB", validManifest + "limits:\n  max_response_bytes: 8GiB\n",
			[]string{`8:23: limits.max_response_bytes: must be between 1 byte and 4GiB, got 8589934592 bytes`}},
		{"response size zero", validManifest + "limits:\n  max_response_bytes: 0\n",
			[]string{`8:23: limits.max_response_bytes: must be between 1 byte and 4GiB, got 0 bytes`}},
		{"response size overflows", validManifest + "limits:\n  max_response_bytes: 9999999999TiB\n",
			[]string{`8:23: limits.max_response_bytes: "9999999999TiB" is too large`}},
		{"response size is a float", validManifest + "limits:\n  max_response_bytes: 1.5\n",
			[]string{`8:23: limits.max_response_bytes: expected a byte count such as 1048576 or "64MiB", got number 1.5`}},
		{"clock yes", validManifest + "capabilities:\n  clock: yes\n",
			[]string{`8:10: capabilities.clock: expected true or false, got string "yes"`}},
		{"read-only dir escapes", validManifest + "capabilities:\n  read_only_dirs: [data, ../other]\n",
			[]string{`8:26: capabilities.read_only_dirs[1]: "../other" escapes the plugin directory`}},
		{"read-only dir repeated", validManifest + "capabilities:\n  read_only_dirs: [data, data/]\n",
			[]string{`8:26: capabilities.read_only_dirs[1]: "data" is listed twice`}},
		{"engine unknown", validManifest + "engine: v8\n",
			[]string{`7:9: engine: unknown engine "v8"; use wazero or wasmtime`}},
		{"parameters a list", validManifest + "parameters: [1, 2]\n",
			[]string{`7:13: parameters: expected a mapping of parameter names to values, got a list`}},
		{"parameters alias to nothing", validManifest + "parameters:\n  a: *nothing\n",
			[]string{`8:6: parameters: alias *nothing refers to no earlier anchor &nothing`}},
		{"parameters expand beyond the bound", validManifest + laughs(6),
			[]string{`8:3: parameters: expands to more than 100000 values through aliases`}},
		{"alias before its anchor", "name: *n\n" + strings.Replace(validManifest, "name: order-join", "description: &n x", 1),
			[]string{`1:7: name: alias *n refers to no earlier anchor &n`}},
		{"custom tag", replaceLine(1, "name: !local x"),
			[]string{`1:7: name: unsupported tag !local`}},
		{"merge key at the top", validManifest + "<<: {engine: wazero}\n",
			[]string{`7:1: <<: merge keys are not supported here; write the fields out`}},
		{"integer key", validManifest + "7: x\n",
			[]string{`7:1: 7: unknown field "7"; known fields: name, version, abi, wasm, sha256, kinds, description, parameters, limits, capabilities, engine`}},
		{"YAML syntax error", replaceLine(6, "kinds: [transform"),
			[]string{`6:8: invalid YAML: sequence end token ']' not found`}},
		{"duplicate key", validManifest + "name: again\n",
			[]string{`7:1: invalid YAML: mapping key "name" already defined at [1:1]`}},
		{"empty", "", []string{`1:1: manifest is empty; required fields: name, version, abi, wasm, sha256, kinds`}},
		{"only a comment", "# plugin.yaml\n", []string{`1:1: manifest is empty; required fields: name, version, abi, wasm, sha256, kinds`}},
		{"two documents", validManifest + "---\nname: other\n",
			[]string{`8:1: a manifest is a single YAML document; found a second one`}},
		{"a list", "- name: x\n", []string{`1:1: expected a mapping of manifest fields, got a list`}},
		{"several problems, in file order", "kinds: [map]\nengine: v8\nname: -x\nabi: 0\n",
			[]string{
				`1:1: version: required field is missing`,
				`1:1: wasm: required field is missing`,
				`1:1: sha256: required field is missing`,
				`2:9: engine: unknown engine "v8"; use wazero or wasmtime`,
				`3:7: name: "-x" must start with a letter or digit`,
				`4:6: abi: the plugin is built for ABI 0, this host speaks ABI 1`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest(testManifestPath, []byte(tt.yaml))
			require.Error(t, err)
			require.Nil(t, m)
			var got []string
			for _, e := range manifestErrors(t, err) {
				require.Equal(t, testManifestPath, e.File)
				// The rendered error must agree with the structured fields.
				prefix := fmt.Sprintf("%s:%d:%d: ", e.File, e.Line, e.Column)
				if e.Field != "" {
					prefix += e.Field + ": "
				}
				require.Equal(t, prefix+e.Msg, e.Error())
				got = append(got, strings.TrimPrefix(e.Error(), testManifestPath+":"))
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// laughs returns a parameters block of levels lists, each holding ten
// aliases of the previous one: 10^levels values once expanded.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("parameters:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < levels; i++ {
		prev := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.Repeat(prev+", ", 9)+prev)
	}
	return b.String()
}

func TestParametersWithinTheAliasBound(t *testing.T) {
	m, err := ParseManifest(testManifestPath, []byte(validManifest+laughs(4)))
	require.NoError(t, err)
	require.Len(t, m.Parameters["l3"], 10)
}

func TestManifestErrorWithoutPosition(t *testing.T) {
	e := &ManifestError{File: "p/plugin.yaml", Field: "name", Msg: "must not be empty"}
	require.Equal(t, "p/plugin.yaml: name: must not be empty", e.Error())
}

func TestParseManifestErrorsAs(t *testing.T) {
	_, err := ParseManifest(testManifestPath, []byte("engine: v8\n"))
	var me *ManifestError
	require.ErrorAs(t, err, &me)
	require.Equal(t, testManifestPath, me.File)
}

func TestMergeParameters(t *testing.T) {
	m := &Manifest{Parameters: map[string]any{"window": "1m", "limit": uint64(10), "nested": map[string]any{"a": 1}}}
	pipeline := map[string]any{"window": "5m", "nested": map[string]any{"b": 2}, "extra": true}
	merged := m.MergeParameters(pipeline)
	require.Equal(t, map[string]any{
		"window": "5m",                   // the pipeline wins
		"limit":  uint64(10),             // the default fills in
		"nested": map[string]any{"b": 2}, // replaced whole, not merged
		"extra":  true,                   // pipeline-only values stay
	}, merged)
	require.Equal(t, "1m", m.Parameters["window"], "the manifest's defaults are not modified")
	require.Len(t, pipeline, 3, "the pipeline's parameters are not modified")
	require.Empty(t, (&Manifest{}).MergeParameters(nil))
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"64MiB", 64 << 20},
		{"64 MiB", 64 << 20},
		{"64mib", 64 << 20},
		{"1KB", 1000},
		{"1k", 1000},
		{"2Ki", 2048},
		{"3GB", 3_000_000_000},
		{"1TiB", 1 << 40},
		{"17B", 17},
		{"17", 17},
	}
	for _, tt := range tests {
		got, msg := parseSize(tt.in)
		require.Empty(t, msg, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

// TestParseSizeProperties checks that a size scales linearly with its
// number for every unit, ignores case and spaces, and never overflows.
func TestParseSizeProperties(t *testing.T) {
	units := []string{"", "B", "k", "KB", "Ki", "KiB", "M", "MB", "Mi", "MiB", "G", "GB", "Gi", "GiB", "T", "TB", "Ti", "TiB"}
	rapid.Check(t, func(t *rapid.T) {
		unit := rapid.SampledFrom(units).Draw(t, "unit")
		n := rapid.Int64Range(0, 1<<40).Draw(t, "n")
		one, msg := parseSize("1" + unit)
		if msg != "" {
			t.Fatalf("1%s: %s", unit, msg)
		}
		got, msg := parseSize(fmt.Sprintf(" %d %s ", n, strings.ToUpper(unit)))
		if n > (1<<63-1)/one {
			if msg == "" {
				t.Fatalf("%d%s overflows but parsed as %d", n, unit, got)
			}
			return
		}
		if msg != "" || got != n*one {
			t.Fatalf("%d%s = %d (%s), want %d", n, unit, got, msg, n*one)
		}
	})
}

// TestCleanRelPathContainment checks the lexical path rule against the
// file system's own notion: a path is accepted exactly when joining it to
// the plugin directory stays inside the directory.
func TestCleanRelPathContainment(t *testing.T) {
	dir := filepath.FromSlash("/plugins/join")
	rapid.Check(t, func(t *rapid.T) {
		segs := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b.wasm", "..", ".", ""}), 1, 6).Draw(t, "segments")
		p := strings.Join(segs, "/")
		if p == "" || strings.HasPrefix(p, "/") {
			// Join would read these as the directory itself or a path in
			// it; a manifest that writes them means something else.
			if _, msg := cleanRelPath(p, true); msg == "" {
				t.Fatalf("%q is accepted", p)
			}
			return
		}
		joined := filepath.Join(dir, filepath.FromSlash(p))
		rel, err := filepath.Rel(dir, joined)
		inside := err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
		clean, msg := cleanRelPath(p, true)
		if inside != (msg == "") {
			t.Fatalf("%q: inside=%v but cleanRelPath says %q", p, inside, msg)
		}
		if inside && filepath.Join(dir, filepath.FromSlash(clean)) != joined {
			t.Fatalf("%q cleaned to %q, which names another path", p, clean)
		}
	})
}

func TestManifestProblemsAgreeWithParser(t *testing.T) {
	m, err := ParseManifest(testManifestPath, []byte(fullManifest))
	require.NoError(t, err)
	require.Empty(t, m.problems(testManifestPath))

	bad := *m
	bad.Name = ""
	bad.Kinds = []Kind{KindMap, "reduce", KindMap}
	bad.Limits.MemoryPages = 70000
	bad.Capabilities.ReadOnlyDirs = []string{"/etc"}
	var got []string
	for _, err := range bad.problems(testManifestPath) {
		var me *ManifestError
		require.True(t, errors.As(err, &me))
		require.Zero(t, me.Line, "a manifest built in code has no positions")
		got = append(got, err.Error())
	}
	require.Equal(t, []string{
		testManifestPath + `: name: must not be empty`,
		testManifestPath + `: kinds[1]: unknown kind "reduce"; use transform or map`,
		testManifestPath + `: kinds[2]: "map" is listed twice`,
		testManifestPath + `: limits.memory_pages: must be between 1 and 65536 (64 KiB pages), got 70000`,
		testManifestPath + `: capabilities.read_only_dirs[0]: "/etc" is absolute; give a path relative to the plugin directory`,
	}, got)
}
