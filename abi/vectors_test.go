package abi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite abi/testdata/vectors from the Go values in vectors_test.go")

const vectorDir = "testdata/vectors"

// vector is one golden case. Every SDK is tested against the bytes these
// values encode to, so a change here is a change of the wire format.
type vector struct {
	name        string
	description string
	outputs     []string // declared output streams the response is valid against
	request     *Request
	response    *Response
	init        *Init
	initResult  *InitResult
}

// Realistic nanosecond timestamps around 2025-06-15T12:00:00Z.
const (
	t0  = int64(1_750_000_000_000_000_000)
	sec = int64(1_000_000_000)
)

func base(name string, kind Kind, keys ...RequestKey) *Request {
	if keys == nil {
		keys = []RequestKey{} // what an empty array decodes to
	}
	return &Request{
		ABI: Version, Computation: name, Kind: kind, Partition: 0, Epoch: 1,
		Watermarks: Watermarks{Event: t0 - 60*sec, System: t0},
		Keys:       keys,
	}
}

func msg(id, stream string, at int64, payload string) Message {
	return Message{ID: id, Stream: stream, EventTimestamp: at - 2*sec, SystemTimestamp: at - sec, AlignmentTimestamp: at, Payload: []byte(payload)}
}

func vectors() []vector {
	manyKeys := base("click-counter", KindTransform,
		RequestKey{Key: "alice", Messages: []Message{
			msg("7-clicks:100", "clicks", t0, `{"page":"/"}`),
			msg("3-views:12", "views", t0+sec, `{"page":"/docs"}`),
		}},
		RequestKey{Key: "bob", Messages: []Message{msg("7-clicks:101", "clicks", t0+2*sec, `{"page":"/"}`)}},
		RequestKey{Key: "carol", Messages: []Message{
			msg("7-clicks:102", "clicks", t0+3*sec, `{"page":"/a"}`),
			msg("7-clicks:103", "clicks", t0+4*sec, `{"page":"/b"}`),
			msg("7-clicks:104", "clicks", t0+5*sec, `{"page":"/c"}`),
		}},
	)
	manyKeys.Partition, manyKeys.Epoch = 7, 1<<33

	return []vector{
		{
			name:        "empty_batch",
			description: "A batch without keys; the guest answers with an empty keys array.",
			outputs:     []string{"out"},
			request:     base("noop", KindTransform),
			response:    &Response{Keys: []ResponseKey{}},
		},
		{
			name:        "one_key_one_message",
			description: "One key with one message; the guest emits the upper-cased payload while iterating the message, so the emit names that message (input 0) as its parent.",
			outputs:     []string{"out"},
			request:     base("upper", KindTransform, RequestKey{Key: "user-1", Messages: []Message{msg("1-in:0", "in", t0, "hello")}}),
			response: &Response{Keys: []ResponseKey{{Key: "user-1", Emits: []Emit{
				{Stream: "out", Payload: []byte("HELLO"), Parents: []uint32{0}},
			}}}},
		},
		{
			name:        "many_keys",
			description: "Three keys with messages from two streams, a large epoch and a non-zero partition; the guest emits, after iterating, the number of messages of each key that has more than one, so key bob is left out of the response and the emits have no parents field (every input of the key).",
			outputs:     []string{"counts"},
			request:     manyKeys,
			response: &Response{Keys: []ResponseKey{
				{Key: "alice", Emits: []Emit{{Stream: "counts", Payload: []byte("2")}}},
				{Key: "carol", Emits: []Emit{{Stream: "counts", Payload: []byte("3")}}},
			}},
		},
		{
			name:        "unicode",
			description: "Keys and payloads in several scripts, and a key that is empty; the guest echoes each payload to stream echo, carrying the input's key as the output's key (the empty key is not carried: an empty emit key means none).",
			outputs:     []string{"echo"},
			request: base("echo", KindTransform,
				RequestKey{Key: "日本語", Messages: []Message{msg("1-in:0", "in", t0, "こんにちは世界")}},
				RequestKey{Key: "ключ", Messages: []Message{msg("1-in:1", "in", t0+1, "héllo wörld")}},
				RequestKey{Key: "🔑 e\u0301", Messages: []Message{msg("1-in:2", "in", t0+2, "😀\x00\xff")}},
				RequestKey{Key: "", Messages: []Message{msg("1-in:3", "in", t0+3, "")}},
			),
			response: &Response{Keys: []ResponseKey{
				{Key: "日本語", Emits: []Emit{{Stream: "echo", Payload: []byte("こんにちは世界"), Key: "日本語", Parents: []uint32{0}}}},
				{Key: "ключ", Emits: []Emit{{Stream: "echo", Payload: []byte("héllo wörld"), Key: "ключ", Parents: []uint32{0}}}},
				{Key: "🔑 e\u0301", Emits: []Emit{{Stream: "echo", Payload: []byte("😀\x00\xff"), Key: "🔑 e\u0301", Parents: []uint32{0}}}},
				{Key: "", Emits: []Emit{{Stream: "echo", Payload: []byte{}, Parents: []uint32{0}}}},
			}},
		},
		{
			name:        "state_create",
			description: "A counter: the key has no state (the state field is absent), one message arrives, and the guest creates the state \"1\" with state_op 1 (replace).",
			outputs:     []string{"out"},
			request:     base("counter", KindTransform, RequestKey{Key: "k", Messages: []Message{msg("1-in:0", "in", t0, "tick")}}),
			response:    &Response{Keys: []ResponseKey{{Key: "k", StateOp: StateReplace, State: []byte("1")}}},
		},
		{
			name:        "state_replace",
			description: "A counter over three keys: state \"41\" becomes \"43\" after two messages; an empty but present state (h'') becomes \"1\"; a key whose message says \"clear\" has its state replaced by an empty byte string, which is not the same as deleting it.",
			outputs:     []string{"out"},
			request: base("counter", KindTransform,
				RequestKey{Key: "a", State: []byte("41"), Messages: []Message{msg("1-in:0", "in", t0, "tick"), msg("1-in:1", "in", t0+1, "tick")}},
				RequestKey{Key: "b", State: []byte{}, Messages: []Message{msg("1-in:2", "in", t0+2, "tick")}},
				RequestKey{Key: "c", State: []byte("9"), Messages: []Message{msg("1-in:3", "in", t0+3, "clear")}},
			),
			response: &Response{Keys: []ResponseKey{
				{Key: "a", StateOp: StateReplace, State: []byte("43")},
				{Key: "b", StateOp: StateReplace, State: []byte("1")},
				{Key: "c", StateOp: StateReplace, State: []byte{}},
			}},
		},
		{
			name:        "state_delete",
			description: "A counter whose message says \"reset\": the guest deletes the key's state with state_op 2 and emits the final count, naming the message as parent; the second key keeps its state (state_op absent) and emits nothing, so it is left out.",
			outputs:     []string{"final"},
			request: base("counter", KindTransform,
				RequestKey{Key: "done", State: []byte("17"), Messages: []Message{msg("1-in:0", "in", t0, "reset")}},
				RequestKey{Key: "idle", State: []byte("5"), Messages: []Message{msg("1-in:1", "in", t0+1, "peek")}},
			),
			response: &Response{Keys: []ResponseKey{
				{Key: "done", StateOp: StateDelete, Emits: []Emit{{Stream: "final", Payload: []byte("17"), Parents: []uint32{0}}}},
			}},
		},
		{
			name:        "timers",
			description: "Two due timers (inputs 0 and 1, in fire order; the first has a payload) and one message (input 2) for one key. The guest emits one output per input naming it as parent, sets a timer 60 s later without event_ts or payload and one 120 s later with both, and cancels the timers due 30 s later.",
			outputs:     []string{"fired"},
			request: func() *Request {
				r := base("sessionizer", KindTransform, RequestKey{
					Key: "session-9",
					Timers: []DueTimer{
						{ID: "t-session-9:1", TriggerTimestamp: t0 - 10*sec, EventTimestamp: t0 - 15*sec, Payload: []byte("flush")},
						{ID: "t-session-9:2", TriggerTimestamp: t0 - 5*sec, EventTimestamp: t0 - 5*sec},
					},
					Messages: []Message{msg("4-events:9", "events", t0, "ping")},
				})
				r.Watermarks.Event = t0
				return r
			}(),
			response: &Response{Keys: []ResponseKey{{
				Key: "session-9",
				Emits: []Emit{
					{Stream: "fired", Payload: []byte("timer:flush"), Parents: []uint32{0}},
					{Stream: "fired", Payload: []byte("timer:"), Parents: []uint32{1}},
					{Stream: "fired", Payload: []byte("message:ping"), Parents: []uint32{2}},
				},
				TimersSet: []Timer{
					{TriggerTimestamp: t0 + 60*sec},
					{TriggerTimestamp: t0 + 120*sec, EventTimestamp: Int64(t0 + 100*sec), Payload: []byte("late")},
				},
				TimersCancel: []int64{t0 + 30*sec},
			}}},
		},
		{
			name:        "explicit_parents",
			description: "A join over three messages of one key: an emit derived from inputs 0 and 2, an emit with an output key and an EventTimestamp before 1970 derived from input 1, and an audit emit with no parents field (every input).",
			outputs:     []string{"joined", "audit"},
			request: base("join", KindTransform, RequestKey{Key: "order-5", Messages: []Message{
				msg("2-orders:5", "orders", t0, "order"),
				msg("3-payments:8", "payments", t0+sec, "payment"),
				msg("2-orders:6", "orders", t0+2*sec, "order-update"),
			}}),
			response: &Response{Keys: []ResponseKey{{Key: "order-5", Emits: []Emit{
				{Stream: "joined", Payload: []byte("order+order-update"), Parents: []uint32{0, 2}},
				{Stream: "joined", Payload: []byte("payment"), Key: "customer-1", EventTimestamp: Int64(-1_000), Parents: []uint32{1}},
				{Stream: "audit", Payload: []byte("3 inputs"), EventTimestamp: Int64(t0 + 3*sec)},
			}}}},
		},
		{
			name:        "map_kind",
			description: "A map computation (kind \"map\"): two keys with one message each; each output names its single parent, whose timestamps the host copies.",
			outputs:     []string{"lengths"},
			request: base("length", KindMap,
				RequestKey{Key: "x", Messages: []Message{msg("1-in:0", "in", t0, "abc")}},
				RequestKey{Key: "y", Messages: []Message{msg("1-in:1", "in", t0+1, "abcdef")}},
			),
			response: &Response{Keys: []ResponseKey{
				{Key: "x", Emits: []Emit{{Stream: "lengths", Payload: []byte("3"), Parents: []uint32{0}}}},
				{Key: "y", Emits: []Emit{{Stream: "lengths", Payload: []byte("6"), Parents: []uint32{0}}}},
			}},
		},
		{
			name:        "key_error",
			description: "Two keys; the payload of key bad is not a number, so the guest fails that key (error is its only field) and its inputs go to the dead-letter stream, while key good emits normally.",
			outputs:     []string{"doubled"},
			request: base("doubler", KindTransform,
				RequestKey{Key: "good", Messages: []Message{msg("1-in:0", "in", t0, "21")}},
				RequestKey{Key: "bad", Messages: []Message{msg("1-in:1", "in", t0+1, "twenty")}},
			),
			response: &Response{Keys: []ResponseKey{
				{Key: "good", Emits: []Emit{{Stream: "doubled", Payload: []byte("42"), Parents: []uint32{0}}}},
				{Key: "bad", Error: `strconv.Atoi: parsing "twenty": invalid syntax`},
			}},
		},
		{
			name:        "batch_error",
			description: "The guest fails the whole batch: the response has an empty keys array and a top-level error; the host applies its failure policy to every input.",
			outputs:     []string{"out"},
			request:     base("lookup", KindTransform, RequestKey{Key: "k", Messages: []Message{msg("1-in:0", "in", t0, "q")}}),
			response:    &Response{Keys: []ResponseKey{}, Error: "lookup table not loaded"},
		},
		{
			name:        "init_parameters",
			description: "The init envelope with parameters of every kind a pipeline spec can hold (text, integers, a float, a bool, null, a list and a map) and two output streams; the guest accepts it by returning 0, so there is no init_result.",
			init: &Init{
				ABI: Version, Computation: "windowed-sum", Kind: KindTransform, Partition: 2,
				Parameters: map[string]any{
					"window":    "5m",
					"threshold": int64(10),
					"offset":    int64(-3),
					"ratio":     0.25,
					"enabled":   true,
					"fallback":  nil,
					"tags":      []any{"a", "b"},
					"sink":      map[string]any{"retries": int64(3), "name": "alerts"},
				},
				OutputStreams: []string{"sums", "alerts"},
			},
		},
		{
			name:        "init_error",
			description: "An init envelope without parameters whose computation requires one; the guest refuses to start with an init_result carrying the error.",
			init: &Init{
				ABI: Version, Computation: "windowed-sum", Kind: KindTransform, Partition: 0,
				OutputStreams: []string{"sums"},
			},
			initResult: &InitResult{Error: `parameter "window" is missing`},
		},
	}
}

// vectorFiles encodes a case into its files: name -> contents.
func vectorFiles(t *testing.T, v vector) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	doc := map[string]any{"name": v.name, "description": v.description}
	add := func(suffix, field string, value any, encode func() ([]byte, error)) {
		b, err := encode()
		require.NoError(t, err, "%s: %s", v.name, suffix)
		files[v.name+"."+suffix+".cbor"] = b
		doc[field] = jsonView(t, b)
	}
	if v.request != nil {
		doc["output_streams"] = v.outputs
		add("request", "request", v.request, func() ([]byte, error) { return EncodeRequest(v.request) })
	}
	if v.response != nil {
		add("response", "response", v.response, func() ([]byte, error) { return EncodeResponse(v.response) })
	}
	if v.init != nil {
		add("init", "init", v.init, func() ([]byte, error) { return EncodeInit(v.init) })
	}
	if v.initResult != nil {
		add("init_result", "init_result", v.initResult, func() ([]byte, error) { return EncodeInitResult(v.initResult) })
	}
	j, err := json.MarshalIndent(doc, "", "  ")
	require.NoError(t, err)
	files[v.name+".json"] = append(j, '\n')
	return files
}

// jsonView decodes an envelope generically and renders byte strings as
// standard base64 text, so a reader sees exactly what is on the wire.
func jsonView(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, decMode.Unmarshal(b, &v))
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case []byte:
			return base64.StdEncoding.EncodeToString(x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	return walk(v)
}

// TestGoldenVectors regenerates every vector from its Go value and asserts
// that the committed files are byte-identical; with -update it rewrites
// them instead. It also fails on a committed file that no case produces.
func TestGoldenVectors(t *testing.T) {
	want := map[string][]byte{}
	for _, v := range vectors() {
		for name, b := range vectorFiles(t, v) {
			want[name] = b
		}
	}
	if *update {
		require.NoError(t, os.RemoveAll(vectorDir))
		require.NoError(t, os.MkdirAll(vectorDir, 0o755))
		for name, b := range want {
			require.NoError(t, os.WriteFile(filepath.Join(vectorDir, name), b, 0o644))
		}
	}
	entries, err := os.ReadDir(vectorDir)
	require.NoError(t, err)
	var committed []string
	for _, e := range entries {
		committed = append(committed, e.Name())
	}
	var expected []string
	for name := range want {
		expected = append(expected, name)
	}
	slices.Sort(expected)
	require.Equal(t, expected, committed, "files in %s (run go test ./abi -run TestGoldenVectors -update)", vectorDir)
	for _, name := range expected {
		got, err := os.ReadFile(filepath.Join(vectorDir, name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want[name], got), "%s differs from its Go value (run with -update if the change is intended)", name)
	}
}

// TestGoldenVectorsDecode checks that every vector survives its own strict
// decoder and validator unchanged: the vectors are valid envelopes, not
// just stable bytes.
func TestGoldenVectorsDecode(t *testing.T) {
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			if v.request != nil {
				b, err := os.ReadFile(filepath.Join(vectorDir, v.name+".request.cbor"))
				require.NoError(t, err)
				req, err := DecodeRequest(b)
				require.NoError(t, err)
				require.Equal(t, v.request, req)
				require.NoError(t, req.Validate())
			}
			if v.response != nil {
				b, err := os.ReadFile(filepath.Join(vectorDir, v.name+".response.cbor"))
				require.NoError(t, err)
				resp, err := DecodeResponse(b, ResponseLimits{})
				require.NoError(t, err)
				require.Equal(t, v.response, resp)
				require.NoError(t, ValidateResponse(resp, v.request, v.outputs))
			}
			if v.init != nil {
				b, err := os.ReadFile(filepath.Join(vectorDir, v.name+".init.cbor"))
				require.NoError(t, err)
				in, err := DecodeInit(b)
				require.NoError(t, err)
				require.Equal(t, v.init, in)
				require.NoError(t, in.Validate())
			}
			if v.initResult != nil {
				b, err := os.ReadFile(filepath.Join(vectorDir, v.name+".init_result.cbor"))
				require.NoError(t, err)
				r, err := DecodeInitResult(b)
				require.NoError(t, err)
				require.Equal(t, v.initResult, r)
			}
		})
	}
}

// TestGoldenVectorsCoverTheBrief keeps the required cases from being
// dropped by accident.
func TestGoldenVectorsCoverTheBrief(t *testing.T) {
	var names []string
	for _, v := range vectors() {
		names = append(names, v.name)
		require.NotEmpty(t, v.description, v.name)
		require.False(t, strings.ContainsAny(v.name, " ./"), v.name)
	}
	for _, need := range []string{"empty_batch", "one_key_one_message", "many_keys", "unicode", "state_create", "state_replace", "state_delete", "timers", "explicit_parents", "init_parameters", "key_error", "batch_error"} {
		require.Contains(t, names, need)
	}
}
