package flowhost

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowhost/flowhost/abi"
	"github.com/stretchr/testify/require"
)

// request builds a request whose keys each have the given number of due
// timers and messages.
func request(kind abi.Kind, keys ...abi.RequestKey) *abi.Request {
	return &abi.Request{ABI: abi.Version, Computation: "test", Kind: kind, Partition: 4, Epoch: 9,
		Watermarks: abi.Watermarks{Event: 100, System: 200}, Keys: keys}
}

func inputs(key string, timers, messages int) abi.RequestKey {
	k := abi.RequestKey{Key: key}
	for i := range timers {
		k.Timers = append(k.Timers, abi.DueTimer{ID: key + "-t" + string(rune('0'+i)), TriggerTimestamp: int64(10 + i), EventTimestamp: int64(5 + i)})
	}
	for i := range messages {
		k.Messages = append(k.Messages, abi.Message{ID: key + "-m" + string(rune('0'+i)), Stream: "in",
			EventTimestamp: int64(20 + i), SystemTimestamp: int64(30 + i), AlignmentTimestamp: int64(40 + i), Payload: []byte{byte('a' + i)}})
	}
	return k
}

func declare(outputs ...string) *abi.Init {
	return &abi.Init{ABI: abi.Version, Computation: "test", Kind: abi.KindTransform, OutputStreams: outputs}
}

// run passes req through process and returns the response, failing the
// test on a guest failure.
func run(t *testing.T, req *abi.Request, process func(*Batch) error) *abi.Response {
	t.Helper()
	resp, err := Run(Computation{Process: process}, declare("out", "side"), req)
	require.NoError(t, err)
	require.NoError(t, abi.ValidateResponse(resp, req, []string{"out", "side"}), "the SDK produced an invalid response")
	return resp
}

// captureLog collects log lines for the duration of the test.
func captureLog(t *testing.T) *[]string {
	var lines []string
	prev := logSink
	logSink = func(level Level, msg string) { lines = append(lines, level.String()+" "+msg) }
	t.Cleanup(func() { logSink = prev })
	return &lines
}

// guestFailure runs process and requires a guest failure whose log names
// want.
func guestFailure(t *testing.T, req *abi.Request, process func(*Batch) error, want string) {
	t.Helper()
	lines := captureLog(t)
	_, err := Run(Computation{Process: process}, declare("out", "side"), req)
	require.ErrorIs(t, err, abi.StatusGuestFailure)
	require.Len(t, *lines, 1)
	require.Contains(t, (*lines)[0], want)
}

func TestBatchMetadata(t *testing.T) {
	run(t, request(abi.KindMap, inputs("a", 0, 1), inputs("b", 0, 2)), func(b *Batch) error {
		require.Equal(t, "test", b.Computation())
		require.Equal(t, "map", b.Kind())
		require.Equal(t, uint64(4), b.Partition())
		require.Equal(t, uint64(9), b.Epoch())
		require.Equal(t, Watermarks{Event: 100, System: 200}, b.Watermarks())
		require.Equal(t, 2, b.Len())
		var keys []string
		for k := range b.Keys() {
			keys = append(keys, k.Key())
			break
		}
		require.Equal(t, []string{"a"}, keys, "breaking out of Keys stops it")
		return nil
	})
}

func TestInputsInOrder(t *testing.T) {
	req := request(abi.KindTransform, inputs("k", 2, 3))
	run(t, req, func(b *Batch) error {
		for k := range b.Keys() {
			require.Equal(t, 5, k.Inputs())
			var got []Timer
			for tm := range k.Timers() {
				got = append(got, tm)
			}
			require.Equal(t, []Timer{{ID: "k-t0", TriggerTimestamp: 10, EventTimestamp: 5, Input: 0}, {ID: "k-t1", TriggerTimestamp: 11, EventTimestamp: 6, Input: 1}}, got)
			var ms []Message
			for m := range k.Messages() {
				ms = append(ms, m)
			}
			require.Len(t, ms, 3)
			require.Equal(t, Message{ID: "k-m2", Stream: "in", EventTimestamp: 22, SystemTimestamp: 32, AlignmentTimestamp: 42, Payload: []byte("c"), Input: 4}, ms[2])
		}
		return nil
	})
}

func TestEmitParents(t *testing.T) {
	resp := run(t, request(abi.KindTransform, inputs("k", 2, 2)), func(b *Batch) error {
		for k := range b.Keys() {
			k.Emit("out", []byte("before any loop"))
			for tm := range k.Timers() {
				k.Emit("out", []byte("timer"))
				if tm.Input == 1 {
					for range k.Messages() {
						k.Emit("out", []byte("message inside timer"))
					}
					k.Emit("out", []byte("timer again"))
				}
			}
			for range k.Messages() {
				k.Emit("out", []byte("all"), WithAllParents())
				k.Emit("side", []byte("explicit"), WithParents(3, 0, 3))
				k.Emit("side", []byte("last option wins"), WithParents(1), WithAllParents())
				break
			}
			k.Emit("out", []byte("after the loops"))
		}
		return nil
	})
	var got [][]uint32
	for _, e := range resp.Keys[0].Emits {
		got = append(got, e.Parents)
	}
	require.Equal(t, [][]uint32{
		nil,      // before any loop: every input
		{0},      // timer 0
		{1},      // timer 1
		{2}, {3}, // messages, iterated inside timer 1
		{1},    // restored to timer 1
		nil,    // WithAllParents inside a loop
		{3, 0}, // explicit, repeats dropped, order kept
		nil,    // WithAllParents after WithParents
		nil,    // after the loops
	}, got)
}

func TestEmitOptions(t *testing.T) {
	payload := []byte("original")
	resp := run(t, request(abi.KindTransform, inputs("k", 0, 1)), func(b *Batch) error {
		for k := range b.Keys() {
			k.Emit("out", payload, WithKey("other"), WithEventTimestamp(-5))
			copy(payload, "CHANGED!")
			k.Emit("side", nil)
		}
		return nil
	})
	require.Equal(t, []abi.Emit{
		{Stream: "out", Payload: []byte("original"), Key: "other", EventTimestamp: abi.Int64(-5)},
		{Stream: "side", Payload: []byte{}},
	}, resp.Keys[0].Emits)
}

func TestEmitMistakesAreGuestFailures(t *testing.T) {
	req := request(abi.KindTransform, inputs("k", 1, 1))
	tests := []struct {
		name string
		emit func(*Key)
		want string
	}{
		{"undeclared stream", func(k *Key) { k.Emit("secret", nil) }, `Emit to "secret", which is not a declared output stream (declared: out, side)`},
		{"parent out of range", func(k *Key) { k.Emit("out", nil, WithParents(2)) }, `WithParents(2): key "k" has 2 inputs`},
		{"negative parent", func(k *Key) { k.Emit("out", nil, WithParents(-1)) }, `WithParents(-1)`},
		{"no parents", func(k *Key) { k.Emit("out", nil, WithParents()) }, "WithParents without inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guestFailure(t, req, func(b *Batch) error {
				for k := range b.Keys() {
					tt.emit(k)
				}
				return nil
			}, tt.want)
		})
	}
}

func TestMapKeepsNoStateOrTimers(t *testing.T) {
	req := request(abi.KindMap, inputs("k", 0, 1))
	for name, call := range map[string]func(*Key){
		"SetState":    func(k *Key) { k.SetState(nil) },
		"DeleteState": func(k *Key) { k.DeleteState() },
		"SetTimer":    func(k *Key) { k.SetTimer(1) },
		"CancelTimer": func(k *Key) { k.CancelTimer(1) },
	} {
		t.Run(name, func(t *testing.T) {
			guestFailure(t, req, func(b *Batch) error {
				for k := range b.Keys() {
					call(k)
				}
				return nil
			}, name+" in a map computation")
		})
	}
}

func TestState(t *testing.T) {
	withState := inputs("has", 0, 1)
	withState.State = []byte("old")
	emptyState := inputs("empty", 0, 1)
	emptyState.State = []byte{}
	resp := run(t, request(abi.KindTransform, inputs("none", 0, 1), withState, emptyState), func(b *Batch) error {
		for k := range b.Keys() {
			s, ok := k.State()
			switch k.Key() {
			case "none":
				require.False(t, ok)
				require.Nil(t, s)
				k.SetState(nil)
				s, ok = k.State()
				require.True(t, ok, "an empty state is a state")
				require.Equal(t, []byte{}, s)
			case "has":
				require.True(t, ok)
				require.Equal(t, []byte("old"), s)
				buf := []byte("new")
				k.SetState(buf)
				buf[0] = 'N'
				k.DeleteState()
				_, ok = k.State()
				require.False(t, ok)
			case "empty":
				require.True(t, ok)
				require.Equal(t, []byte{}, s)
			}
		}
		return nil
	})
	require.Equal(t, []abi.ResponseKey{
		{Key: "none", StateOp: abi.StateReplace, State: []byte{}},
		{Key: "has", StateOp: abi.StateDelete},
	}, resp.Keys, "a key without effects is left out")
}

func TestTimers(t *testing.T) {
	resp := run(t, request(abi.KindTransform, inputs("k", 0, 1)), func(b *Batch) error {
		for k := range b.Keys() {
			k.SetTimer(10, WithTimerPayload([]byte{}))
			k.SetTimer(20, WithTimerPayload([]byte("p")), WithTimerEventTimestamp(15))
			k.CancelTimer(10)
			k.CancelTimer(10)
			k.CancelTimer(30)
			k.SetTimer(30)
		}
		return nil
	})
	require.Equal(t, []abi.ResponseKey{{
		Key:          "k",
		TimersSet:    []abi.Timer{{TriggerTimestamp: 20, EventTimestamp: abi.Int64(15), Payload: []byte("p")}, {TriggerTimestamp: 30}},
		TimersCancel: []int64{10, 30},
	}}, resp.Keys)

	resp = run(t, request(abi.KindTransform, inputs("k", 0, 1)), func(b *Batch) error {
		for k := range b.Keys() {
			k.SetTimer(10)
			k.CancelTimer(10)
		}
		return nil
	})
	require.Equal(t, []abi.ResponseKey{{Key: "k", TimersCancel: []int64{10}}}, resp.Keys)
}

func TestFail(t *testing.T) {
	first := errors.New("first")
	resp := run(t, request(abi.KindTransform, inputs("bad", 0, 1), inputs("good", 0, 1), inputs("silent", 0, 1)), func(b *Batch) error {
		for k := range b.Keys() {
			switch k.Key() {
			case "bad":
				k.Emit("out", []byte("dropped"))
				k.SetState([]byte("dropped"))
				k.SetTimer(1)
				k.Fail(nil)
				require.NoError(t, k.Err())
				k.Fail(first)
				k.Fail(errors.New("second"))
				require.Equal(t, first, k.Err())
			case "good":
				k.Emit("out", []byte("kept"))
			case "silent":
				k.Fail(errors.New(""))
			}
		}
		return nil
	})
	require.Equal(t, []abi.ResponseKey{
		{Key: "bad", Error: "first"},
		{Key: "good", Emits: []abi.Emit{{Stream: "out", Payload: []byte("kept")}}},
		{Key: "silent", Error: "failed (the error has no message)"},
	}, resp.Keys)
}

func TestBatchError(t *testing.T) {
	resp := run(t, request(abi.KindTransform, inputs("k", 0, 1)), func(b *Batch) error {
		for k := range b.Keys() {
			k.Emit("out", nil)
		}
		return errors.New("db down")
	})
	require.Equal(t, &abi.Response{Keys: []abi.ResponseKey{}, Error: "db down"}, resp)
}

func TestLevelString(t *testing.T) {
	var names []string
	for _, l := range []Level{LevelDebug, LevelInfo, LevelWarn, LevelError, 2} {
		names = append(names, l.String())
	}
	require.Equal(t, "DEBUG INFO WARN ERROR LEVEL(2)", strings.Join(names, " "))
}

func TestLogf(t *testing.T) {
	lines := captureLog(t)
	Logf(LevelWarn, "%d widgets", 3)
	Log(LevelInfo, "plain")
	require.Equal(t, []string{"WARN 3 widgets", "INFO plain"}, *lines)
}
