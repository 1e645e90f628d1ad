package sdktest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
	"github.com/flowhost/flowhost/sdk/go/sdktest"
)

func TestProcessRefusesWhatTheHostRefuses(t *testing.T) {
	emitElsewhere := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			k.Emit("nowhere", []byte("x"))
		}
		return nil
	}}
	_, err := sdktest.Process(emitElsewhere, sdktest.Init{}, sdktest.NewBatch().Message("a", "in", 1, nil))
	require.Error(t, err)
	_, err = sdktest.Process(emitElsewhere, sdktest.Init{Outputs: []string{"nowhere"}}, sdktest.NewBatch().Message("a", "in", 1, nil))
	require.NoError(t, err)
}

// TestSessionTimers: due timers come first and in trigger order, a key
// with only a due timer takes part, a timer set again is one timer, a
// cancelled one never fires, and a failed key changes nothing.
func TestSessionTimers(t *testing.T) {
	var seen [][]string
	c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		var got []string
		for k := range b.Keys() {
			for tm := range k.Timers() {
				got = append(got, k.Key()+":timer:"+string(tm.Payload))
			}
			for m := range k.Messages() {
				got = append(got, k.Key()+":msg:"+string(m.Payload))
				switch string(m.Payload) {
				case "set":
					k.SetTimer(20, flowhost.WithTimerPayload([]byte("20")))
					k.SetTimer(10, flowhost.WithTimerPayload([]byte("10")))
					k.SetTimer(10, flowhost.WithTimerPayload([]byte("10 again")))
					k.SetTimer(30, flowhost.WithTimerPayload([]byte("30")))
				case "cancel":
					k.CancelTimer(30)
				case "fail":
					k.SetTimer(5)
					k.SetState([]byte("lost"))
					k.Fail(abi.StatusGuestFailure)
				}
			}
		}
		seen = append(seen, got)
		return nil
	}}
	s := sdktest.NewSession(c, sdktest.Init{})
	step := func(b *sdktest.Batch) {
		_, err := s.Process(b)
		require.NoError(t, err)
	}
	step(sdktest.NewBatch().Watermarks(0, 0).Message("a", "in", 0, []byte("set")))
	require.Equal(t, []int64{10, 20, 30}, s.Timers("a"))
	step(sdktest.NewBatch().Watermarks(1, 1).Message("a", "in", 1, []byte("cancel")).Message("b", "in", 1, []byte("fail")))
	require.Equal(t, []int64{10, 20}, s.Timers("a"))
	require.Empty(t, s.Timers("b"))
	_, ok := s.State("b")
	require.False(t, ok)
	step(sdktest.NewBatch().Watermarks(25, 25))
	step(sdktest.NewBatch().Watermarks(100, 100))
	require.Equal(t, [][]string{{"a:msg:set"}, {"a:msg:cancel", "b:msg:fail"}, {"a:timer:10 again", "a:timer:20"}, nil}, seen)
	require.Empty(t, s.Timers("a"))
}
