package flowhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/abi/abitest"
	"github.com/stretchr/testify/require"
)

// vectorDir holds the golden vectors every SDK is tested against.
var vectorDir = abitest.Dir()

// counter keeps a decimal count of messages in the key's state: "clear"
// empties the state, "reset" emits the final count and deletes it, "peek"
// changes nothing.
func counter(b *Batch) error {
	for k := range b.Keys() {
		s, _ := k.State()
		n, _ := strconv.Atoi(string(s))
		for m := range k.Messages() {
			switch string(m.Payload) {
			case "clear":
				k.SetState([]byte{})
			case "reset":
				k.Emit("final", []byte(strconv.Itoa(n)))
				k.DeleteState()
			case "peek":
			default:
				n++
				k.SetState([]byte(strconv.Itoa(n)))
			}
		}
	}
	return nil
}

// scripts are computations written against this SDK that must answer each
// golden request with exactly the golden response.
var scripts = map[string]Computation{
	"empty_batch": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			k.Emit("out", nil)
		}
		return nil
	}},
	"one_key_one_message": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				k.Emit("out", bytes.ToUpper(m.Payload))
			}
		}
		return nil
	}},
	"many_keys": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			n := 0
			for range k.Messages() {
				n++
			}
			if n > 1 {
				k.Emit("counts", []byte(strconv.Itoa(n)))
			}
		}
		return nil
	}},
	"unicode": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				k.Emit("echo", m.Payload, WithKey(k.Key()))
			}
		}
		return nil
	}},
	"state_create":  {Process: counter},
	"state_replace": {Process: counter},
	"state_delete":  {Process: counter},
	"timers": {Process: func(b *Batch) error {
		now := b.Watermarks().Event
		for k := range b.Keys() {
			for t := range k.Timers() {
				k.Emit("fired", append([]byte("timer:"), t.Payload...))
			}
			for m := range k.Messages() {
				k.Emit("fired", append([]byte("message:"), m.Payload...))
			}
			k.SetTimer(now + 30*int64(time.Second))
			k.SetTimer(now + 60*int64(time.Second))
			k.SetTimer(now+120*int64(time.Second), WithTimerEventTimestamp(now+100*int64(time.Second)), WithTimerPayload([]byte("late")))
			k.CancelTimer(now + 30*int64(time.Second)) // also drops the first SetTimer
		}
		return nil
	}},
	"explicit_parents": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			var orders, payments []int
			var orderPayloads []string
			var payment []byte
			var last int64
			for m := range k.Messages() {
				switch m.Stream {
				case "orders":
					orders = append(orders, m.Input)
					orderPayloads = append(orderPayloads, string(m.Payload))
				case "payments":
					payments = append(payments, m.Input)
					payment = m.Payload
				}
				last = m.AlignmentTimestamp
			}
			k.Emit("joined", []byte(strings.Join(orderPayloads, "+")), WithParents(orders...))
			k.Emit("joined", payment, WithKey("customer-1"), WithEventTimestamp(-1000), WithParents(payments...))
			k.Emit("audit", []byte(strconv.Itoa(k.Inputs())+" inputs"), WithEventTimestamp(last+int64(time.Second)))
		}
		return nil
	}},
	"map_kind": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				k.Emit("lengths", []byte(strconv.Itoa(len(m.Payload))))
			}
		}
		return nil
	}},
	"key_error": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			for m := range k.Messages() {
				n, err := strconv.Atoi(string(m.Payload))
				if err != nil {
					k.Fail(err)
					continue
				}
				k.Emit("doubled", []byte(strconv.Itoa(2*n)))
			}
		}
		return nil
	}},
	"batch_error": {Process: func(b *Batch) error {
		for k := range b.Keys() {
			k.Emit("out", []byte("dropped with the batch"))
		}
		return errors.New("lookup table not loaded")
	}},
	"init_parameters": {Init: requireParameters, Process: counter},
	"init_error":      {Init: requireParameters, Process: counter},
}

// requireParameters reads every parameter of the init_parameters vector
// and fails on the first missing or mistyped one.
func requireParameters(p Params) error {
	window, err := p.Duration("window")
	if err != nil {
		return err
	}
	threshold, err := p.Int("threshold")
	if err != nil {
		return err
	}
	offset, err := p.Int("offset")
	if err != nil {
		return err
	}
	ratio, err := p.Float("ratio")
	if err != nil {
		return err
	}
	enabled, err := p.Bool("enabled")
	if err != nil {
		return err
	}
	tags, err := p.Strings("tags")
	if err != nil {
		return err
	}
	sink, err := p.Map("sink")
	if err != nil {
		return err
	}
	if fallback, ok := p.Value("fallback"); !ok || fallback != nil {
		return errors.New("fallback: want a null parameter")
	}
	if window != 5*time.Minute || threshold != 10 || offset != -3 || ratio != 0.25 || !enabled ||
		strings.Join(tags, ",") != "a,b" || sink["name"] != "alerts" || sink["retries"] != int64(3) {
		return errors.New("parameters read back wrong")
	}
	return nil
}

type vectorDoc = abitest.Vector

var readVector = abitest.Read

// TestGoldenVectors feeds every golden request and init envelope through
// the SDK's own dispatch with a scripted computation and requires the
// golden response bytes exactly.
func TestGoldenVectors(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no golden vectors in %s", vectorDir)
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var doc vectorDoc
		require.NoError(t, json.Unmarshal(raw, &doc))
		t.Run(doc.Name, func(t *testing.T) {
			script, ok := scripts[doc.Name]
			require.True(t, ok, "no script for golden vector %q: add one to scripts", doc.Name)
			g := &guest{comp: &script}

			if initBytes, ok := readVector(t, doc.Name, "init"); ok {
				out, status := g.init(initBytes)
				require.Zero(t, status)
				want, ok := readVector(t, doc.Name, "init_result")
				if !ok {
					require.Nil(t, out, "Init should succeed with nothing to say")
				} else {
					require.Equal(t, want, out)
				}
			}

			reqBytes, ok := readVector(t, doc.Name, "request")
			if !ok {
				return
			}
			req, err := abi.DecodeRequest(reqBytes)
			require.NoError(t, err)
			// Declare the vector's outputs the way the host would, so that
			// Emit checks its streams as it does in production.
			initBytes, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: req.Computation, Kind: req.Kind, OutputStreams: doc.OutputStreams})
			require.NoError(t, err)
			_, status := g.init(initBytes)
			require.Zero(t, status)

			want, ok := readVector(t, doc.Name, "response")
			require.True(t, ok, "a request vector needs a response")
			out, status := g.process(reqBytes)
			require.Zero(t, status)
			if !bytes.Equal(want, out) {
				got, err := abi.DecodeResponse(out, abi.ResponseLimits{})
				require.NoError(t, err)
				wantResp, err := abi.DecodeResponse(want, abi.ResponseLimits{})
				require.NoError(t, err)
				require.Equal(t, wantResp, got, "response differs from %s.response.cbor", doc.Name)
				require.Fail(t, "same value, different bytes", "%x\nwant %x", out, want)
			}
		})
	}
	for name := range scripts {
		_, err := os.Stat(filepath.Join(vectorDir, name+".json"))
		require.NoError(t, err, "script %q has no golden vector", name)
	}
}
