package compute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/engine"
)

// WASM is the Factory of a computation served by a compiled WebAssembly
// module: each partition gets its own instance, initialised with the
// computation's parameters through flowhost_init.
type WASM struct {
	// Module is the compiled plugin.
	Module engine.Module
	// Limits bound every response; zero fields take abi's defaults.
	Limits abi.ResponseLimits
	// BatchTimeout bounds one call of flowhost_process (and of
	// flowhost_init); 0 means no bound. When it passes, the engine stops
	// the guest and the batch fails.
	BatchTimeout time.Duration
}

// Instantiate creates and initialises the instance of one partition.
func (w *WASM) Instantiate(ctx context.Context, init *abi.Init) (Computation, error) {
	inst, err := w.Module.Instantiate(ctx, engine.NewInstanceConfig().WithLogAttrs(
		slog.String("computation", init.Computation), slog.Uint64("partition", init.Partition)))
	if err != nil {
		return nil, err
	}
	payload, err := abi.EncodeInit(init)
	if err != nil {
		_ = inst.Close(ctx)
		return nil, err
	}
	cctx, cancel := w.deadline(ctx)
	res, err := inst.Init(cctx, payload)
	cancel()
	if err != nil {
		_ = inst.Close(ctx)
		return nil, err
	}
	if res != nil {
		r, err := abi.DecodeInitResult(res)
		if err != nil {
			_ = inst.Close(ctx)
			return nil, fmt.Errorf("plugin %q: flowhost_init result: %w", w.Module.Name(), err)
		}
		if r.Error != "" {
			_ = inst.Close(ctx)
			return nil, fmt.Errorf("plugin %q refused to start: %s", w.Module.Name(), r.Error)
		}
	}
	return &wasmInstance{w: w, inst: inst}, nil
}

func (w *WASM) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.BatchTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, w.BatchTimeout)
}

type wasmInstance struct {
	w    *WASM
	inst engine.Instance
	buf  bytes.Buffer // the encoded request, reused between batches
}

// ErrDecode wraps a response the host could not decode.
var ErrDecode = errors.New("undecodable response")

func (i *wasmInstance) Process(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	i.buf.Reset()
	if err := abi.EncodeRequestTo(&i.buf, req); err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	cctx, cancel := i.w.deadline(ctx)
	defer cancel()
	out, err := i.inst.Process(cctx, i.buf.Bytes())
	if err != nil {
		if errors.Is(err, engine.ErrDeadline) && i.w.BatchTimeout > 0 {
			// Say which limit it ran past: the operator's --cpu-per-batch,
			// a tenant's quota or the manifest's batch_timeout.
			return nil, fmt.Errorf("%w (the CPU limit per batch is %v)", err, i.w.BatchTimeout)
		}
		return nil, err
	}
	// DecodeResponse copies what it keeps, so the view of guest memory
	// may be reused by the next call.
	resp, err := abi.DecodeResponse(out, i.w.Limits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return resp, nil
}

func (i *wasmInstance) Close(ctx context.Context) error { return i.inst.Close(ctx) }
