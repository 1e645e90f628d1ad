// Command enrich is an example flowhost computation of kind map: a
// deterministic, stateless function of each message. It normalises an
// order record:
//
//	{"order_id":"o-1","customer":"ann","amount":12.5,"currency":"eur"}
//
// becomes
//
//	{"amount":12.5,"amount_cents":1250,"currency":"EUR","customer":"ann","order_id":"o-1"}
//
// amount may be a JSON number or a decimal string ("12.50"); amount_cents
// is computed exactly (no float rounding) and an amount with a fraction of
// a cent is refused. currency is upper-cased; a record without one gets
// the parameter default_currency. Every other field is kept as it is.
//
// A record that cannot be normalised (not a JSON object, no amount, a bad
// amount) fails its key: the host sends the key's messages of the batch to
// the dead-letter sink with this computation's error. Failure is per key,
// not per message (the ABI has no per-message rejection), which is why the
// example pipeline groups by order_id: a bad order takes down only itself.
//
// Build it with examples/internal/build, or by hand:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o enrich.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// config is set once per instance by Init.
var config struct {
	defaultCurrency string
	output          string
}

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func initialize(p flowhost.Params) error {
	config.defaultCurrency = "EUR"
	if p.Has("default_currency") {
		c, err := p.String("default_currency")
		if err != nil {
			return err
		}
		config.defaultCurrency = strings.ToUpper(c)
	}
	outs := p.OutputStreams()
	if len(outs) != 1 {
		return fmt.Errorf("enrich writes exactly one output stream; the pipeline declares %d (%s)", len(outs), strings.Join(outs, ", "))
	}
	config.output = outs[0]
	return nil
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		for m := range k.Messages() {
			out, err := normalise(m.Payload, config.defaultCurrency)
			if err != nil {
				k.Fail(fmt.Errorf("message %s: %w", m.ID, err))
				break
			}
			k.Emit(config.output, out)
		}
	}
	return nil
}

// normalise returns the enriched copy of one order record.
func normalise(payload []byte, defaultCurrency string) ([]byte, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(payload, &rec); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object: %w", err)
	}
	raw, ok := rec["amount"]
	if !ok {
		return nil, errors.New(`payload has no "amount" field`)
	}
	cents, err := amountCents(raw)
	if err != nil {
		return nil, fmt.Errorf("amount %s: %w", raw, err)
	}
	rec["amount_cents"] = json.RawMessage(cents)
	currency := defaultCurrency
	if c, ok := rec["currency"]; ok && string(c) != "null" {
		if err := json.Unmarshal(c, &currency); err != nil {
			return nil, fmt.Errorf("currency %s: expected a string", c)
		}
		currency = strings.ToUpper(strings.TrimSpace(currency))
	}
	cur, err := json.Marshal(currency)
	if err != nil {
		return nil, err
	}
	rec["currency"] = cur
	return json.Marshal(rec) // sorted keys: the output is a function of the input alone
}

// Bounds of an amount's text and exponent.
const (
	maxAmountText = 64
	maxExponent   = 30
)

// amountCents converts a JSON number or decimal string to a whole number
// of cents, written as a JSON integer. It is exact: big.Rat reads "0.1" as
// one tenth, where a float64 would not.
func amountCents(raw json.RawMessage) (string, error) {
	text := string(raw)
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", err
		}
		text = strings.TrimSpace(text)
	}
	// big.Rat also reads fractions ("1/3") and hexadecimal; an amount is
	// a plain decimal.
	if text == "" || strings.Trim(text, "0123456789.+-eE") != "" {
		return "", errors.New("not a decimal number")
	}
	// Bound the size of the number: "1e999999" would make big.Rat build a
	// million digits for one record.
	if len(text) > maxAmountText {
		return "", fmt.Errorf("longer than %d characters", maxAmountText)
	}
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(text[i+1:]); err != nil || exp > maxExponent || exp < -maxExponent {
			return "", fmt.Errorf("exponent %q is not an integer in [-%d, %d]", text[i+1:], maxExponent, maxExponent)
		}
	}
	amount, ok := new(big.Rat).SetString(text)
	if !ok {
		return "", errors.New("not a decimal number")
	}
	cents := amount.Mul(amount, big.NewRat(100, 1))
	if !cents.IsInt() {
		return "", errors.New("has a fraction of a cent")
	}
	return cents.Num().String(), nil
}

func main() {}
