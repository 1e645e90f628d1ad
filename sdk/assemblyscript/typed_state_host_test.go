package assemblyscript_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/host/runtime"
	hostspec "github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
)

// quotaGuest appends the same 42 bytes (the JSON text of forty x's, as the
// Go SDK's test writes them) to a list cell per message: 44 bytes a message
// in the blob, so two fit in a quota of 100 bytes and the third does not.
const quotaGuest = `import { Batch, Params, listCell, register, stateLimitParam } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

const ELEM = "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"";

function process(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const msgs = k.messages();
    for (let j = 0; j < msgs.length; j++) {
      const e = listCell(k, "seen").append(ELEM);
      if (e !== null) { k.fail(e.toString()); break; }
      msgs[j].emit("out", msgs[j].payload);
    }
  }
}
register(process, (p: Params): string | null => stateLimitParam(p));
`

const asQuotaPipeline = `
name: typed
tenants:
  - name: acme
    plugin_dirs: [unused]
    quotas: {max_state_bytes_per_key: 100}
sources:
  - {name: in, type: file, stream: events, file: {path: unused.jsonl}}
computations:
  - name: c
    plugin: p
    tenant: acme
    group_by: [user]
    input_streams: [events]
    output_streams: [out]
    batch: {max_rows: 1}
    %s
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

type asQuotaRecords []connect.Record

func (s asQuotaRecords) Run(_ context.Context, emit func(connect.Record) error) error {
	for _, r := range s {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

type asQuotaSink struct {
	mu   sync.Mutex
	recs []connect.SinkRecord
}

func (s *asQuotaSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, recs...)
	return nil
}

func (s *asQuotaSink) Close() error { return nil }

// TestTypedStateAgainstTheHostQuota is sdk/go's test of the same name with
// the AssemblyScript SDK in the real runtime: without the limit parameter
// the host refuses the state with its own message; with
// max_state_bytes_per_key set to the quota the SDK refuses it first, with
// the Go SDK's text. Either way the key fails, its input is dead-lettered
// and its state stays as it was, so the key keeps exactly its first two
// messages.
func TestTypedStateAgainstTheHostQuota(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "index.ts"), filepath.Join(dir, "quota.wasm")
	require.NoError(t, os.WriteFile(src, []byte(quotaGuest), 0o644))
	require.NoError(t, assemblyscript.Build(src, out))
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig())
	require.NoError(t, err)
	defer e.Close(ctx)
	mod, err := e.Compile(ctx, "quota", wasm)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		params string
		want   string
	}{
		{"host refuses", "", "quota exceeded: its new state is 139 bytes, more than tenant \"acme\"'s quotas.max_state_bytes_per_key (100 bytes)"},
		{"SDK refuses", "parameters: {max_state_bytes_per_key: 100}", "saving typed state at the end of the batch: key \"[\\\"u0\\\"]\": typed state of 139 bytes exceeds the limit of 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs asQuotaRecords
			for i := range 5 {
				recs = append(recs, connect.Record{Write: int64(i + 1), HasWrite: true, Event: int64(i + 1), HasEvent: true,
					Payload: fmt.Appendf(nil, `{"user":"u0","n":%d}`, i)})
			}
			p, err := hostspec.Parse(filepath.Join(t.TempDir(), "p.yaml"), []byte(fmt.Sprintf(asQuotaPipeline, tc.params)))
			require.NoError(t, err)
			sink := &asQuotaSink{}
			var dead bytes.Buffer
			rt, err := runtime.New(p, map[string]compute.Factory{"c": &compute.WASM{Module: mod}},
				runtime.WithSource("in", recs), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&dead))
			require.NoError(t, err)
			require.NoError(t, rt.Run(ctx))
			require.Len(t, sink.recs, 2, "the two messages whose state fits")
			lines := strings.Split(strings.TrimSpace(dead.String()), "\n")
			require.Len(t, lines, 3, "every later message is dead-lettered")
			for _, line := range lines {
				var d struct{ Error string }
				require.NoError(t, json.Unmarshal([]byte(line), &d), line)
				require.Contains(t, d.Error, tc.want)
			}
		})
	}
}
