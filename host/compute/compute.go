// Package compute is the one interface every computation implements, WASM
// or native Go: a batch in, effects out, in the types of package abi. The
// runtime cannot tell the two apart, which is what makes a native Go
// computation a fair baseline for the WASM path and lets flowhost be
// embedded as a library with computations written in Go.
package compute

import (
	"context"

	"github.com/flowhost/flowhost/abi"
)

// Computation processes the batches of one computation partition. The
// runtime calls it from one goroutine at a time, one batch after another.
type Computation interface {
	// Process handles one batch. An error means the whole batch failed
	// (the instance trapped, hung or answered garbage); the runtime then
	// treats every input of the batch by its failure policy and creates
	// a new instance before the next batch. A Response with Error or a
	// key's Error is a failure the guest reported itself.
	Process(ctx context.Context, req *abi.Request) (*abi.Response, error)
	// Close releases the instance.
	Close(ctx context.Context) error
}

// Factory creates the instance of one computation partition.
type Factory interface {
	// Instantiate creates an instance and initialises it with init. An
	// error (including an InitResult error from a guest) stops the run.
	Instantiate(ctx context.Context, init *abi.Init) (Computation, error)
}

// FactoryFunc adapts a function to [Factory].
type FactoryFunc func(ctx context.Context, init *abi.Init) (Computation, error)

// Instantiate calls f.
func (f FactoryFunc) Instantiate(ctx context.Context, init *abi.Init) (Computation, error) {
	return f(ctx, init)
}

// Func adapts a stateless function to a [Computation] that needs no
// instance and no cleanup: the shape of most native computations.
type Func func(ctx context.Context, req *abi.Request) (*abi.Response, error)

// Process calls f.
func (f Func) Process(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	return f(ctx, req)
}

// Close does nothing.
func (Func) Close(context.Context) error { return nil }

// Native returns a Factory whose every partition shares fn, for native Go
// computations without per-partition setup.
func Native(fn Func) Factory {
	return FactoryFunc(func(context.Context, *abi.Init) (Computation, error) { return fn, nil })
}

// Refused is the Factory of a computation whose plugin was refused at
// load (it failed its checks, or its tenant's policy forbids what it asks
// for) in a pipeline that runs on without it: the runtime does not call
// Instantiate; the computation's partitions start quarantined, every
// input goes to its dead-letter route with Err, and a reload of a good
// version lifts the quarantine.
type Refused struct {
	// Err says which plugin was refused and why.
	Err error
}

// Instantiate returns r.Err.
func (r *Refused) Instantiate(context.Context, *abi.Init) (Computation, error) { return nil, r.Err }
