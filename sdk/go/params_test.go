package flowhost

import (
	"errors"
	"testing"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/stretchr/testify/require"
)

// params builds Params the way the guest does: through an encoded init
// envelope, so that values have their decoded types.
func params(t *testing.T, values map[string]any) Params {
	t.Helper()
	b, err := abi.EncodeInit(&abi.Init{ABI: abi.Version, Computation: "c", Kind: abi.KindMap, Partition: 3,
		Parameters: values, OutputStreams: []string{"x", "y"}})
	require.NoError(t, err)
	in, err := abi.DecodeInit(b)
	require.NoError(t, err)
	return newParams(in)
}

func TestParamsGetters(t *testing.T) {
	p := params(t, map[string]any{
		"s": "text", "i": 42, "neg": -7, "f": 2.5, "whole": 3.0, "b": true, "d": "1m30s", "dn": 1500,
		"bad d": "soon", "list": []string{"a", "b"}, "mixed": []any{"a", 1}, "m": map[string]any{"k": "v"}, "null": nil,
	})
	tests := []struct {
		name string
		get  func() (any, error)
		want any
		err  string
	}{
		{"string", func() (any, error) { return p.String("s") }, "text", ""},
		{"string wrong type", func() (any, error) { return p.String("i") }, "", `parameter "i": expected string, got integer`},
		{"missing", func() (any, error) { return p.String("nope") }, "", `parameter "nope" is missing`},
		{"int", func() (any, error) { return p.Int("i") }, int64(42), ""},
		{"negative int", func() (any, error) { return p.Int("neg") }, int64(-7), ""},
		{"integral float as int", func() (any, error) { return p.Int("whole") }, int64(3), ""},
		{"fraction as int", func() (any, error) { return p.Int("f") }, int64(0), `parameter "f": expected integer, got float`},
		{"float", func() (any, error) { return p.Float("f") }, 2.5, ""},
		{"int as float", func() (any, error) { return p.Float("i") }, 42.0, ""},
		{"null as float", func() (any, error) { return p.Float("null") }, 0.0, `parameter "null": expected number, got null`},
		{"bool", func() (any, error) { return p.Bool("b") }, true, ""},
		{"bool wrong type", func() (any, error) { return p.Bool("s") }, false, `parameter "s": expected bool, got string`},
		{"duration text", func() (any, error) { return p.Duration("d") }, 90 * time.Second, ""},
		{"duration nanoseconds", func() (any, error) { return p.Duration("dn") }, 1500 * time.Nanosecond, ""},
		{"duration unparsable", func() (any, error) { return p.Duration("bad d") }, time.Duration(0), `parameter "bad d": time: invalid duration "soon"`},
		{"duration wrong type", func() (any, error) { return p.Duration("b") }, time.Duration(0), `parameter "b": expected duration, got bool`},
		{"strings", func() (any, error) { return p.Strings("list") }, []string{"a", "b"}, ""},
		{"strings mixed", func() (any, error) { return p.Strings("mixed") }, []string(nil), `parameter "mixed": element 1: expected string, got integer`},
		{"strings wrong type", func() (any, error) { return p.Strings("m") }, []string(nil), `parameter "m": expected list of strings, got map`},
		{"map", func() (any, error) { return p.Map("m") }, map[string]any{"k": "v"}, ""},
		{"map wrong type", func() (any, error) { return p.Map("list") }, map[string]any(nil), `parameter "list": expected map, got list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			require.Equal(t, tt.want, got)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.err)
			var pe *ParamError
			require.True(t, errors.As(err, &pe))
		})
	}
}

func TestParamsInstance(t *testing.T) {
	p := params(t, map[string]any{"b": 1, "a": nil})
	require.Equal(t, "c", p.Computation())
	require.Equal(t, "map", p.Kind())
	require.Equal(t, uint64(3), p.Partition())
	streams := p.OutputStreams()
	require.Equal(t, []string{"x", "y"}, streams)
	streams[0] = "changed"
	require.Equal(t, []string{"x", "y"}, p.OutputStreams(), "OutputStreams returns a copy")
	require.Equal(t, []string{"a", "b"}, p.Names())
	require.True(t, p.Has("a"), "a null parameter is set")
	require.False(t, p.Has("z"))
	v, ok := p.Value("a")
	require.True(t, ok)
	require.Nil(t, v)

	var zero Params
	require.Empty(t, zero.Names())
	_, err := zero.String("x")
	require.EqualError(t, err, `parameter "x" is missing`)
}
