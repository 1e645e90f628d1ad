package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
)

// groupSource emits all-or-nothing groups of records (connect.Record.More)
// with the ids given, one group per element; an id "" gives a record no
// id. When cut is set, its last group is left unfinished: the connector
// returns before the record that would end it, as an HTTP source whose
// request the host never finished taking.
type groupSource struct {
	groups [][]string
	cut    bool
}

func (s groupSource) Run(_ context.Context, emit func(connect.Record) error) error {
	n := 0
	for g, ids := range s.groups {
		for i, id := range ids {
			last := i == len(ids)-1
			if last && s.cut && g == len(s.groups)-1 {
				return nil
			}
			rec := connect.Record{ID: id, Payload: fmt.Appendf(nil, `{"n":%d}`, n), More: !last, Sync: last}
			n++
			if err := emit(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

const groupPipeline = `
name: groups
sources:
  - {name: in, type: http, stream: events, http: {listen: "127.0.0.1:0", path: /in}}
sinks:
  - {name: sink, type: stdout, streams: [events]}
`

func runGroups(t *testing.T, st *store.Store, src groupSource) []string {
	t.Helper()
	sink := &failingSink{}
	opts := []runtime.Option{runtime.WithSource("in", src), runtime.WithSink("sink", sink), runtime.WithDeadLetter(&bytes.Buffer{})}
	if st != nil {
		opts = append(opts, runtime.WithStore(st))
	}
	rt, err := runtime.New(mustSpec(t, groupPipeline), nil, opts...)
	require.NoError(t, err)
	require.NoError(t, rt.Run(context.Background()))
	var got []string
	for _, r := range sink.kept {
		got = append(got, string(r.Payload))
	}
	return got
}

// A group is committed whole or not at all: one larger than an ingest
// commit group and left unfinished leaves nothing of itself in the store
// (before groups, its first 4096 records were committed on their own, and
// the rest 2ms later).
func TestIngestGroupIsCommittedWholeOrNotAtAll(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	long := make([]string, 5000)
	got := runGroups(t, st, groupSource{groups: [][]string{{"", "", ""}, long}, cut: true})
	require.Len(t, got, 3, "only the finished group was delivered")
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`}, got)
	ip, ok, err := st.Ingest("events", 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(3), ip.Next, "only the finished group was appended")

	// Without a store the same holds for what the reader sees.
	got = runGroups(t, nil, groupSource{groups: [][]string{{"", "", ""}, long}, cut: true})
	require.Len(t, got, 3, "only the finished group was read")
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`}, got)
}

// Idempotency keys hold within a group and across groups: a record whose
// key the group or an earlier one holds is acknowledged, not appended.
func TestIngestGroupAppendsAKeyOnce(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	got := runGroups(t, st, groupSource{groups: [][]string{{"a", "b", "a"}, {"b", "c", ""}, {"a"}}})
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":4}`, `{"n":5}`}, got)
}
