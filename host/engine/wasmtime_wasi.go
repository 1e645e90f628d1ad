//go:build cgo && !nowasmtime

package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"time"
	"unsafe"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/flowhost/flowhost/abi"
)

// WASI preview1 errno values the host functions below return.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoIO      = 29
	errnoNotsup  = 58
)

// defineImports gives the linker flowhost.log and WASI preview1. The file
// functions are wasmtime's; the ones whose wazero behaviour wasmtime does
// not have are replaced by Go implementations of that behaviour:
//
//   - clock_time_get and clock_res_get: without the clock capability a
//     fake clock, 2022-01-01T00:00:00Z and 0 ns on the first reading and
//     1 ms later on each one after, as wazero's; with it the host's clocks
//     at wazero's resolutions (1 µs wall, 1 ns monotonic).
//   - random_get: wazero's deterministic source, a math/rand generator
//     seeded with 42 per instance, so a guest draws the same bytes.
//   - poll_oneoff: clock subscriptions complete at once, as with wazero's
//     fake sleep, so no guest ever blocks a host thread where an epoch
//     cannot reach it; descriptor subscriptions are answered as wazero
//     answers them.
//   - fd_write: stdout and stderr go to the instance's log lines; any
//     other descriptor is EBADF (the only others are read-only).
func (e *wasmtimeEngine) defineImports() error {
	l := e.linker
	l.AllowShadowing(true)
	if err := l.DefineWasi(); err != nil {
		return fmt.Errorf("engine: WASI preview1: %w", err)
	}
	defs := []struct {
		module, name string
		typ          FuncType
		fn           func(i *wasmtimeInstance, c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap)
	}{
		{abi.ImportModule, abi.ImportLog, logType, (*wasmtimeInstance).hostLog},
		{WASIModule, "clock_res_get", wasiFuncs["clock_res_get"].typ, errnoFunc((*wasmtimeInstance).clockResGet)},
		{WASIModule, "clock_time_get", wasiFuncs["clock_time_get"].typ, errnoFunc((*wasmtimeInstance).clockTimeGet)},
		{WASIModule, "random_get", wasiFuncs["random_get"].typ, errnoFunc((*wasmtimeInstance).randomGet)},
		{WASIModule, "poll_oneoff", wasiFuncs["poll_oneoff"].typ, errnoFunc((*wasmtimeInstance).pollOneoff)},
		{WASIModule, "fd_write", wasiFuncs["fd_write"].typ, errnoFunc((*wasmtimeInstance).fdWrite)},
	}
	for _, d := range defs {
		fn := d.fn
		name := d.module + "." + d.name
		err := l.FuncNew(d.module, d.name, wasmtimeFuncType(d.typ), func(c *wasmtime.Caller, args []wasmtime.Val) (results []wasmtime.Val, trap *wasmtime.Trap) {
			// A panic becomes the guest's trap here: the bindings would
			// keep it and re-raise it in a later, unrelated call.
			defer func() {
				if r := recover(); r != nil {
					results, trap = nil, wasmtime.NewTrap(fmt.Sprintf("%s: host function panicked: %v", name, r))
				}
			}()
			return fn(c.Data().(*wasmtimeInstance), c, args)
		})
		if err != nil {
			return fmt.Errorf("engine: import %s.%s: %w", d.module, d.name, err)
		}
	}
	l.AllowShadowing(false)
	return nil
}

func wasmtimeFuncType(t FuncType) *wasmtime.FuncType {
	conv := func(ts []ValueType) []*wasmtime.ValType {
		out := make([]*wasmtime.ValType, len(ts))
		for i, v := range ts {
			kind := wasmtime.KindI32
			if v == I64 {
				kind = wasmtime.KindI64
			}
			out[i] = wasmtime.NewValType(kind)
		}
		return out
	}
	return wasmtime.NewFuncType(conv(t.Params), conv(t.Results))
}

// errnoFunc adapts a WASI function answering an errno.
func errnoFunc(f func(i *wasmtimeInstance, c *wasmtime.Caller, args []wasmtime.Val) int32) func(*wasmtimeInstance, *wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
	return func(i *wasmtimeInstance, c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
		return []wasmtime.Val{wasmtime.ValI32(f(i, c, args))}, nil
	}
}

// memory is the calling guest's memory. Before instantiation returns (in
// a start function) it is looked up by name.
func (i *wasmtimeInstance) memory(c *wasmtime.Caller) []byte {
	if i.mem != nil {
		cx := wasmtimeCall{context: unsafe.Pointer(c.Context())}
		return cx.memory(i.mem)
	}
	if ext := c.GetExport(abi.ExportMemory); ext != nil {
		if mem := ext.Memory(); mem != nil {
			return mem.UnsafeData(c)
		}
	}
	return nil
}

// region returns n bytes of mem at ptr, or false when they are outside it.
func region(mem []byte, ptr, n uint32) ([]byte, bool) {
	if uint64(ptr)+uint64(n) > uint64(len(mem)) {
		return nil, false
	}
	return mem[ptr : ptr+n : ptr+n], true
}

// hostLog implements flowhost.log(level, ptr, len). A line outside guest
// memory traps the guest, as its own out-of-bounds access would.
func (i *wasmtimeInstance) hostLog(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
	level := slog.Level(args[0].I32())
	ptr, n := uint32(args[1].I32()), uint32(args[2].I32())
	line, ok := region(i.memory(c), ptr, n)
	if !ok {
		return nil, wasmtime.NewTrap(fmt.Sprintf("%s.%s: line of %d bytes at %#x is outside guest memory", abi.ImportModule, abi.ImportLog, n, ptr))
	}
	if ctx := context.Background(); i.logger.Enabled(ctx, level) {
		if len(line) > maxLineBytes {
			line = line[:maxLineBytes]
		}
		i.logger.Log(ctx, level, string(line))
	}
	return []wasmtime.Val{}, nil
}

const (
	ms = int64(time.Millisecond)
	// fakeEpochNanos is the first reading of the fake wall clock, wazero's:
	// midnight UTC 2022-01-01.
	fakeEpochNanos = 1640995200000 * ms
)

// nanoBase makes the granted monotonic clock count from the process start.
var nanoBase = time.Now()

// wasiClocks are the clocks of one instance, with wazero's behaviour.
type wasiClocks struct {
	walltime, nanotime       func() int64
	walltimeRes, nanotimeRes uint64
}

func newWASIClocks(granted bool) wasiClocks {
	c := wasiClocks{walltimeRes: uint64(time.Microsecond), nanotimeRes: 1}
	if granted {
		c.walltime = func() int64 { return time.Now().UnixNano() }
		c.nanotime = func() int64 { return time.Since(nanoBase).Nanoseconds() }
		return c
	}
	wall, mono := fakeEpochNanos-ms, -ms
	c.walltime = func() int64 { wall += ms; return wall }
	c.nanotime = func() int64 { mono += ms; return mono }
	return c
}

// newFakeRandom is wazero's deterministic random source.
func newFakeRandom() *rand.Rand { return rand.New(rand.NewSource(42)) }

func (i *wasmtimeInstance) clockResGet(c *wasmtime.Caller, args []wasmtime.Val) int32 {
	var res uint64
	switch args[0].I32() {
	case 0: // realtime
		res = i.clocks.walltimeRes
	case 1: // monotonic
		res = i.clocks.nanotimeRes
	default:
		return errnoInval
	}
	out, ok := region(i.memory(c), uint32(args[1].I32()), 8)
	if !ok {
		return errnoFault
	}
	binary.LittleEndian.PutUint64(out, res)
	return errnoSuccess
}

func (i *wasmtimeInstance) clockTimeGet(c *wasmtime.Caller, args []wasmtime.Val) int32 {
	var now int64
	switch args[0].I32() {
	case 0:
		now = i.clocks.walltime()
	case 1:
		now = i.clocks.nanotime()
	default:
		return errnoInval
	}
	out, ok := region(i.memory(c), uint32(args[2].I32()), 8)
	if !ok {
		return errnoFault
	}
	binary.LittleEndian.PutUint64(out, uint64(now))
	return errnoSuccess
}

func (i *wasmtimeInstance) randomGet(c *wasmtime.Caller, args []wasmtime.Val) int32 {
	buf, ok := region(i.memory(c), uint32(args[0].I32()), uint32(args[1].I32()))
	if !ok {
		return errnoFault
	}
	if _, err := io.ReadAtLeast(i.random, buf, len(buf)); err != nil {
		return errnoIO
	}
	return errnoSuccess
}

// fdWrite implements fd_write(fd, iovs, iovs_len, result.nwritten) for
// the guest's stdout and stderr.
func (i *wasmtimeInstance) fdWrite(c *wasmtime.Caller, args []wasmtime.Val) int32 {
	var w *lineWriter
	switch args[0].I32() {
	case 1:
		w = i.stdout
	case 2:
		w = i.stderr
	default:
		return errnoBadf
	}
	mem := i.memory(c)
	iovsCount := uint32(args[2].I32())
	iovs, ok := region(mem, uint32(args[1].I32()), iovsCount<<3)
	if !ok {
		return errnoFault
	}
	var written uint32
	for pos := 0; pos < len(iovs); pos += 8 {
		b, ok := region(mem, binary.LittleEndian.Uint32(iovs[pos:]), binary.LittleEndian.Uint32(iovs[pos+4:]))
		if !ok {
			return errnoFault
		}
		n, _ := w.Write(b)
		written += uint32(n)
	}
	out, ok := region(mem, uint32(args[3].I32()), 4)
	if !ok {
		return errnoFault
	}
	binary.LittleEndian.PutUint32(out, written)
	return errnoSuccess
}

// pollOneoff implements poll_oneoff(in, out, nsubscriptions,
// result.nevents) as wazero does with its default fake sleep: relative
// clock subscriptions are acknowledged at once, absolute ones are ENOTSUP;
// fd_write on an open descriptor is ENOTSUP, either kind on a closed one
// EBADF, and fd_read on an open one is ready, its event written after all
// the others (wazero defers those it would block on).
func (i *wasmtimeInstance) pollOneoff(c *wasmtime.Caller, args []wasmtime.Val) int32 {
	inPtr, outPtr := uint32(args[0].I32()), uint32(args[1].I32())
	n, resultPtr := uint32(args[2].I32()), uint32(args[3].I32())
	if n == 0 {
		return errnoInval
	}
	mem := i.memory(c)
	in, ok := region(mem, inPtr, n*48)
	if !ok {
		return errnoFault
	}
	out, ok := region(mem, outPtr, n*32)
	if !ok {
		return errnoFault
	}
	clear(out)
	result, ok := region(mem, resultPtr, 4)
	if !ok {
		return errnoFault
	}
	binary.LittleEndian.PutUint32(result, n)

	type event struct {
		sub   uint32
		errno uint16
	}
	var ready, deferred []event
	var failed int32 = -1
	le := binary.LittleEndian
scan:
	for s := uint32(0); s < n; s++ {
		sub := in[s*48 : s*48+48]
		switch sub[8] {
		case 0: // clock
			switch le.Uint16(sub[16+24:]) {
			case 0: // relative
				ready = append(ready, event{sub: s})
			case 1: // subscription_clock_abstime
				failed = errnoNotsup
				break scan
			default:
				failed = errnoInval
				break scan
			}
		case 1, 2: // fd_read, fd_write
			fd := int32(le.Uint32(sub[16:]))
			switch open := fd >= 0 && i.fdOpen(c, fd, outPtr+s*32); {
			case fd < 0:
				failed = errnoBadf
				break scan
			case !open:
				ready = append(ready, event{sub: s, errno: errnoBadf})
			case sub[8] == 2:
				ready = append(ready, event{sub: s, errno: errnoNotsup})
			default:
				deferred = append(deferred, event{sub: s})
			}
		default:
			failed = errnoInval
			break scan
		}
	}
	clear(out) // fdOpen used it as scratch
	write := func(slot int, e event) {
		sub, evt := in[e.sub*48:e.sub*48+48], out[slot*32:slot*32+32]
		copy(evt, sub[:8]) // userdata
		le.PutUint16(evt[8:], e.errno)
		le.PutUint32(evt[10:], uint32(sub[8]))
	}
	for slot, e := range ready {
		write(slot, e)
	}
	if failed >= 0 {
		return failed
	}
	for slot, e := range deferred {
		write(len(ready)+slot, e)
	}
	return errnoSuccess
}

// fdOpen asks wasmtime's fd_fdstat_get whether fd is open, with 24 bytes
// of guest memory at scratch to write its answer to.
func (i *wasmtimeInstance) fdOpen(c *wasmtime.Caller, fd int32, scratch uint32) bool {
	r, err := i.fdstat.Call(c, fd, int32(scratch))
	if err != nil {
		return false
	}
	return r.(int32) != errnoBadf
}
