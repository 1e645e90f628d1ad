package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// Two runs one after the other on one memory storage: the second finds the
// keyed state the first committed, as a restart on a data directory would
// (which keeps the rest too: queues, positions, watermarks).
func ExampleNewMemoryStorage() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	pipe, err := spec.Parse(filepath.Join(dir, "pipeline.yaml"), []byte(`
name: counts
sources:
  - {name: in, type: generator, stream: clicks, generator: {count: 1}}
computations:
  - {name: count, plugin: count, kind: transform, group_by: [user], input_streams: [clicks], output_streams: [counts],
     batch: {max_duration: 1h}} # one batch a run: it is cut when the input ends
sinks:
  - {name: out, type: stdout, streams: [counts]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// count keeps each user's number of clicks in its state.
	count := compute.Func(func(_ context.Context, req *abi.Request) (*abi.Response, error) {
		resp := &abi.Response{}
		for _, k := range req.Keys {
			n, _ := strconv.Atoi(string(k.State))
			n += len(k.Messages)
			payload := fmt.Appendf(nil, `{"key":%s,"clicks":%d}`, k.Key, n)
			resp.Keys = append(resp.Keys, abi.ResponseKey{Key: k.Key, StateOp: abi.StateReplace, State: []byte(strconv.Itoa(n)),
				Emits: []abi.Emit{{Stream: "counts", Payload: payload, Parents: []uint32{uint32(len(k.Timers) + len(k.Messages) - 1)}}}})
		}
		return resp, nil
	})
	storage := runtime.NewMemoryStorage()
	for run, users := range [][]string{{"ann", "bob", "ann"}, {"ann"}} {
		var clicks sliceSource
		for i, u := range users {
			clicks = append(clicks, connect.Record{Write: int64(i), HasWrite: true, Payload: fmt.Appendf(nil, `{"user":%q}`, u)})
		}
		out := &captureSink{}
		rt, err := runtime.New(pipe, map[string]compute.Factory{"count": compute.Native(count)},
			runtime.WithStorage(storage), runtime.WithSource("in", clicks), runtime.WithSink("out", out),
			runtime.WithDeadLetter(&bytes.Buffer{}))
		if err == nil {
			err = rt.Run(context.Background())
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, r := range out.records {
			fmt.Printf("run %d: %s\n", run+1, r.Payload)
		}
	}
	// Output:
	// run 1: {"key":["ann"],"clicks":2}
	// run 1: {"key":["bob"],"clicks":1}
	// run 2: {"key":["ann"],"clicks":3}
}
