package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowhost/flowhost/host/engine"
)

func ExampleNewWazero() {
	ctx := context.Background()
	e, err := engine.NewWazero(ctx, engine.NewConfig().
		WithCompilationCacheDir(cacheDir()). // a restart loads native code instead of compiling
		WithMemoryLimitPages(1024).          // 64 MiB per instance
		WithMaxResponseBytes(1<<20))
	if err != nil {
		panic(err)
	}
	defer e.Close(ctx)

	// guests["echo"] is testdata/guests/echo built with
	// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
	m, err := e.Compile(ctx, "echo", guests["echo"])
	if err != nil {
		panic(err)
	}
	inst, err := m.Instantiate(ctx, engine.NewInstanceConfig())
	if err != nil {
		panic(err)
	}
	defer inst.Close(ctx)

	// The deadline is the CPU limit of the batch.
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := inst.Process(callCtx, []byte("olleh"))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(resp))
	// Output: echo:hello
}

func ExampleGuestError() {
	ctx := context.Background()
	e, _ := engine.NewWazero(ctx, testConfig())
	defer e.Close(ctx)
	m, _ := e.Compile(ctx, "badstatus", guests["badstatus"])
	inst, _ := m.Instantiate(ctx, engine.NewInstanceConfig())
	defer inst.Close(ctx)

	_, err := inst.Process(ctx, []byte("request"))
	var ge *engine.GuestError
	if errors.As(err, &ge) {
		fmt.Println(ge.Plugin, ge.Op, ge.Status, errors.Is(err, engine.ErrStatus))
	}
	fmt.Println(err)
	// Output:
	// badstatus process -2 true
	// plugin "badstatus": process: guest returned a failure status -2
}

func ExampleCheckABI() {
	info := &engine.ModuleInfo{
		Exports: []engine.Export{
			{Name: "flowhost_abi_v1", Kind: engine.KindFunc},
			{Name: "flowhost_alloc", Kind: engine.KindFunc, Func: engine.Func([]engine.ValueType{engine.I32}, engine.I32)},
			{Name: "memory", Kind: engine.KindMemory},
		},
		Imports: []engine.Import{{
			Module: "wasi_snapshot_preview1", Name: "sock_accept", Kind: engine.KindFunc,
			Func: engine.Func([]engine.ValueType{engine.I32, engine.I32, engine.I32}, engine.I32),
		}},
	}
	fmt.Println(engine.CheckABI("demo", info, engine.Capabilities{}))
	// Output: plugin "demo": missing export flowhost_process (func (i32, i32) -> i64); import wasi_snapshot_preview1.sock_accept is not allowed: sockets are never granted
}

func ExampleInspect() {
	info, err := engine.Inspect(minimalGuest())
	if err != nil {
		panic(err)
	}
	for _, imp := range info.Imports {
		fmt.Println("import", imp, imp.Func)
	}
	for _, exp := range info.Exports {
		fmt.Println("export", exp.Kind, exp.Name, exp.Func)
	}
	// Output:
	// import flowhost.log (i32, i32, i32) -> ()
	// export func flowhost_abi_v1 () -> ()
	// export func flowhost_alloc i32 -> i32
	// export func flowhost_process (i32, i32) -> i64
	// export memory memory () -> ()
}

func ExampleCapabilities() {
	caps := engine.Capabilities{}.WithClock().WithReadOnlyDir("/srv/reference-data", "/data")
	fmt.Println(caps.Clock(), caps.ReadOnlyDirs())
	fmt.Println(engine.Capabilities{}.Clock(), engine.Capabilities{}.ReadOnlyDirs())
	// Output:
	// true [{/srv/reference-data /data}]
	// false []
}
