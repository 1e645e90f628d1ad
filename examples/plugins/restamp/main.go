// Command restamp is an example flowhost computation of kind transform
// that gives each message a new EventTimestamp read from its payload: the
// parameter field (default "happened_at") names a top-level field holding
// an RFC 3339 time. The payload goes on unchanged to the one output
// stream.
//
// The input watermark says nothing about the new event times, so a
// pipeline that uses restamp gives the computation a watermark_strategy
// (host/spec/README.md): the host then holds the output watermark at the
// newest event time emitted minus the strategy's out_of_orderness_bound,
// and downstream timers wait for the restamped records. A message without
// the field, or with a value that is not an RFC 3339 time, fails its key
// with an error naming the message.
package main

import (
	"encoding/json"
	"fmt"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var config struct {
	field  string
	output string
}

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func initialize(p flowhost.Params) error {
	config.field = "happened_at"
	if p.Has("field") {
		f, err := p.String("field")
		if err != nil {
			return err
		}
		if f == "" {
			return fmt.Errorf("parameter \"field\": must not be empty")
		}
		config.field = f
	}
	outs := p.OutputStreams()
	if len(outs) != 1 {
		return fmt.Errorf("restamp writes exactly one output stream; the pipeline declares %d", len(outs))
	}
	config.output = outs[0]
	return nil
}

// eventTime reads the configured field of a payload.
func eventTime(payload []byte) (int64, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return 0, fmt.Errorf("payload is not a JSON object: %w", err)
	}
	raw, ok := fields[config.field]
	if !ok {
		return 0, fmt.Errorf("payload has no field %q", config.field)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return 0, fmt.Errorf("field %q is not a string: %s", config.field, raw)
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, fmt.Errorf("field %q: %w", config.field, err)
	}
	if ns := t.UnixNano(); time.Unix(0, ns).Equal(t) {
		return ns, nil
	}
	return 0, fmt.Errorf("field %q: %s is outside the nanosecond timestamps (years 1678 to 2262)", config.field, text)
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		for m := range k.Messages() {
			ts, err := eventTime(m.Payload)
			if err != nil {
				k.Fail(fmt.Errorf("message %s: %w", m.ID, err))
				break
			}
			k.Emit(config.output, m.Payload, flowhost.WithEventTimestamp(ts))
		}
	}
	return nil
}

func main() {}
