package main

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func TestAmountCents(t *testing.T) {
	for _, tc := range []struct {
		amount string
		cents  string
		err    string
	}{
		{`12.5`, "1250", ""},
		{`"12.50"`, "1250", ""},
		{`" 0.10 "`, "10", ""},
		{`0.1`, "10", ""}, // exact: no float64 on the way
		{`1e3`, "100000", ""},
		{`-3.07`, "-307", ""},
		{`12345678901234567890.99`, "1234567890123456789099", ""},
		{`12.345`, "", "fraction of a cent"},
		{`"1/3"`, "", "not a decimal number"},
		{`"0x10"`, "", "not a decimal number"},
		{`""`, "", "not a decimal number"},
		{`true`, "", "not a decimal number"},
		{`"1e"`, "", `exponent ""`},
		{`1e999999999`, "", "exponent"},
		{`1e-31`, "", "exponent"},
		{`"1e+30"`, "1" + strings.Repeat("0", 32), ""},
	} {
		t.Run(tc.amount, func(t *testing.T) {
			cents, err := amountCents(json.RawMessage(tc.amount))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.cents, cents)
		})
	}
}

func TestNormalise(t *testing.T) {
	for _, tc := range []struct{ in, out, err string }{
		{`{"order_id":"o-1","amount":12.5,"currency":"eur","note":{"x":1}}`,
			`{"amount":12.5,"amount_cents":1250,"currency":"EUR","note":{"x":1},"order_id":"o-1"}`, ""},
		{`{"amount":"3"}`, `{"amount":"3","amount_cents":300,"currency":"CHF"}`, ""},
		{`{"amount":"3","currency":null}`, `{"amount":"3","amount_cents":300,"currency":"CHF"}`, ""},
		{`{"amount":"3","currency":" usd "}`, `{"amount":"3","amount_cents":300,"currency":"USD"}`, ""},
		{`{"amount":"3","currency":7}`, "", "currency 7: expected a string"},
		{`{"currency":"eur"}`, "", `no "amount" field`},
		{`[1,2]`, "", "not a JSON object"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			out, err := normalise([]byte(tc.in), "CHF")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tc.out, string(out))
		})
	}
}

// TestBadRecordFailsItsKeyOnly checks that one bad record fails its key
// and leaves the other keys of the batch alone.
func TestBadRecordFailsItsKeyOnly(t *testing.T) {
	c := flowhost.Computation{Init: initialize, Process: process}
	init := &abi.Init{ABI: abi.Version, Computation: "enrich", Kind: abi.KindMap, OutputStreams: []string{"out"}}
	req := &abi.Request{ABI: abi.Version, Computation: "enrich", Kind: abi.KindMap, Keys: []abi.RequestKey{
		{Key: `["o-1"]`, Messages: []abi.Message{{ID: "m1", Stream: "orders", Payload: []byte(`{"amount":"1.005"}`)}}},
		{Key: `["o-2"]`, Messages: []abi.Message{{ID: "m2", Stream: "orders", Payload: []byte(`{"amount":"1"}`)}}},
	}}
	resp, err := flowhost.Run(c, init, req)
	require.NoError(t, err)
	require.Len(t, resp.Keys, 2)
	require.Contains(t, resp.Keys[0].Error, "message m1: amount \"1.005\": has a fraction of a cent")
	require.Len(t, resp.Keys[1].Emits, 1)
	require.JSONEq(t, `{"amount":"1","amount_cents":100,"currency":"EUR"}`, string(resp.Keys[1].Emits[0].Payload))
}

// FuzzAmountCents checks that whatever amountCents accepts is exactly a
// hundred times the amount, and that it never panics.
func FuzzAmountCents(f *testing.F) {
	for _, s := range []string{`12.5`, `"12.50"`, `1e3`, `-0.01`, `"1/3"`, `0.001`, `"x"`, `1e999999999`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, amount string) {
		if len(amount) > 64 { // big.Rat would happily build a 10^(10^9)
			return
		}
		cents, err := amountCents(json.RawMessage(amount))
		if err != nil {
			return
		}
		text := amount
		if len(text) > 0 && text[0] == '"' {
			require.NoError(t, json.Unmarshal([]byte(amount), &text))
		}
		want, ok := new(big.Rat).SetString(strings.TrimSpace(text))
		require.True(t, ok)
		got, ok := new(big.Int).SetString(cents, 10)
		require.True(t, ok, "cents %q is not an integer", cents)
		require.Zero(t, want.Mul(want, big.NewRat(100, 1)).Cmp(new(big.Rat).SetInt(got)))
	})
}
