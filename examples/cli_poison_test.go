package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/build"
	"github.com/flowhost/flowhost/host/connect"
)

// One bad record must not poison its batch (issue 11): through the real
// binary, a guest that traps on a few records of thousands, or fails the
// key of one, costs exactly those records.

// poisonPlugins builds host/internal/testguests/poisontally once, into a
// plugin folder of its own, for the tests of this file.
var poisonPlugins = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(env.work, "poison-plugins")
	_, err := build.Plugin(context.Background(), filepath.Join(env.root, "host", "internal", "testguests", "poisontally"), dir)
	return dir, err
})

const poisonSpec = `
name: poison
sources:
  - name: users-in
    type: file
    stream: users
    file: {path: users.jsonl}
computations:
  - name: tally
    plugin: poison-tally
    kind: transform
    group_by: [user]
    input_streams: [users]
    output_streams: [counted]
sinks:
  - name: out
    type: file
    streams: [counted]
    file: {path: out.jsonl}
dead_letter: {type: file, file: {path: dead-letter.jsonl}}
`

// poisonOutput is what poison-tally emits for a message.
type poisonOutput struct {
	User string `json:"user"`
	Seq  int    `json:"seq"`
	N    int    `json:"n"`
}

// runPoison writes records (1 in users users, each a map of seq to the
// extra fields of its payload) and runs poisonSpec through flowhost run.
// It returns the outputs per user in the order written, the dead letters
// and stderr.
func runPoison(t *testing.T, records, users int, extra map[int]string) (map[string][]poisonOutput, []deadLetter, string) {
	t.Helper()
	plugins, err := poisonPlugins()
	require.NoError(t, err)
	dir := t.TempDir()
	var in strings.Builder
	for seq := range records {
		fields := ""
		if e, ok := extra[seq]; ok {
			fields = "," + e
		}
		fmt.Fprintf(&in, `{"write_ts":%d,"payload":{"user":"u%d","seq":%d%s}}`+"\n", 1714557600000000000+int64(seq)*1e6, seq%users, seq, fields)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.jsonl"), []byte(in.String()), 0o644))
	specPath := filepath.Join(dir, "poison.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(poisonSpec), 0o644))

	_, stderr, err := flowhostRun(t, "run", "-f", specPath, "--plugins", plugins, "--metrics-addr", "",
		"--cache-dir", env.cache, "--data-dir", filepath.Join(dir, "data"))
	require.NoError(t, err, "flowhost run exits 0; stderr:\n%s", stderr)

	perUser := map[string][]poisonOutput{}
	data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	require.NoError(t, err)
	for _, line := range lines(string(data)) {
		if line == "" {
			continue // no output at all
		}
		var rec connect.SinkRecord
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		var o poisonOutput
		require.NoError(t, json.Unmarshal(rec.Payload, &o), line)
		perUser[o.User] = append(perUser[o.User], o)
	}
	return perUser, readDeadLetters(t, filepath.Join(dir, "dead-letter.jsonl")), stderr
}

// requirePoisonOutputs checks that every record not in bad was processed
// once, in its user's order, counted after exactly the good records of
// its user before it (the state each saw).
func requirePoisonOutputs(t *testing.T, perUser map[string][]poisonOutput, records, users int, bad map[int]bool) {
	t.Helper()
	want := map[string][]poisonOutput{}
	for seq := range records {
		if bad[seq] {
			continue
		}
		u := fmt.Sprintf("u%d", seq%users)
		want[u] = append(want[u], poisonOutput{User: u, Seq: seq, N: len(want[u]) + 1})
	}
	got := 0
	for _, outs := range perUser {
		got += len(outs)
	}
	require.Equal(t, records-len(bad), got, "outputs")
	require.Equal(t, want, perUser, "each good record once, in order, with the count of the good records before it")
}

// deadSeqs are the seqs of the dead-lettered records.
func deadSeqs(t *testing.T, dead []deadLetter) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	for _, d := range dead {
		var p struct{ Seq int }
		require.NoError(t, json.Unmarshal(d.Record, &p), "%s", d.Record)
		require.False(t, out[p.Seq], "seq %d dead-lettered twice", p.Seq)
		out[p.Seq] = true
	}
	return out
}

// TestCLIPoisonRecordsCostOnlyThemselves: 5,000 records, 4 of which make
// the guest trap (the wasm unreachable instruction), in batches of up to
// 1,000 with the default on_failure (2 retries, quarantine after 3): the
// 4,996 others are processed, each once and in order, and exactly the 4
// are dead-lettered, with the trap as the cause; nothing is quarantined,
// and the run exits 0.
func TestCLIPoisonRecordsCostOnlyThemselves(t *testing.T) {
	t.Parallel()
	const records, users = 5000, 50
	bad := map[int]bool{17: true, 1999: true, 2000: true, 4321: true}
	extra := map[int]string{}
	for seq := range bad {
		extra[seq] = `"trap":true`
	}
	perUser, dead, stderr := runPoison(t, records, users, extra)

	requirePoisonOutputs(t, perUser, records, users, bad)
	require.Len(t, dead, len(bad), "exactly the poison records are dead-lettered")
	require.Equal(t, bad, deadSeqs(t, dead))
	for _, d := range dead {
		require.Equal(t, "guest", d.Stage)
		require.Contains(t, d.Error, `computation "tally" (plugin "poison-tally")`)
		require.Contains(t, d.Error, "unreachable", "the cause: the trap")
		require.Contains(t, d.Error, "it fails on its own: isolated from a batch of")
	}
	require.NotContains(t, stderr, "quarantined")
}

// TestCLIFailedKeyCostsOnlyItsRecord: the guest fails the key of one
// record of user u7 (Key.Fail, the per-key error a Rust guest reports):
// only that record is dead-lettered, with the guest's error; u7's other
// 99 records are counted, the ones after it on the state the ones before
// it left.
func TestCLIFailedKeyCostsOnlyItsRecord(t *testing.T) {
	t.Parallel()
	const records, users = 5000, 50
	const badSeq = 2507 // user u7
	perUser, dead, _ := runPoison(t, records, users, map[int]string{badSeq: `"fail_key":true`})

	requirePoisonOutputs(t, perUser, records, users, map[int]bool{badSeq: true})
	require.Len(t, perUser["u7"], records/users-1)
	require.Len(t, dead, 1)
	require.Equal(t, map[int]bool{badSeq: true}, deadSeqs(t, dead))
	require.Equal(t, "guest", dead[0].Stage)
	require.Contains(t, dead[0].Error, `failed key "[\"u7\"]": seq 2507: refused on purpose (fail_key)`)
}
