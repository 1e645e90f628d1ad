package conformance_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
)

// testCase is one scripted conversation with a guest: an Init, then a
// sequence of requests whose state and timers the host model carries from
// one response to the next.
type testCase struct {
	name string
	// about says what the case pins, for the README and failure output.
	about string
	// Init: parameters (nil: none), kind (default transform), partition
	// and computation name (default "conformance").
	params      map[string]any
	kind        abi.Kind
	partition   uint64
	computation string
	steps       []step
	// echoOnly: every message is echoed and nothing else happens, so
	// echo.wat must answer exactly as the script does.
	echoOnly bool
	// noopTakesPart: the script reports nothing either, so identity.wat
	// must answer exactly as the script does.
	noopTakesPart bool
	// check asserts what the responses mean, derived from SCRIPT.md by
	// hand, for every script interpreter.
	check func(t *testing.T, r *run)
}

// step is one request: its watermarks and, per key, its messages; the
// host model adds states, due timers, ids and timestamps left zero.
type step struct {
	watermarks abi.Watermarks
	epoch      uint64 // 0: the step's number from 1
	keys       []abi.RequestKey
}

func (c *testCase) initEnvelope() abi.Init {
	in := abi.Init{ABI: abi.Version, Computation: "conformance", Kind: abi.KindTransform, Partition: c.partition,
		Parameters: c.params, OutputStreams: outputs}
	if c.kind != "" {
		in.Kind = c.kind
	}
	if c.computation != "" {
		in.Computation = c.computation
	}
	return in
}

func (c *testCase) outputs() []string { return outputs }

// initOnly reports whether the case sends no request.
func (c *testCase) initOnly() bool { return len(c.steps) == 0 }

// msgs returns a key with one message per payload.
func msgs(key string, payloads ...string) abi.RequestKey {
	k := abi.RequestKey{Key: key}
	for _, p := range payloads {
		k.Messages = append(k.Messages, abi.Message{Payload: []byte(p)})
	}
	return k
}

// onStream returns k with every message read from stream.
func onStream(stream string, k abi.RequestKey) abi.RequestKey {
	for i := range k.Messages {
		k.Messages[i].Stream = stream
	}
	return k
}

// entry returns the response entry of key, failing when there is none.
func entry(t *testing.T, s stepRun, key string) abi.ResponseKey {
	t.Helper()
	for _, k := range s.resp.Keys {
		if k.Key == key {
			return k
		}
	}
	require.Failf(t, "key not reported", "key %q has no entry in\n%s", key, render(s.resp))
	return abi.ResponseKey{}
}

// reported returns the keys of a response in order.
func reported(s stepRun) []string {
	var keys []string
	for _, k := range s.resp.Keys {
		keys = append(keys, k.Key)
	}
	return keys
}

// texts returns the emits' payloads as text.
func texts(emits []abi.Emit) []string {
	var out []string
	for _, e := range emits {
		out = append(out, string(e.Payload))
	}
	return out
}

// on returns an emit of text on stream with parents.
func on(stream, text string, parents ...uint32) abi.Emit {
	e := abi.Emit{Stream: stream, Payload: []byte(text)}
	if len(parents) > 0 {
		e.Parents = parents
	}
	return e
}

// requireEchoes requires every message of every key to come back
// unchanged on "out", with itself as its parent, and nothing else.
func requireEchoes(t *testing.T, s stepRun) {
	t.Helper()
	require.Empty(t, s.resp.Error)
	require.Len(t, s.resp.Keys, len(s.req.Keys), "every key has a message to echo")
	for i, k := range s.req.Keys {
		got := s.resp.Keys[i]
		require.Equal(t, k.Key, got.Key, "keys are reported in request order")
		require.Len(t, got.Emits, len(k.Messages))
		for j, m := range k.Messages {
			e := got.Emits[j]
			require.Equal(t, "out", e.Stream)
			require.Equal(t, m.Payload, e.Payload, "key %q message %d is echoed unchanged", k.Key, j)
			require.Equal(t, []uint32{uint32(j)}, e.Parents)
		}
	}
}

// bytesOf returns n pseudo-random bytes that do not start with "!".
func bytesOf(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] = 0
	return b
}

const mib = 1 << 20

var (
	largeBinary = bytesOf(mib, 1)
	// largeText is at least 1 MiB of two-, three- and four-byte UTF-8.
	largeText = strings.Repeat("é€😀abc", mib/12+1)
	// largeState is 1 MiB of text without ";", for state:T.
	largeState = strings.Repeat("0123456789abcdef", mib/16)
)

// metaText is SCRIPT.md's meta line for message m of key k in req.
func metaText(req *abi.Request, k string, m abi.Message) string {
	return fmt.Sprintf("meta:key=%s,stream=%s,id=%s,event=%d,system=%d,alignment=%d,wm=%d/%d,partition=%d,epoch=%d,computation=%s,kind=%s",
		k, m.Stream, m.ID, m.EventTimestamp, m.SystemTimestamp, m.AlignmentTimestamp,
		req.Watermarks.Event, req.Watermarks.System, req.Partition, req.Epoch, req.Computation, req.Kind)
}

func manyKeys(n int, payload func(i int) []string) []abi.RequestKey {
	keys := make([]abi.RequestKey, n)
	for i := range keys {
		keys[i] = msgs(fmt.Sprintf("key-%03d", i), payload(i)...)
	}
	return keys
}

var cases = []testCase{
	{
		name:          "empty_batch",
		about:         "a request whose keys are empty (ABI.md: keys may be empty) gets {\"keys\": []}",
		steps:         []step{{}},
		echoOnly:      true,
		noopTakesPart: true,
		check: func(t *testing.T, r *run) {
			require.Empty(t, r.steps[0].resp.Keys)
			require.Empty(t, r.steps[0].resp.Error)
		},
	},
	{
		name:  "many_keys",
		about: "500 keys, some with two messages, every message echoed",
		steps: []step{{keys: manyKeys(500, func(i int) []string {
			if i%7 == 0 {
				return []string{"value-" + strconv.Itoa(i), "again-" + strconv.Itoa(i)}
			}
			return []string{"value-" + strconv.Itoa(i)}
		})}},
		echoOnly: true,
		check:    func(t *testing.T, r *run) { requireEchoes(t, r.steps[0]) },
	},
	{
		name:  "many_keys_state",
		about: "500 keys set state and a timer with payload; next request: 500 timers fire, state shown and deleted",
		steps: []step{
			{keys: manyKeys(500, func(i int) []string {
				return []string{fmt.Sprintf("!state:s%d;timerp:%d:%d:t%d", i, 1000+i, i, i)}
			})},
			{watermarks: abi.Watermarks{Event: 1499}, keys: manyKeys(500, func(int) []string { return []string{"!showstate;delstate"} })},
		},
		check: func(t *testing.T, r *run) {
			first, second := r.steps[0], r.steps[1]
			require.Len(t, first.resp.Keys, 500)
			require.Len(t, second.resp.Keys, 500)
			for i := range 500 {
				k := fmt.Sprintf("key-%03d", i)
				e := entry(t, first, k)
				require.Equal(t, abi.StateReplace, e.StateOp)
				require.Equal(t, "s"+strconv.Itoa(i), string(e.State))
				require.Equal(t, []abi.Timer{{TriggerTimestamp: int64(1000 + i), EventTimestamp: abi.Int64(int64(i)), Payload: []byte("t" + strconv.Itoa(i))}}, e.TimersSet)
				e = entry(t, second, k)
				require.Equal(t, []abi.Emit{
					on("out", fmt.Sprintf("timer:%d:t%d", 1000+i, i), 0),
					on("out", "state:s"+strconv.Itoa(i), 1),
				}, e.Emits)
				require.Equal(t, abi.StateDelete, e.StateOp)
				require.Empty(t, r.host.pending(k))
			}
			require.Empty(t, r.host.states)
		},
	},
	{
		name:  "large_payload",
		about: "a 1 MiB binary payload and a 1 MiB multi-byte text payload, echoed",
		steps: []step{{keys: []abi.RequestKey{
			{Key: "binary", Messages: []abi.Message{{Payload: largeBinary}}},
			msgs("text", largeText),
		}}},
		echoOnly: true,
		check: func(t *testing.T, r *run) {
			requireEchoes(t, r.steps[0])
			require.Equal(t, largeBinary, entry(t, r.steps[0], "binary").Emits[0].Payload)
			require.Equal(t, largeText, string(entry(t, r.steps[0], "text").Emits[0].Payload))
		},
	},
	{
		name:  "large_state",
		about: "a 1 MiB state set, carried into the next request, shown and appended to",
		steps: []step{
			{keys: []abi.RequestKey{msgs("s", "!state:"+largeState)}},
			{keys: []abi.RequestKey{msgs("s", "!showstate;append")}},
		},
		check: func(t *testing.T, r *run) {
			require.Equal(t, largeState, string(entry(t, r.steps[0], "s").State))
			require.Equal(t, largeState, string(r.steps[1].req.Keys[0].State), "the host carries the state")
			e := entry(t, r.steps[1], "s")
			require.Equal(t, "state:"+largeState, string(e.Emits[0].Payload))
			id := r.steps[1].req.Keys[0].Messages[0].ID
			require.Equal(t, largeState+id+",", string(e.State))
			require.Equal(t, largeState+id+",", string(r.host.states["s"]))
		},
	},
	{
		name:  "unicode_echo",
		about: "non-ASCII keys and streams, astral and multi-byte payloads, invalid UTF-8 and empty payloads, an empty key, echoed",
		steps: []step{{keys: []abi.RequestKey{
			msgs("ключ", "привет, мир"),
			msgs("鍵🔑", "𝄞 music 🎵"),
			{Key: "", Messages: []abi.Message{{Payload: []byte{}}, {Payload: []byte("\xff\xfe\x00 not UTF-8")}}},
			onStream("🌊", msgs("e\u0301", "naïve café")),
			onStream("поток", msgs("👩‍👩‍👧", "family")),
		}}},
		echoOnly: true,
		check:    func(t *testing.T, r *run) { requireEchoes(t, r.steps[0]) },
	},
	{
		name:   "unicode_script",
		about:  "commands with non-ASCII streams, keys, texts, state and parameter names",
		params: map[string]any{"ünï": "çødé 🎈"},
		steps: []step{{keys: []abi.RequestKey{
			onStream("🌊", msgs("ключ🔑", "!emit:side:日本語 𝄞;emitk:out:клю:ч:😀;state:ÿ🎉;showstate;meta")),
			msgs("", "!emitk:side:🔑:x;param:ünï"),
		}}},
		check: func(t *testing.T, r *run) {
			s := r.steps[0]
			e := entry(t, s, "ключ🔑")
			keyed := on("out", "ч:😀", 0)
			keyed.Key = "клю"
			require.Equal(t, []abi.Emit{
				on("side", "日本語 𝄞", 0),
				keyed,
				on("out", "state:ÿ🎉", 0),
				on("out", metaText(s.req, "ключ🔑", s.req.Keys[0].Messages[0]), 0),
			}, e.Emits)
			require.Contains(t, string(e.Emits[3].Payload), "stream=🌊,")
			require.Equal(t, "ÿ🎉", string(e.State))
			e = entry(t, s, "")
			keyed = on("side", "x", 0)
			keyed.Key = "🔑"
			require.Equal(t, []abi.Emit{keyed, on("out", "param:ünï=çødé 🎈", 0)}, e.Emits)
		},
	},
	{
		name:  "state",
		about: "create, append, replace, an empty state, delete, delete then set, a trailing delete, across five requests",
		steps: []step{
			{keys: []abi.RequestKey{msgs("a", "!state:one"), msgs("b", "!append", "!append"), msgs("c", "!state:;showstate")}},
			{keys: []abi.RequestKey{msgs("a", "!showstate;state:two"), msgs("b", "!showstate;delstate"), msgs("c", "!showstate")}},
			{keys: []abi.RequestKey{msgs("a", "!showstate;delstate;state:three"), msgs("b", "!showstate"), msgs("c", "!delstate;state:x;delstate")}},
			{keys: []abi.RequestKey{msgs("a", "!showstate;append;delstate"), msgs("c", "!showstate")}},
			{keys: []abi.RequestKey{msgs("a", "!showstate")}},
		},
		check: func(t *testing.T, r *run) {
			ids := r.steps[0].req.Keys[1].Messages
			appended := ids[0].ID + "," + ids[1].ID + ","
			type want struct {
				key   string
				shown []string
				op    abi.StateOp
				state string
			}
			steps := [][]want{
				{{"a", nil, abi.StateReplace, "one"}, {"b", nil, abi.StateReplace, appended}, {"c", []string{"state:"}, abi.StateReplace, ""}},
				{{"a", []string{"state:one"}, abi.StateReplace, "two"}, {"b", []string{"state:" + appended}, abi.StateDelete, ""}, {"c", []string{"state:"}, abi.StateKeep, ""}},
				{{"a", []string{"state:two"}, abi.StateReplace, "three"}, {"b", []string{"state:none"}, abi.StateKeep, ""}, {"c", nil, abi.StateDelete, ""}},
				{{"a", []string{"state:three"}, abi.StateDelete, ""}, {"c", []string{"state:none"}, abi.StateKeep, ""}},
				{{"a", []string{"state:none"}, abi.StateKeep, ""}},
			}
			for i, keys := range steps {
				for _, w := range keys {
					e := entry(t, r.steps[i], w.key)
					require.Equal(t, w.shown, texts(e.Emits), "step %d key %s", i, w.key)
					require.Equal(t, w.op, e.StateOp, "step %d key %s", i, w.key)
					if w.op == abi.StateReplace {
						require.NotNil(t, e.State, "step %d key %s: a replaced state is present, even empty", i, w.key)
						require.Equal(t, w.state, string(e.State), "step %d key %s", i, w.key)
					}
				}
			}
			require.Equal(t, []byte{}, r.steps[1].req.Keys[2].State, "an empty state is carried as a present, empty state")
			require.Empty(t, r.host.states, "every state ends deleted")
		},
	},
	{
		name: "timers",
		about: "sets in call order, a cancel dropping earlier sets of its trigger and listed once, timer payload and event_ts, " +
			"a negative trigger; due timers fire in a later request before the key's messages, and timer-only keys",
		steps: []step{
			{keys: []abi.RequestKey{msgs("t", "!timer:1000;timerp:2000:1500:payload;timer:3000;cancel:3000;timer:3000;cancel:4000;cancel:4000;timer:-10;timerp:5000:4000:")}},
			{watermarks: abi.Watermarks{Event: 2500}, keys: []abi.RequestKey{msgs("t", "!cancel:3000;showstate"), msgs("u", "!timer:2500")}},
			{watermarks: abi.Watermarks{Event: 10000}},
		},
		check: func(t *testing.T, r *run) {
			e := entry(t, r.steps[0], "t")
			require.Empty(t, e.Emits)
			require.Equal(t, []abi.Timer{
				{TriggerTimestamp: 1000},
				{TriggerTimestamp: 2000, EventTimestamp: abi.Int64(1500), Payload: []byte("payload")},
				{TriggerTimestamp: 3000},
				{TriggerTimestamp: -10},
				{TriggerTimestamp: 5000, EventTimestamp: abi.Int64(4000)},
			}, e.TimersSet)
			require.Equal(t, []int64{3000, 4000}, e.TimersCancel)

			e = entry(t, r.steps[1], "t")
			require.Equal(t, []abi.Emit{
				on("out", "timer:-10:", 0), on("out", "timer:1000:", 1), on("out", "timer:2000:payload", 2), on("out", "state:none", 3),
			}, e.Emits)
			require.Equal(t, []int64{3000}, e.TimersCancel)
			require.Empty(t, e.TimersSet)
			require.Equal(t, []abi.Timer{{TriggerTimestamp: 2500}}, entry(t, r.steps[1], "u").TimersSet)

			require.Equal(t, []string{"t", "u"}, reported(r.steps[2]))
			require.Len(t, r.steps[2].req.Keys[0].Timers, 1, "the timer at 3000 was cancelled")
			require.Equal(t, []abi.Emit{on("out", "timer:5000:", 0)}, entry(t, r.steps[2], "t").Emits)
			require.Equal(t, []abi.Emit{on("out", "timer:2500:", 0)}, entry(t, r.steps[2], "u").Emits)
			require.Empty(t, r.host.pending("t"))
			require.Empty(t, r.host.pending("u"))
		},
	},
	{
		name:  "emits",
		about: "emit, emitk (colons in the text, an empty key), emite (negative, zero, int64 extremes), emitall over a timer and two messages, emitnone, an empty text",
		steps: []step{
			{keys: []abi.RequestKey{msgs("k", "!timer:100")}},
			{watermarks: abi.Watermarks{Event: 100}, keys: []abi.RequestKey{msgs("k",
				"!emit:side:plain;emitk:out:rk:with:colons;emite:side:-5:neg;emite:out:0:zero;emite:out:9223372036854775807:max;emite:side:-9223372036854775808:min",
				"!emitall:side:all;emitnone:out:none;emit:out:;emitk:side::nokey")}},
		},
		check: func(t *testing.T, r *run) {
			keyed := on("out", "with:colons", 1)
			keyed.Key = "rk"
			at := func(e abi.Emit, ts int64) abi.Emit {
				e.EventTimestamp = abi.Int64(ts)
				return e
			}
			require.Equal(t, []abi.Emit{
				on("out", "timer:100:", 0),
				on("side", "plain", 1),
				keyed,
				at(on("side", "neg", 1), -5),
				at(on("out", "zero", 1), 0),
				at(on("out", "max", 1), math.MaxInt64),
				at(on("side", "min", 1), math.MinInt64),
				on("side", "all", 0, 1, 2),
				on("out", "none"),
				on("out", "", 2),
				on("side", "nokey", 2),
			}, entry(t, r.steps[1], "k").Emits)
		},
	},
	{
		name:  "params",
		about: "param: on text, integer (negative, int64 max), boolean, other types (?) and missing parameters, a name with a colon",
		params: map[string]any{
			"name": "flow", "count": int64(42), "negative": int64(-7), "big": int64(math.MaxInt64),
			"enabled": true, "disabled": false, "ratio": 0.5, "tags": []any{"a"}, "nothing": nil,
			"blob": []byte{1}, "nested": map[string]any{"a": int64(1)}, "empty": "", "a:b": "colon",
		},
		steps: []step{{keys: []abi.RequestKey{msgs("p",
			"!param:name;param:count;param:negative;param:big;param:enabled;param:disabled;param:ratio;param:tags;param:nothing;param:blob;param:nested;param:empty;param:absent;param:a:b")}}},
		check: func(t *testing.T, r *run) {
			require.Equal(t, []string{
				"param:name=flow", "param:count=42", "param:negative=-7", "param:big=9223372036854775807",
				"param:enabled=true", "param:disabled=false", "param:ratio=?", "param:tags=?", "param:nothing=?",
				"param:blob=?", "param:nested=?", "param:empty=", "param:absent=missing", "param:a:b=colon",
			}, texts(entry(t, r.steps[0], "p").Emits))
		},
	},
	{
		name:  "params_absent",
		about: "an Init without parameters: every param: is missing",
		steps: []step{{keys: []abi.RequestKey{msgs("p", "!param:x;param:fail_init")}}},
		check: func(t *testing.T, r *run) {
			require.Equal(t, []string{"param:x=missing", "param:fail_init=missing"}, texts(entry(t, r.steps[0], "p").Emits))
		},
	},
	{
		name:   "fail_init",
		about:  "fail_init refuses to start with its text as the InitResult error",
		params: map[string]any{"fail_init": "no config ☹", "other": int64(1)},
		check: func(t *testing.T, r *run) {
			require.True(t, r.refused())
			require.Equal(t, "no config ☹", r.initResult.Error)
		},
	},
	{
		name:  "key_error",
		about: "failkey after effects and after an echo, unknown verbs with and without arguments, next to succeeding keys",
		steps: []step{{keys: []abi.RequestKey{
			msgs("good", "fine"),
			msgs("bad", "plain", "!emit:out:x;state:s;timer:5;cancel:6;failkey:broken ☠"),
			msgs("unknown", "!emit:out:y;frobnicate:1"),
			msgs("bare", "!nope"),
			msgs("after", "!emit:side:z"),
		}}},
		check: func(t *testing.T, r *run) {
			s := r.steps[0]
			require.Equal(t, []string{"good", "bad", "unknown", "bare", "after"}, reported(s))
			require.Equal(t, []string{"fine"}, texts(entry(t, s, "good").Emits))
			require.Equal(t, abi.ResponseKey{Key: "bad", Error: "broken ☠"}, entry(t, s, "bad"))
			require.Equal(t, abi.ResponseKey{Key: "unknown", Error: "unknown command frobnicate"}, entry(t, s, "unknown"))
			require.Equal(t, abi.ResponseKey{Key: "bare", Error: "unknown command nope"}, entry(t, s, "bare"))
			require.Equal(t, []abi.Emit{on("side", "z", 0)}, entry(t, s, "after").Emits)
			require.Empty(t, r.host.states, "a failed key changes no state")
			require.Empty(t, r.host.pending("bad"), "a failed key sets no timer")
		},
	},
	{
		name: "script_edges",
		about: "what SCRIPT.md leaves to the Go SDK: the first failkey wins, a script goes on after failkey, repeated sets of one trigger " +
			"are all listed, cancel then set, state read back within a batch, an empty command is an unknown verb",
		steps: []step{
			{keys: []abi.RequestKey{
				msgs("first", "!failkey:a;failkey:b"),
				msgs("sets", "!timer:5;timer:5;timerp:5:3:x;cancel:6;timer:6"),
				msgs("readback", "!showstate;state:x;showstate;delstate;showstate"),
				msgs("empty", "!emit:out:a;;emit:out:b"),
			}},
			{keys: []abi.RequestKey{msgs("k", "!failkey:a;failbatch:b")}},
		},
		check: func(t *testing.T, r *run) {
			s := r.steps[0]
			require.Equal(t, abi.ResponseKey{Key: "first", Error: "a"}, entry(t, s, "first"))
			e := entry(t, s, "sets")
			require.Equal(t, []abi.Timer{{TriggerTimestamp: 5}, {TriggerTimestamp: 5}, {TriggerTimestamp: 5, EventTimestamp: abi.Int64(3), Payload: []byte("x")}, {TriggerTimestamp: 6}}, e.TimersSet)
			require.Equal(t, []int64{6}, e.TimersCancel)
			e = entry(t, s, "readback")
			require.Equal(t, []string{"state:none", "state:x", "state:none"}, texts(e.Emits))
			require.Equal(t, abi.StateDelete, e.StateOp)
			require.Equal(t, abi.ResponseKey{Key: "empty", Error: "unknown command "}, entry(t, s, "empty"))
			require.Equal(t, "b", r.steps[1].resp.Error)
		},
	},
	{
		name:  "batch_error",
		about: "failbatch drops every key's effects; the state from before survives into the next request",
		steps: []step{
			{keys: []abi.RequestKey{msgs("k", "!state:kept")}},
			{keys: []abi.RequestKey{msgs("a", "fine"), msgs("k", "!state:lost;emit:out:z;failbatch:db down ☁"), msgs("c", "!emit:out:after")}},
			{keys: []abi.RequestKey{msgs("k", "!showstate")}},
		},
		check: func(t *testing.T, r *run) {
			require.Equal(t, "db down ☁", r.steps[1].resp.Error)
			require.Empty(t, r.steps[1].resp.Keys)
			require.Equal(t, []string{"state:kept"}, texts(entry(t, r.steps[2], "k").Emits))
		},
	},
	{
		name:        "meta",
		about:       "meta reports every field of the request and message: ids, streams, negative and int64 timestamps, watermarks, partition, epoch, computation, kind",
		partition:   7,
		computation: "conformance-λ",
		steps: []step{{
			watermarks: abi.Watermarks{Event: -5, System: math.MaxInt64},
			epoch:      123456789012345,
			keys: []abi.RequestKey{
				{Key: "m", Messages: []abi.Message{
					{ID: "id-1", Stream: "orders", EventTimestamp: -1000, SystemTimestamp: baseSystem, AlignmentTimestamp: baseSystem + 1, Payload: []byte("!meta")},
					{ID: "id-2 ☂", Stream: "поток", EventTimestamp: math.MinInt64, SystemTimestamp: 1, AlignmentTimestamp: 2, Payload: []byte("!meta;meta")},
				}},
				{Key: "", Messages: []abi.Message{{ID: "x", Stream: "s", EventTimestamp: 0, SystemTimestamp: 0, AlignmentTimestamp: 3, Payload: []byte("!meta")}}},
			},
		}},
		check: func(t *testing.T, r *run) {
			s := r.steps[0]
			m := s.req.Keys[0].Messages
			require.Equal(t, []abi.Emit{
				on("out", metaText(s.req, "m", m[0]), 0),
				on("out", metaText(s.req, "m", m[1]), 1),
				on("out", metaText(s.req, "m", m[1]), 1),
			}, entry(t, s, "m").Emits)
			require.Equal(t, "meta:key=m,stream=orders,id=id-1,event=-1000,system=1700000000500000000,alignment=1700000000500000001,"+
				"wm=-5/9223372036854775807,partition=7,epoch=123456789012345,computation=conformance-λ,kind=transform",
				string(entry(t, s, "m").Emits[0].Payload))
			require.Equal(t, []abi.Emit{on("out", metaText(s.req, "", s.req.Keys[1].Messages[0]), 0)}, entry(t, s, "").Emits)
		},
	},
	{
		name:  "map_kind",
		about: "a map computation: meta says kind=map, emits and echoes work, no state or timers",
		kind:  abi.KindMap,
		steps: []step{{keys: []abi.RequestKey{msgs("x", "!meta;emit:side:m", "plain")}}},
		check: func(t *testing.T, r *run) {
			s := r.steps[0]
			e := entry(t, s, "x")
			require.Equal(t, []abi.Emit{
				on("out", metaText(s.req, "x", s.req.Keys[0].Messages[0]), 0),
				on("side", "m", 0),
				on("out", "plain", 1),
			}, e.Emits)
			require.Contains(t, string(e.Emits[0].Payload), ",kind=map")
		},
	},
}
