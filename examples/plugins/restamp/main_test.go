package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var restamp = flowhost.Computation{Init: initialize, Process: process}

func run(t *testing.T, payloads ...string) abi.ResponseKey {
	t.Helper()
	init := &abi.Init{ABI: abi.Version, Computation: "restamp", Kind: abi.KindTransform, OutputStreams: []string{"out"}}
	var msgs []abi.Message
	for i, p := range payloads {
		msgs = append(msgs, abi.Message{ID: "in/p0:" + string(rune('a'+i)), Stream: "in", EventTimestamp: 1, Payload: []byte(p)})
	}
	resp, err := flowhost.Run(restamp, init, &abi.Request{ABI: abi.Version, Computation: "restamp", Kind: abi.KindTransform,
		Keys: []abi.RequestKey{{Key: `["ann"]`, Messages: msgs}}})
	require.NoError(t, err)
	require.Empty(t, resp.Error)
	return resp.Keys[0]
}

func TestEventTimeComesFromThePayload(t *testing.T) {
	k := run(t, `{"happened_at":"2024-05-01T10:00:05Z","user":"ann"}`)
	require.Empty(t, k.Error)
	require.Len(t, k.Emits, 1)
	require.Equal(t, time.Date(2024, 5, 1, 10, 0, 5, 0, time.UTC).UnixNano(), *k.Emits[0].EventTimestamp)
	require.JSONEq(t, `{"happened_at":"2024-05-01T10:00:05Z","user":"ann"}`, string(k.Emits[0].Payload))
}

func TestABadTimeFailsTheKeyNamingTheMessage(t *testing.T) {
	k := run(t, `{"happened_at":"yesterday"}`)
	require.Contains(t, k.Error, "in/p0:a")
	require.Contains(t, k.Error, `field "happened_at"`)
	k = run(t, `{"user":"ann"}`)
	require.Contains(t, k.Error, `no field "happened_at"`)
	k = run(t, `{"happened_at":"9999-12-31T23:59:59Z"}`)
	require.Contains(t, k.Error, "outside the nanosecond timestamps")
}

// FuzzEventTime feeds eventTime arbitrary payloads: it never panics, and
// what it accepts is an RFC 3339 time that formats back to the same
// instant.
func FuzzEventTime(f *testing.F) {
	config.field = "happened_at"
	for _, seed := range []string{
		`{"happened_at":"2024-05-01T10:00:05Z"}`,
		`{"happened_at":"2024-05-01T10:00:05.123456789+02:00","user":"ann"}`,
		`{"happened_at":17}`,
		`{"happened_at":"yesterday"}`,
		`{"happened_at":"9999-12-31T23:59:59Z"}`,
		`{"user":"ann"}`,
		`[1,2]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ts, err := eventTime(payload)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		text := time.Unix(0, ts).UTC().Format(time.RFC3339Nano)
		again, err := time.Parse(time.RFC3339Nano, text)
		require.NoError(t, err)
		require.Equal(t, ts, again.UnixNano())
	})
}
