package assemblyscript_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/sdk/assemblyscript"
)

// The computation of the README's quick start: it upper-cases every
// message, emitted with the message as its parent.
const upper = `import { Batch, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

function process(batch: Batch): void {
  for (let i = 0; i < batch.keys.length; i++) {
    const messages = batch.keys[i].messages();
    for (let j = 0; j < messages.length; j++) {
      messages[j].emit("upper", messages[j].text().toUpperCase());
    }
  }
}

register(process);
`

func ExampleBuild() {
	dir, err := os.MkdirTemp("", "upper-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	entry := filepath.Join(dir, "index.ts")
	if err := os.WriteFile(entry, []byte(upper), 0o644); err != nil {
		panic(err)
	}
	wasm := filepath.Join(dir, "upper.wasm")
	if err := assemblyscript.Build(entry, wasm); err != nil {
		panic(err)
	}

	// Run one batch through the host's engine.
	module, err := os.ReadFile(wasm)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig())
	if err != nil {
		panic(err)
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, "upper", module)
	if err != nil {
		panic(err)
	}
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	if err != nil {
		panic(err)
	}
	req, _ := abi.EncodeRequest(&abi.Request{ABI: abi.Version, Computation: "upper", Kind: abi.KindMap, Keys: []abi.RequestKey{
		{Key: "k", Messages: []abi.Message{{ID: "1-in:0", Stream: "in", Payload: []byte("hello, wasm")}}},
	}})
	out, err := inst.Process(ctx, req)
	if err != nil {
		panic(err)
	}
	resp, err := abi.DecodeResponse(out, abi.ResponseLimits{})
	if err != nil {
		panic(err)
	}
	emit := resp.Keys[0].Emits[0]
	fmt.Printf("%s %q parents %v\n", emit.Stream, emit.Payload, emit.Parents)
	// Output: upper "HELLO, WASM" parents [0]
}
