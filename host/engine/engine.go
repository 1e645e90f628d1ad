// Package engine runs flowhost guest computations: WebAssembly modules that
// speak ABI v1 (see package abi). It compiles a module once, validates that
// it exports the ABI and imports nothing the host did not grant, and
// creates instances that take an encoded request and answer an encoded
// response. The engine moves opaque bytes; it knows nothing of envelopes.
//
// The interfaces here are engine-neutral so that a second implementation
// (wasmtime) can sit behind them; NewWazero returns the default, pure-Go
// implementation, NewWasmtime the cgo one.
//
// Choosing between them: every plugin of a flowhost run has a CPU limit
// (Config.WithInterruptible), and with limits on wasmtime is measured
// several times faster (BenchmarkEngines here, BenchmarkEnginesThroughRuntime
// in package host): its epoch interruption is a load and a compare, while
// wazero's WithCloseOnContextDone calls back into Go on every loop
// back-edge. wazero stays the default for now because it needs no cgo
// and the suite has not been verified with wasmtime as the default; the
// README's "Sandboxing and tenants" section gives the figures.
//
// Failures of a guest are *GuestError values naming the plugin, the
// operation and the cause (ErrTrap, ErrDeadline, ErrStatus, ...). After a
// trap, an exit or a deadline the instance is dead: the runtime creates a
// new one, and since all state lives in the host nothing is lost.
package engine

import (
	"context"
	"log/slog"
)

// Engine compiles guest modules. All modules and instances of an Engine
// share its Config: its memory limit, response limit, logger and granted
// capabilities. An Engine is safe for concurrent use.
type Engine interface {
	// Compile validates wasm against ABI v1 and the engine's capabilities
	// (see CheckABI) and compiles it to native code. name is the plugin
	// name that every error and log line of the module carries. With a
	// compilation cache configured, compiling the same bytes again, even
	// in a new process, loads the native code instead of recompiling.
	Compile(ctx context.Context, name string, wasm []byte) (Module, error)
	// Close releases the engine, every module and every instance it
	// created. Using any of them afterwards returns an error.
	Close(ctx context.Context) error
}

// Module is a compiled, validated guest. It is safe for concurrent use:
// any number of goroutines may instantiate it at the same time.
type Module interface {
	// Name is the plugin name given to Compile.
	Name() string
	// Info describes the module's imports and exports as Inspect found
	// them. The caller must not modify it.
	Info() *ModuleInfo
	// Instantiate creates a fresh instance with its own memory, runs the
	// guest's WASI reactor initialisation (_initialize) when it has one,
	// and returns it ready for Init and Process.
	Instantiate(ctx context.Context, cfg InstanceConfig) (Instance, error)
	// Close releases the compiled code. Instances already created keep
	// working until they are closed.
	Close(ctx context.Context) error
}

// Instance is one running guest with its own linear memory. An Instance is
// not safe for concurrent use: one goroutine calls it at a time, and a
// second goroutine needs a second instance.
//
// Every call runs under its context: when the context's deadline passes
// or it is cancelled, the guest is stopped, even inside an infinite loop,
// and the call returns a *GuestError with ErrDeadline or ErrCanceled.
//
// After a call fails with ErrTrap, ErrExit, ErrDeadline or ErrCanceled the
// instance is dead: its memory is released and every further call returns
// ErrDead at once. A negative status, an out-of-bounds or oversized
// response leaves the instance usable.
type Instance interface {
	// Init passes payload to the guest's optional flowhost_init. It returns
	// the guest's encoded result, or nil when the guest answered 0 or does
	// not export flowhost_init. The result is a view of guest memory, valid
	// only until the next call on this instance.
	Init(ctx context.Context, payload []byte) (result []byte, err error)
	// Process copies request into memory obtained from flowhost_alloc,
	// calls flowhost_process and returns the guest's encoded response. An
	// empty request is passed as (0, 0) without calling flowhost_alloc.
	// The response is a view of guest memory, not a copy: it is valid only
	// until the next call on this instance, so decode or copy it first.
	// (A view saves a copy per batch; see BenchmarkProcess.)
	Process(ctx context.Context, request []byte) (response []byte, err error)
	// Close releases the instance's memory. It is idempotent.
	Close(ctx context.Context) error
}

// InstanceConfig is what may differ between instances of one module. The
// zero value is ready to use; With methods return modified copies and
// never change the receiver.
type InstanceConfig struct {
	logAttrs []slog.Attr
}

// NewInstanceConfig returns the default instance configuration.
func NewInstanceConfig() InstanceConfig { return InstanceConfig{} }

// WithLogAttrs returns a copy that adds attrs (for example the partition
// an instance serves) to every log line of the instance, after the plugin
// name.
func (c InstanceConfig) WithLogAttrs(attrs ...slog.Attr) InstanceConfig {
	c.logAttrs = append(c.logAttrs[:len(c.logAttrs):len(c.logAttrs)], attrs...)
	return c
}
