package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var (
	fuzzInit = &abi.Init{ABI: abi.Version, Computation: "fuzz", Kind: abi.KindTransform, OutputStreams: []string{"out", "side"},
		Parameters: map[string]any{"s": "text", "n": int64(-1), "b": true, "f": 0.5}}
	// declared and undeclared are emit commands whose stream the Init
	// declares or not.
	declared = []string{"emit:out:", "emitk:side:", "emite:out:", "emitall:side:", "emitnone:out:"}
)

// FuzzScript runs arbitrary scripts, natively through flowhost.Run, and
// requires a response the host accepts, or, only for an emit to a stream
// the Init does not declare, the guest failure the SDK reports for it.
func FuzzScript(f *testing.F) {
	for _, seed := range []string{
		"plain", "!", "!;", "!emit:out:x", "!emitk:side:k:v:w", "!emite:out:-5:t", "!emite:out:x:t",
		"!emitall:side:a;emitnone:out:b", "!state:s;append;delstate;showstate", "!timer:5;cancel:5;timerp:6:7:p",
		"!timer:99999999999999999999", "!param:s;param:n;param:b;param:f;param:none", "!meta",
		"!failkey:k;emit:out:after", "!failbatch:b", "!unknown:1", "!emit", "!emit:out", "!state",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		req := &abi.Request{ABI: abi.Version, Computation: "fuzz", Kind: abi.KindTransform, Epoch: 1,
			Keys: []abi.RequestKey{{
				Key:      "k",
				Timers:   []abi.DueTimer{{ID: "t", TriggerTimestamp: 1, EventTimestamp: 1}},
				Messages: []abi.Message{{ID: "m", Stream: "in", Payload: script}},
			}}}
		resp, err := flowhost.Run(computation, fuzzInit, req)
		switch {
		case err == nil:
			require.NoError(t, abi.ValidateResponse(resp, req, fuzzInit.OutputStreams))
		case errors.Is(err, abi.StatusGuestFailure):
			require.False(t, emitsOnlyToDeclared(script), "only an emit to an undeclared stream fails the guest: %v", err)
		default:
			// sdk/go turns bytes that are not UTF-8 into U+FFFD wherever
			// the envelope carries text, so no script makes a response
			// the host refuses.
			t.Fatalf("script %q gave an undecodable response: %v", script, err)
		}
	})
}

// emitsOnlyToDeclared reports whether every command of the script that
// starts with "emit" names a declared stream. It over-approximates emits
// by prefix, which is enough to recognise the scripts that must not fail.
func emitsOnlyToDeclared(script []byte) bool {
	rest, ok := strings.CutPrefix(string(script), "!")
	if !ok {
		return true
	}
	for _, cmd := range strings.Split(rest, ";") {
		if strings.HasPrefix(cmd, "emit") && !slices.ContainsFunc(declared, func(d string) bool { return strings.HasPrefix(cmd, d) }) {
			return false
		}
	}
	return true
}
