// Command goguest is the Go SDK's conformance guest: a computation that
// interprets each input message as the script of sdk/conformance/SCRIPT.md,
// so that the conformance suite can drive every corner of ABI v1 through
// it and compare its responses with those of the other languages' guests.
// It is the reference: where SCRIPT.md leaves a choice open, what this
// guest does is the expected behaviour.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o goguest.wasm ./sdk/conformance/goguest
//
// Outside WebAssembly it compiles too, so its script runs under go test
// through flowhost.Run.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// out is the stream every echo, timer, showstate, param and meta goes to.
const out = "out"

// params are the instance's parameters, kept from Init for `param:`.
var params flowhost.Params

func init() {
	flowhost.Register(computation)
}

// computation is the script interpreter; a variable so tests can Run it.
var computation = flowhost.Computation{Init: start, Process: process}

func main() {}

// start keeps the parameters and refuses to start when fail_init is a text
// parameter. A fail_init of another type is ignored: SCRIPT.md names only
// a text string.
func start(p flowhost.Params) error {
	params = p
	if v, ok := p.Value("fail_init"); ok {
		if s, ok := v.(string); ok {
			return errors.New(s)
		}
	}
	return nil
}

// process runs every key's due timers, then its messages, in order. A
// failbatch command ends the batch at once: nothing it did is reported.
func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		for t := range k.Timers() {
			k.Emit(out, fmt.Appendf(nil, "timer:%d:%s", t.TriggerTimestamp, t.Payload), flowhost.WithParents(t.Input))
		}
		for m := range k.Messages() {
			script, ok := bytes.CutPrefix(m.Payload, []byte("!"))
			if !ok {
				k.Emit(out, m.Payload, flowhost.WithParents(m.Input))
				continue
			}
			for _, cmd := range strings.Split(string(script), ";") {
				if err := run(b, k, &m, cmd); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// arity is the number of arguments of each verb; the last one takes the
// rest of the command, colons included.
var arity = map[string]int{
	"emit": 2, "emitk": 3, "emite": 3, "emitall": 2, "emitnone": 2,
	"state": 1, "append": 0, "delstate": 0, "showstate": 0,
	"timer": 1, "timerp": 3, "cancel": 1,
	"param": 1, "meta": 0, "failkey": 1, "failbatch": 1,
}

// run executes one command of message m on key k. It returns an error only
// for failbatch; every other failure fails the key and lets the script go
// on (the key's first failure is the one reported, as Key.Fail keeps it).
func run(b *flowhost.Batch, k *flowhost.Key, m *flowhost.Message, cmd string) error {
	verb, rest, hasArgs := strings.Cut(cmd, ":")
	n, known := arity[verb]
	if !known {
		k.Fail(errors.New("unknown command " + verb))
		return nil
	}
	var args []string
	if n > 0 {
		if !hasArgs {
			k.Fail(fmt.Errorf("bad command %q: %s takes %d arguments", cmd, verb, n))
			return nil
		}
		if args = strings.SplitN(rest, ":", n); len(args) != n {
			k.Fail(fmt.Errorf("bad command %q: %s takes %d arguments", cmd, verb, n))
			return nil
		}
	}
	// Numeric arguments are parsed up front so that a bad one fails the
	// key before the command has any effect.
	number := func(s string) (int64, bool) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			k.Fail(fmt.Errorf("bad command %q: %w", cmd, err))
		}
		return v, err == nil
	}
	own := flowhost.WithParents(m.Input)
	switch verb {
	case "emit":
		k.Emit(args[0], []byte(args[1]), own)
	case "emitk":
		k.Emit(args[0], []byte(args[2]), own, flowhost.WithKey(args[1]))
	case "emite":
		if e, ok := number(args[1]); ok {
			k.Emit(args[0], []byte(args[2]), own, flowhost.WithEventTimestamp(e))
		}
	case "emitall":
		every := make([]int, k.Inputs())
		for i := range every {
			every[i] = i
		}
		k.Emit(args[0], []byte(args[1]), flowhost.WithParents(every...))
	case "emitnone":
		k.Emit(args[0], []byte(args[1]), flowhost.WithAllParents())
	case "state":
		k.SetState([]byte(args[0]))
	case "append":
		old, _ := k.State()
		k.SetState(append(append(bytes.Clone(old), m.ID...), ','))
	case "delstate":
		k.DeleteState()
	case "showstate":
		text := "state:none"
		if s, ok := k.State(); ok {
			text = "state:" + string(s)
		}
		k.Emit(out, []byte(text), own)
	case "timer":
		if tr, ok := number(args[0]); ok {
			k.SetTimer(tr)
		}
	case "timerp":
		tr, ok := number(args[0])
		if !ok {
			break
		}
		if e, ok := number(args[1]); ok {
			k.SetTimer(tr, flowhost.WithTimerEventTimestamp(e), flowhost.WithTimerPayload([]byte(args[2])))
		}
	case "cancel":
		if tr, ok := number(args[0]); ok {
			k.CancelTimer(tr)
		}
	case "param":
		k.Emit(out, []byte("param:"+args[0]+"="+paramText(args[0])), own)
	case "meta":
		wm := b.Watermarks()
		k.Emit(out, fmt.Appendf(nil, "meta:key=%s,stream=%s,id=%s,event=%d,system=%d,alignment=%d,wm=%d/%d,partition=%d,epoch=%d,computation=%s,kind=%s",
			k.Key(), m.Stream, m.ID, m.EventTimestamp, m.SystemTimestamp, m.AlignmentTimestamp,
			wm.Event, wm.System, b.Partition(), b.Epoch(), b.Computation(), b.Kind()), own)
	case "failkey":
		k.Fail(errors.New(args[0]))
	case "failbatch":
		return errors.New(args[0])
	}
	return nil
}

// paramText renders a parameter the way `param:` reports it.
func paramText(name string) string {
	v, ok := params.Value(name)
	if !ok {
		return "missing"
	}
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	return "?"
}
