package wat_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/wat"
)

// started returns an instance of conformance.wat after a successful Init
// declaring the streams out and side.
func started(t *testing.T) func(*abi.Request) *abi.Response {
	t.Helper()
	inst := instance(t, wat.Conformance)
	b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindTransform, OutputStreams: []string{"out", "side"}})
	require.NoError(t, err)
	res, err := inst.Init(context.Background(), b)
	require.NoError(t, err)
	require.Nil(t, res, "a successful Init returns 0")
	return func(req *abi.Request) *abi.Response {
		out := process(t, inst, req)
		resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
		require.NoError(t, err)
		require.NoError(t, abi.ValidateResponse(resp, req, []string{"out", "side"}))
		canon, err := abi.EncodeResponse(resp)
		require.NoError(t, err)
		require.Equal(t, canon, out, "conformance.wat encodes canonically")
		return resp
	}
}

// TestQuote checks the guest's %q, which the Go guest's "bad command"
// errors use, against strconv: every ASCII byte, bytes that are not
// UTF-8, and the code points on both sides of every boundary between
// printable and escaped ones.
func TestQuote(t *testing.T) {
	run := started(t)
	args := []string{"\xff", "\xc0\x80", "a\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", `"\`}
	for b := range 0x80 {
		if b != ';' { // a command never holds one
			args = append(args, string(rune(b)))
		}
	}
	printable := false
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if p := strconv.IsPrint(r); p != printable || r == 0x80 {
			printable = p
			for _, c := range []rune{r - 1, r} {
				if utf8.ValidRune(c) && c >= 0x80 {
					args = append(args, string(c))
				}
			}
		}
	}
	require.Greater(t, len(args), 1000)
	req := newRequest()
	for i, a := range args {
		req.Keys = append(req.Keys, abi.RequestKey{Key: strconv.Itoa(i), Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte("!timer:x" + a)}}})
	}
	resp := run(req)
	require.Len(t, resp.Keys, len(args))
	for i, a := range args {
		_, err := strconv.ParseInt("x"+a, 10, 64)
		require.Equal(t, fmt.Sprintf("bad command %q: %v", "timer:x"+a, err), resp.Keys[i].Error, "argument %q", a)
	}
}

// TestNumbers checks the script's numbers against strconv.ParseInt: what
// it accepts, and the error texts of what it refuses.
func TestNumbers(t *testing.T) {
	run := started(t)
	nums := []string{"0", "-0", "+0", "7", "+7", "-7", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
		"99999999999999999999x", "x99999999999999999999", "", "+", "-", "--1", "1_000", " 1", "1 ", "0x10", "1e3", "٣"}
	for _, n := range nums {
		t.Run(n, func(t *testing.T) {
			resp := run(newRequest(abi.RequestKey{Key: "k", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte("!timer:" + n)}}}))
			require.Len(t, resp.Keys, 1)
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				require.Equal(t, fmt.Sprintf("bad command %q: %v", "timer:"+n, err), resp.Keys[0].Error)
				return
			}
			require.Empty(t, resp.Keys[0].Error)
			require.Equal(t, []abi.Timer{{TriggerTimestamp: v}}, resp.Keys[0].TimersSet)
		})
	}
}

// TestNotUTF8 checks that error texts and emit keys are made valid
// UTF-8 as strings.ToValidUTF8 does: each run of bad bytes becomes one
// U+FFFD.
func TestNotUTF8(t *testing.T) {
	run := started(t)
	resp := run(newRequest(
		abi.RequestKey{Key: "a", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte("!failkey:x\xff\xfe\xe2\x82y\xc0\x80")}}},
		abi.RequestKey{Key: "b", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte("!emitk:out:\xffk\xed\xa0\x80:v")}}},
		abi.RequestKey{Key: "c", Messages: []abi.Message{{ID: "m", Stream: "in", Payload: []byte("!failkey:")}}},
	))
	require.Equal(t, "x\uFFFDy\uFFFD", resp.Keys[0].Error)
	require.Equal(t, "\uFFFDk\uFFFD", resp.Keys[1].Emits[0].Key)
	require.Equal(t, "failed (the error has no message)", resp.Keys[2].Error)
}

// TestGuestFailures: where the Go SDK panics, conformance.wat answers
// status -2 (a guest failure), and the instance stays usable.
func TestGuestFailures(t *testing.T) {
	inst := instance(t, wat.Conformance)
	req := newRequest(messages("k", []byte("!emit:out:x")))
	b, err := abi.EncodeRequest(req)
	require.NoError(t, err)
	_, err = inst.Process(context.Background(), b)
	require.Equal(t, int64(abi.StatusGuestFailure), statusOf(err), "a batch before Init")

	in, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindMap, OutputStreams: []string{"out"}})
	require.NoError(t, err)
	_, err = inst.Init(context.Background(), in)
	require.NoError(t, err)
	for _, script := range []string{"!emit:side:x", "!state:x", "!append", "!delstate", "!timer:1", "!timerp:1:1:x", "!cancel:1"} {
		req := newRequest(messages("k", []byte(script)))
		req.Kind = abi.KindMap
		b, err := abi.EncodeRequest(req)
		require.NoError(t, err)
		_, err = inst.Process(context.Background(), b)
		require.Equal(t, int64(abi.StatusGuestFailure), statusOf(err), script)
	}
	req = newRequest(messages("k", []byte("!emit:out:fine;showstate")))
	req.Kind = abi.KindMap
	out := process(t, inst, req)
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	require.NoError(t, err)
	require.Equal(t, []string{"fine", "state:none"}, []string{string(resp.Keys[0].Emits[0].Payload), string(resp.Keys[0].Emits[1].Payload)})
}

// ExampleBuildConformanceGuest builds the WAT conformance guest and lists
// what it exports.
func ExampleBuildConformanceGuest() {
	dir, err := os.MkdirTemp("", "wat-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path, err := wat.BuildConformanceGuest(dir)
	if err != nil {
		panic(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	info, err := engine.Inspect(b)
	if err != nil {
		panic(err)
	}
	for _, e := range info.Exports {
		fmt.Println(e.Name, e.Kind)
	}
	// Output:
	// memory memory
	// flowhost_abi_v1 func
	// flowhost_alloc func
	// flowhost_init func
	// flowhost_process func
}

// BenchmarkConformance runs a batch of 100 keys, each with a due timer
// and a script that emits, sets state and a timer, and shows the state.
func BenchmarkConformance(b *testing.B) {
	inst := instance(b, wat.Conformance)
	in, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindTransform, OutputStreams: []string{"out", "side"}})
	require.NoError(b, err)
	_, err = inst.Init(context.Background(), in)
	require.NoError(b, err)
	req := newRequest()
	for i := range 100 {
		k := timers(messages("key-"+strconv.Itoa(i), []byte("!emit:side:x;state:s;append;timerp:5:4:p;showstate;meta"), []byte("plain")), 1)
		k.State = []byte("old")
		req.Keys = append(req.Keys, k)
	}
	payload, err := abi.EncodeRequest(req)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := inst.Process(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
}
