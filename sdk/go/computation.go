package flowhost

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/flowhost/flowhost/abi"
)

// Computation is what a guest module computes. Register it from an init
// function: a guest is a WebAssembly reactor whose main is never called.
type Computation struct {
	// Init, when not nil, runs once per instance before the first batch
	// with the computation's parameters. An error stops the computation
	// from starting; the host reports it with the plugin's name.
	Init func(p Params) error
	// Process handles one batch. An error fails the whole batch (the host
	// retries it or sends it to the dead-letter stream, by policy) and
	// drops everything the batch did; Key.Fail fails a single key instead.
	// A panic is recovered, logged and reported as a guest failure.
	Process func(b *Batch) error
	// MaxStateBytes, when above 0, is the limit SaveState applies to a
	// key's typed state; set it to the tenant's
	// quotas.max_state_bytes_per_key. When 0, the parameter
	// max_state_bytes_per_key (MaxStateParam) sets it, and without that
	// the ABI's 16 MiB. A limit above 16 MiB is 16 MiB.
	MaxStateBytes int
}

// Register makes c the module's computation. It panics when Process is nil
// or when a computation is already registered: both are mistakes that the
// first test of the module should reveal.
func Register(c Computation) {
	if c.Process == nil {
		panic("flowhost: Register with a nil Process")
	}
	if instance.comp != nil {
		panic("flowhost: Register called twice")
	}
	instance.comp = &c
}

// Params are the computation's parameters from the pipeline spec, and what
// the host says about the instance. Values are int64, float64, string,
// []byte, bool, nil, []any or map[string]any.
type Params struct {
	init abi.Init
}

func newParams(in *abi.Init) Params { return Params{init: *in} }

// Computation returns the computation's name in the pipeline spec.
func (p Params) Computation() string { return p.init.Computation }

// Kind returns the computation's kind: "transform" or "map".
func (p Params) Kind() string { return string(p.init.Kind) }

// Partition returns the computation partition the instance is started for.
func (p Params) Partition() uint64 { return p.init.Partition }

// OutputStreams returns the computation's declared output streams.
func (p Params) OutputStreams() []string { return slices.Clone(p.init.OutputStreams) }

// Names returns the names of all parameters, sorted.
func (p Params) Names() []string {
	names := make([]string, 0, len(p.init.Parameters))
	for name := range p.init.Parameters {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Has reports whether the parameter is set (even to null).
func (p Params) Has(name string) bool {
	_, ok := p.init.Parameters[name]
	return ok
}

// Value returns the parameter's raw value.
func (p Params) Value(name string) (v any, ok bool) {
	v, ok = p.init.Parameters[name]
	return v, ok
}

// ParamError is returned by the typed getters of Params for a parameter
// that is missing or has another type.
type ParamError struct {
	// Name is the parameter's name.
	Name string
	// Msg says what is wrong with it.
	Msg string
}

// Error reads `parameter "name" is missing` or `parameter "name": Msg`.
func (e *ParamError) Error() string {
	if e.Msg == "" {
		return "parameter " + strconv.Quote(e.Name) + " is missing"
	}
	return "parameter " + strconv.Quote(e.Name) + ": " + e.Msg
}

func (p Params) get(name string) (any, error) {
	v, ok := p.init.Parameters[name]
	if !ok {
		return nil, &ParamError{Name: name}
	}
	return v, nil
}

func wrongType(name, want string, v any) error {
	return &ParamError{Name: name, Msg: "expected " + want + ", got " + typeName(v)}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case int64:
		return "integer"
	case float64:
		return "float"
	case string:
		return "string"
	case []byte:
		return "bytes"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

// String returns a text parameter.
func (p Params) String(name string) (string, error) {
	v, err := p.get(name)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", wrongType(name, "string", v)
	}
	return s, nil
}

// Int returns an integer parameter; a float with an integral value counts.
func (p Params) Int(name string) (int64, error) {
	v, err := p.get(name)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), nil
		}
	}
	return 0, wrongType(name, "integer", v)
}

// Float returns a number parameter; an integer counts.
func (p Params) Float(name string) (float64, error) {
	v, err := p.get(name)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	}
	return 0, wrongType(name, "number", v)
}

// Bool returns a boolean parameter.
func (p Params) Bool(name string) (bool, error) {
	v, err := p.get(name)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, wrongType(name, "bool", v)
	}
	return b, nil
}

// Duration returns a duration parameter written as a Go duration string
// ("250ms", "5m") or as an integer number of nanoseconds.
func (p Params) Duration(name string) (time.Duration, error) {
	v, err := p.get(name)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case string:
		d, err := time.ParseDuration(x)
		if err != nil {
			return 0, &ParamError{Name: name, Msg: err.Error()}
		}
		return d, nil
	case int64:
		return time.Duration(x), nil
	}
	return 0, wrongType(name, "duration", v)
}

// Strings returns a parameter that is a list of text.
func (p Params) Strings(name string) ([]string, error) {
	v, err := p.get(name)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, wrongType(name, "list of strings", v)
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, &ParamError{Name: name, Msg: "element " + strconv.Itoa(i) + ": expected string, got " + typeName(e)}
		}
		out[i] = s
	}
	return out, nil
}

// Map returns a parameter that is a map.
func (p Params) Map(name string) (map[string]any, error) {
	v, err := p.get(name)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, wrongType(name, "map", v)
	}
	return m, nil
}
