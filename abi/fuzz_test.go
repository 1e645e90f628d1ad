package abi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// seedFiles adds every golden vector file with the given suffix, and a few
// near misses, to a fuzz corpus.
func seedFiles(f *testing.F, suffix string) {
	matches, err := filepath.Glob(filepath.Join(vectorDir, "*."+suffix+".cbor"))
	require.NoError(f, err)
	require.NotEmpty(f, matches)
	for _, name := range matches {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append(b[:len(b):len(b)], 0))
	}
	f.Add([]byte{})
	f.Add([]byte{0xbf, 0xff})
	f.Add([]byte{0xa1, 0x64, 'k', 'e', 'y', 's', 0x9f, 0xff})
}

// requireCheckerFirst asserts that a rejection came from the checker, with
// a field path where one applies, never from the library behind it: the
// checker must be at least as strict as the decoder.
func requireCheckerFirst(t *testing.T, err error) {
	e, ok := err.(*Error)
	require.True(t, ok, "%T: %v", err, err)
	require.False(t, strings.HasPrefix(e.Msg, "decoding:"), "the checker let through what the decoder refused: %v", err)
}

func FuzzDecodeResponse(f *testing.F) {
	seedFiles(f, "response")
	req := validationRequest(KindTransform)
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := DecodeResponse(data, ResponseLimits{})
		if err != nil {
			requireCheckerFirst(t, err)
			return
		}
		_ = ValidateResponse(resp, req, []string{"out"}) // must not panic
		b1, err := EncodeResponse(resp)
		require.NoError(t, err)
		again, err := DecodeResponse(b1, ResponseLimits{})
		require.NoError(t, err)
		b2, err := EncodeResponse(again)
		require.NoError(t, err)
		require.Equal(t, b1, b2)
	})
}

func FuzzDecodeRequest(f *testing.F) {
	seedFiles(f, "request")
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(data)
		if err != nil {
			requireCheckerFirst(t, err)
			return
		}
		_ = req.Validate()
		b1, err := EncodeRequest(req)
		require.NoError(t, err)
		again, err := DecodeRequest(b1)
		require.NoError(t, err)
		b2, err := EncodeRequest(again)
		require.NoError(t, err)
		require.Equal(t, b1, b2)
	})
}

func FuzzDecodeInit(f *testing.F) {
	seedFiles(f, "init")
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := DecodeInit(data)
		if err != nil {
			requireCheckerFirst(t, err)
			return
		}
		_ = in.Validate()
		b1, err := EncodeInit(in)
		require.NoError(t, err)
		again, err := DecodeInit(b1)
		require.NoError(t, err)
		b2, err := EncodeInit(again)
		require.NoError(t, err)
		require.Equal(t, b1, b2)
	})
}

func FuzzDecodeInitResult(f *testing.F) {
	seedFiles(f, "init_result")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeInitResult(data)
		if err != nil {
			requireCheckerFirst(t, err)
			return
		}
		b, err := EncodeInitResult(r)
		require.NoError(t, err)
		again, err := DecodeInitResult(b)
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}

// Generators of envelope values in the form the decoder produces: optional
// slices nil when empty, required ones non-nil.

func genBytes(t *rapid.T, label string, optional bool) []byte {
	b := rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, label)
	if len(b) == 0 && optional {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

func genText(t *rapid.T, label string) string {
	return rapid.StringN(0, 12, -1).Draw(t, label)
}

func genOptionalInt(t *rapid.T, label string) *int64 {
	if rapid.Bool().Draw(t, label+"?") {
		return Int64(rapid.Int64().Draw(t, label))
	}
	return nil
}

func nonEmptyOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func genResponse(t *rapid.T) *Response {
	resp := &Response{Keys: []ResponseKey{}}
	if rapid.Bool().Draw(t, "failed") {
		resp.Error = "e" + genText(t, "error")
		return resp
	}
	for range rapid.IntRange(0, 4).Draw(t, "keys") {
		k := ResponseKey{Key: genText(t, "key")}
		for range rapid.IntRange(0, 3).Draw(t, "emits") {
			k.Emits = append(k.Emits, Emit{
				Stream:         genText(t, "stream"),
				Payload:        genBytes(t, "payload", false),
				Key:            genText(t, "emit key"),
				EventTimestamp: genOptionalInt(t, "event_ts"),
				Parents:        nonEmptyOrNil(rapid.SliceOfN(rapid.Uint32(), 0, 3).Draw(t, "parents")),
			})
		}
		for range rapid.IntRange(0, 2).Draw(t, "timers") {
			k.TimersSet = append(k.TimersSet, Timer{
				TriggerTimestamp: rapid.Int64().Draw(t, "trigger"),
				EventTimestamp:   genOptionalInt(t, "timer event_ts"),
				Payload:          genBytes(t, "timer payload", true),
			})
		}
		k.TimersCancel = nonEmptyOrNil(rapid.SliceOfN(rapid.Int64(), 0, 2).Draw(t, "cancel"))
		k.StateOp = StateOp(rapid.IntRange(0, 2).Draw(t, "op"))
		if k.StateOp == StateReplace {
			k.State = genBytes(t, "state", false)
		}
		resp.Keys = append(resp.Keys, k)
	}
	return resp
}

func genRequest(t *rapid.T) *Request {
	req := &Request{
		ABI: Version, Computation: genText(t, "computation"), Kind: KindTransform,
		Partition: rapid.Uint64().Draw(t, "partition"), Epoch: rapid.Uint64().Draw(t, "epoch"),
		Watermarks: Watermarks{Event: rapid.Int64().Draw(t, "wm event"), System: rapid.Int64().Draw(t, "wm system")},
		Keys:       []RequestKey{},
	}
	for range rapid.IntRange(0, 3).Draw(t, "keys") {
		k := RequestKey{Key: genText(t, "key")}
		if rapid.Bool().Draw(t, "has state") {
			k.State = genBytes(t, "state", false)
		}
		for range rapid.IntRange(0, 2).Draw(t, "timers") {
			k.Timers = append(k.Timers, DueTimer{ID: genText(t, "timer id"), TriggerTimestamp: rapid.Int64().Draw(t, "trigger"),
				EventTimestamp: rapid.Int64().Draw(t, "timer event"), Payload: genBytes(t, "timer payload", true)})
		}
		for range rapid.IntRange(0, 3).Draw(t, "messages") {
			k.Messages = append(k.Messages, Message{ID: genText(t, "id"), Stream: genText(t, "stream"),
				EventTimestamp: rapid.Int64().Draw(t, "event"), SystemTimestamp: rapid.Int64().Draw(t, "system"),
				AlignmentTimestamp: rapid.Int64().Draw(t, "alignment"), Payload: genBytes(t, "payload", false)})
		}
		req.Keys = append(req.Keys, k)
	}
	return req
}

// TestRoundTripProperty: every envelope value decodes back to itself, and
// every proper prefix of its encoding is rejected with an *Error.
func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		resp := genResponse(t)
		b, err := EncodeResponse(resp)
		require.NoError(t, err)
		got, err := DecodeResponse(b, ResponseLimits{})
		require.NoError(t, err)
		require.Equal(t, resp, got)
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		_, err = DecodeResponse(b[:cut], ResponseLimits{})
		require.IsType(t, &Error{}, err)

		req := genRequest(t)
		b, err = EncodeRequest(req)
		require.NoError(t, err)
		gotReq, err := DecodeRequest(b)
		require.NoError(t, err)
		require.Equal(t, req, gotReq)
		cut = rapid.IntRange(0, len(b)-1).Draw(t, "request cut")
		_, err = DecodeRequest(b[:cut])
		require.IsType(t, &Error{}, err)
	})
}
