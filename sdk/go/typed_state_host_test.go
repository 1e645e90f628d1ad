package flowhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	hostspec "github.com/flowhost/flowhost/host/spec"
	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/stretchr/testify/require"
)

const quotaPipeline = `
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
sinks:
  - {name: sink, type: stdout, streams: [out]}
`

type quotaRecords []connect.Record

func (s quotaRecords) Run(_ context.Context, emit func(connect.Record) error) error {
	for _, r := range s {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

type quotaSink struct {
	mu   sync.Mutex
	recs []connect.SinkRecord
}

func (s *quotaSink) Write(_ context.Context, recs []connect.SinkRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, recs...)
	return nil
}

func (s *quotaSink) Close() error { return nil }

// TestTypedStateAgainstTheHostQuota runs, in the real runtime, an SDK
// computation that appends a 40-byte element to a list cell per message
// (44 bytes a message in the blob: two fit in the tenant's quota of 100
// bytes, the third does not). Without an SDK limit the host refuses the
// state with its own message; with the limit set to the quota the SDK
// refuses it first, with a QuotaError. Either way the key fails, its input
// is dead-lettered and its state stays as it was, so each key keeps
// exactly its first two messages.
func TestTypedStateAgainstTheHostQuota(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxState int
		want     string
	}{
		{"host refuses", 0, "quota exceeded: its new state is 139 bytes, more than tenant \"acme\"'s quotas.max_state_bytes_per_key (100 bytes)"},
		{"SDK refuses", 100, "saving typed state at the end of the batch: key \"[\\\"u0\\\"]\": typed state of 139 bytes exceeds the limit of 100 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp := flowhost.Computation{MaxStateBytes: c.maxState, Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					l := flowhost.List[string](k, "seen", flowhost.JSON)
					for m := range k.Messages() {
						if err := l.Append(strings.Repeat("x", 40)); err != nil {
							return err
						}
						k.Emit("out", m.Payload)
					}
				}
				return nil
			}}
			guest := compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
				return flowhost.Run(comp, &abi.Init{ABI: abi.Version, Computation: req.Computation, Kind: req.Kind, OutputStreams: []string{"out"}}, req)
			})
			var recs quotaRecords
			for i := range 5 {
				recs = append(recs, connect.Record{Write: int64(i + 1), HasWrite: true, Event: int64(i + 1), HasEvent: true,
					Payload: fmt.Appendf(nil, `{"user":"u0","n":%d}`, i)})
			}
			p, err := hostspec.Parse(filepath.Join(t.TempDir(), "p.yaml"), []byte(quotaPipeline))
			require.NoError(t, err)
			out := &quotaSink{}
			var dead bytes.Buffer
			rt, err := runtime.New(p, map[string]compute.Factory{"c": compute.Native(guest)},
				runtime.WithSource("in", recs), runtime.WithSink("sink", out), runtime.WithDeadLetter(&dead))
			require.NoError(t, err)
			require.NoError(t, rt.Run(context.Background()))
			require.Len(t, out.recs, 2, "the two messages whose state fits")
			lines := strings.Split(strings.TrimSpace(dead.String()), "\n")
			require.Len(t, lines, 3, "every later message is dead-lettered")
			for _, line := range lines {
				var d struct{ Error string }
				require.NoError(t, json.Unmarshal([]byte(line), &d), line)
				require.Contains(t, d.Error, c.want)
			}
		})
	}
}
