//go:build cgo && !nowasmtime

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/flowhost/flowhost/abi"
)

// WasmtimeAvailable reports whether this build has the wasmtime engine:
// it needs cgo and is left out with -tags nowasmtime.
const WasmtimeAvailable = true

// WasmtimeVersion is the version of wasmtime (and of its Go bindings) this
// build links. It keys the compilation cache.
const WasmtimeVersion = "39.0.1"

// NewWasmtime returns an Engine backed by wasmtime (Cranelift), through
// its C API and cgo. It behaves as NewWazero does, with the same Config,
// the same checks and the same errors, and differs in speed:
//
//   - Compile runs CheckABI, so it refuses the same imports; guests get
//     flowhost.log and the same WASI preview1 subset. Clocks, randomness,
//     sleeping, stdout and stderr are the host's own implementation, so a
//     guest sees the same fake clock starting at 2022-01-01 and the same
//     deterministic random bytes as under wazero, and poll_oneoff never
//     blocks; files come from wasmtime's WASI, with granted directories
//     preopened read-only.
//   - A call's context stops the guest through wasmtime's epoch
//     interruption: the engine's epoch advances only when the context of
//     a running call is done, so calls pay a check at loop heads and
//     function entries but nothing ticks while guests run.
//   - The memory limit is a store limiter: growth beyond it fails.
//   - With a compilation cache directory, compiled modules are serialized
//     under DIR/wasmtime-<version>-<arch>-<os>/, keyed by a hash of the
//     wasm bytes and the settings that change the code.
//
// The WebAssembly features are those wazero implements (WebAssembly 2.0):
// threads, tail calls, multiple memories, memory64, GC, function
// references, relaxed SIMD and wide arithmetic are turned off.
//
// What a guest or the host can still tell apart:
//
//   - File errors: wasmtime's WASI answers some refusals with other errno
//     values than wazero (writing under a read-only mount is EPERM, not
//     ENOSYS; reading a directory EBADF, not EISDIR), and it refuses to
//     follow a symbolic link out of a mounted directory, which wazero
//     follows.
//   - Modules wasmtime accepts but Inspect cannot judge (extended constant
//     expressions) compile here and not under wazero; an invalid module
//     is refused by both, in each engine's words.
//   - A response view used after its instance is closed points at
//     unmapped memory and crashes the process, where wazero's would show
//     stale bytes: the contract (valid until the next call) is the same.
//   - Deep recursion traps at wasmtime's stack limit (512 KiB of native
//     stack), not at wazero's.
//
// Every instance reserves address space for a whole 32-bit memory plus
// guard pages (about 6 GiB of virtual memory, not resident), as wasmtime
// does by default.
func NewWasmtime(cfg Config) (Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkBindingsLayout(); err != nil {
		return nil, err
	}
	e := &wasmtimeEngine{
		cfg:           cfg,
		logger:        cfg.guestLogger(),
		interruptible: cfg.Interruptible(),
		memoryLimit:   -1,
	}
	if cfg.memoryLimitPages != 0 && cfg.memoryLimitPages < MaxMemoryPages {
		e.memoryLimit = int64(cfg.memoryLimitPages) * 65536
	}
	if cfg.cacheDir != "" {
		e.cacheDir = filepath.Join(cfg.cacheDir, fmt.Sprintf("wasmtime-v%s-%s-%s", WasmtimeVersion, runtime.GOARCH, runtime.GOOS))
		if err := os.MkdirAll(e.cacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: compilation cache %q: %w", cfg.cacheDir, err)
		}
	}

	wc := wasmtime.NewConfig()
	defer wc.Close()
	wc.SetEpochInterruption(e.interruptible)
	wc.SetWasmThreads(false)
	wc.SetWasmTailCall(false)
	wc.SetWasmMultiMemory(false)
	wc.SetWasmMemory64(false)
	wc.SetWasmGC(false)
	wc.SetWasmFunctionReferences(false)
	wc.SetWasmRelaxedSIMD(false)
	wc.SetWasmWideArithmetic(false)
	e.wt = wasmtime.NewEngineWithConfig(wc)

	e.linker = wasmtime.NewLinker(e.wt)
	if err := e.defineImports(); err != nil {
		e.linker.Close()
		e.wt.Close()
		return nil, err
	}
	return e, nil
}

// cacheFeatures names the settings of NewWasmtime that change compiled
// code, for the cache key.
const cacheFeatures = "wasm2.0;no-threads;no-tail-call;no-multi-memory;no-memory64;no-gc;no-func-refs;no-relaxed-simd;no-wide-arith"

type wasmtimeEngine struct {
	cfg           Config
	logger        *slog.Logger
	interruptible bool
	memoryLimit   int64  // bytes, -1 for none
	cacheDir      string // "" without a cache

	// mu guards the wasmtime engine and linker against Close: every use
	// holds it for reading.
	mu       sync.RWMutex
	wt       *wasmtime.Engine
	linker   *wasmtime.Linker
	released bool // the handles above are closed; guarded by mu
	closed   atomic.Bool

	modules   sync.Map // *wasmtimeModule -> struct{}, to close them with the engine
	instances sync.Map // *wasmtimeInstance -> struct{}, to stop them with the engine
}

func (e *wasmtimeEngine) Compile(ctx context.Context, name string, wasm []byte) (Module, error) {
	if e.closed.Load() {
		return nil, fmt.Errorf("plugin %q: compile: engine %w", name, ErrClosed)
	}
	info, err := Inspect(wasm)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	if err := CheckABI(name, info, e.cfg.caps); err != nil {
		return nil, err
	}
	if err := checkMemoryLimit(info, e.cfg.memoryLimitPages); err != nil {
		return nil, fmt.Errorf("plugin %q: compile: %w", name, err)
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed.Load() {
		return nil, fmt.Errorf("plugin %q: compile: engine %w", name, ErrClosed)
	}
	compiled, err := e.compile(name, wasm)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: compile: %w", name, err)
	}
	_, reactor := info.Export(reactorInit)
	_, hasInit := info.Export(abi.ExportInit)
	m := &wasmtimeModule{engine: e, name: name, info: info, compiled: compiled, reactor: reactor, hasInit: hasInit}
	e.modules.Store(m, struct{}{})
	return m, nil
}

// checkMemoryLimit refuses a memory whose declared limits exceed the
// engine's, with wazero's words for it, as wazero does at compile time.
func checkMemoryLimit(info *ModuleInfo, limitPages uint32) error {
	mem, ok := info.Export(abi.ExportMemory)
	if !ok || mem.Kind != KindMemory {
		return nil
	}
	limit := uint64(limitPages)
	if limit == 0 {
		limit = MaxMemoryPages
	}
	switch {
	case mem.Memory.HasMax && mem.Memory.Max > limit:
		return fmt.Errorf("section memory: max %d pages (%s) over limit of %d pages (%s)", mem.Memory.Max, pageBytes(mem.Memory.Max), limit, pageBytes(limit))
	case mem.Memory.Min > limit:
		return fmt.Errorf("section memory: min %d pages (%s) over limit of %d pages (%s)", mem.Memory.Min, pageBytes(mem.Memory.Min), limit, pageBytes(limit))
	}
	return nil
}

// pageBytes renders a number of pages as wazero does: "2 Mi".
func pageBytes(pages uint64) string {
	k := pages * 64
	for _, unit := range []string{"Ki", "Mi", "Gi"} {
		if k < 1024 {
			return fmt.Sprintf("%d %s", k, unit)
		}
		k /= 1024
	}
	return fmt.Sprintf("%d Ti", k)
}

// compile compiles wasm, through the cache when there is one. A cache
// entry that cannot be loaded (written by another build of wasmtime or
// damaged) is replaced; a failure to write one only costs a compilation
// next time.
func (e *wasmtimeEngine) compile(name string, wasm []byte) (*wasmtime.Module, error) {
	if e.cacheDir == "" {
		return wasmtime.NewModule(e.wt, wasm)
	}
	path := filepath.Join(e.cacheDir, e.cacheKey(wasm))
	if _, err := os.Stat(path); err == nil {
		if m, err := wasmtime.NewModuleDeserializeFile(e.wt, path); err == nil {
			return m, nil
		}
	}
	m, err := wasmtime.NewModule(e.wt, wasm)
	if err != nil {
		return nil, err
	}
	if err := writeCacheEntry(path, m); err != nil {
		e.logger.Warn("compilation cache: entry not written", slog.String("plugin", name), slog.Any("error", err))
	}
	return m, nil
}

// cacheKey hashes everything the native code depends on: the wasmtime
// version, the enabled features, epoch interruption and the module.
func (e *wasmtimeEngine) cacheKey(wasm []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "wasmtime %s\x00%s\x00epoch=%t\x00", WasmtimeVersion, cacheFeatures, e.interruptible)
	h.Write(wasm)
	return hex.EncodeToString(h.Sum(nil)) + ".cwasm"
}

// writeCacheEntry writes the serialized module to a temporary file and
// renames it into place, so that a reader never sees half an entry.
func writeCacheEntry(path string, m *wasmtime.Module) error {
	b, err := m.Serialize()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

func (e *wasmtimeEngine) Close(ctx context.Context) error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Idle instances are released now; a running one is interrupted and
	// releases itself when its call returns.
	e.instances.Range(func(k, _ any) bool {
		inst := k.(*wasmtimeInstance)
		if inst.mu.TryLock() {
			inst.release()
			inst.mu.Unlock()
		} else {
			inst.flag.set()
			e.incrementEpoch()
		}
		return true
	})
	e.modules.Range(func(k, _ any) bool {
		_ = k.(*wasmtimeModule).Close(ctx)
		return true
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.released = true
	e.linker.Close()
	e.wt.Close()
	return nil
}

// incrementEpoch advances the engine's epoch, so that every running guest
// of the engine checks its interrupt flag.
func (e *wasmtimeEngine) incrementEpoch() {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.released {
		e.wt.IncrementEpoch()
	}
}

type wasmtimeModule struct {
	engine   *wasmtimeEngine
	name     string
	info     *ModuleInfo
	reactor  bool
	hasInit  bool
	mu       sync.RWMutex // guards compiled against Close
	compiled *wasmtime.Module
	closed   bool
}

func (m *wasmtimeModule) Name() string      { return m.name }
func (m *wasmtimeModule) Info() *ModuleInfo { return m.info }

func (m *wasmtimeModule) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.engine.modules.Delete(m)
	// Instances keep what they need of the compiled code.
	m.compiled.Close()
	return nil
}

func (m *wasmtimeModule) Instantiate(ctx context.Context, cfg InstanceConfig) (Instance, error) {
	e := m.engine
	logger := instanceLogger(e.logger, m.name, cfg)
	inst := &wasmtimeInstance{
		engine:      e,
		plugin:      m.name,
		logger:      logger,
		maxResponse: e.cfg.responseLimit(),
		stdout:      &lineWriter{logger: logger, level: slog.LevelInfo, stream: "stdout"},
		stderr:      &lineWriter{logger: logger, level: slog.LevelWarn, stream: "stderr"},
		clocks:      newWASIClocks(e.cfg.caps.clock),
		random:      newFakeRandom(),
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if err := m.instantiate(inst); err != nil {
		return nil, err
	}
	if m.reactor {
		if err := ctx.Err(); err != nil {
			inst.release()
			return nil, inst.contextError(OpInstantiate, err)
		}
		initialize := inst.instance.GetFunc(inst.store, reactorInit)
		stop := inst.watch(ctx)
		err := inst.wc.call(initialize, 0)
		stop()
		if err != nil {
			return nil, inst.failure(ctx, OpInstantiate, err)
		}
	}
	return inst, nil
}

// instantiate creates inst's store and instance, without running any of
// its code but a start function.
func (m *wasmtimeModule) instantiate(inst *wasmtimeInstance) error {
	e := m.engine
	e.mu.RLock()
	defer e.mu.RUnlock()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e.closed.Load() || m.closed {
		return &GuestError{Plugin: m.name, Op: OpInstantiate, Cause: ErrClosed}
	}
	wasi := wasmtime.NewWasiConfig()
	for _, d := range e.cfg.caps.dirs {
		if err := wasi.PreopenDir(d.HostPath, d.GuestPath, wasmtime.DIR_READ, wasmtime.FILE_READ); err != nil {
			wasi.Close()
			return &GuestError{Plugin: m.name, Op: OpInstantiate, Cause: ErrTrap, Detail: fmt.Sprintf("read-only dir %q: %v", d.HostPath, err), Err: err}
		}
	}
	inst.flag = newInterruptFlag()
	inst.store = wasmtime.NewStoreWithData(e.wt, inst)
	inst.store.SetWasi(wasi)
	inst.wc = &wasmtimeCall{context: unsafe.Pointer(inst.store.Context())}
	if e.memoryLimit >= 0 {
		inst.store.Limiter(e.memoryLimit, -1, -1, -1, -1)
	}
	if e.interruptible {
		watchEpoch(inst.store, inst.flag)
		inst.store.SetEpochDeadline(1)
	}
	// Registered before instantiation: a start function or _initialize
	// may already be stopped by Close.
	e.instances.Store(inst, struct{}{})
	instance, err := e.linker.Instantiate(inst.store, m.compiled)
	if err != nil {
		inst.release()
		return inst.classify(nil, OpInstantiate, err)
	}
	inst.instance = instance
	inst.mem = instance.GetExport(inst.store, abi.ExportMemory).Memory()
	inst.alloc = instance.GetFunc(inst.store, abi.ExportAlloc)
	inst.process = instance.GetFunc(inst.store, abi.ExportProcess)
	if m.hasInit {
		inst.init = instance.GetFunc(inst.store, abi.ExportInit)
	}
	inst.fdstat = e.linker.Get(inst.store, WASIModule, "fd_fdstat_get").Func()
	return nil
}

// instanceLogger is the logger of one instance: the engine's, with the
// plugin's name and the instance's attributes.
func instanceLogger(base *slog.Logger, plugin string, cfg InstanceConfig) *slog.Logger {
	logger := base.With(slog.String("plugin", plugin))
	if len(cfg.logAttrs) > 0 {
		args := make([]any, len(cfg.logAttrs))
		for i, a := range cfg.logAttrs {
			args[i] = a
		}
		logger = logger.With(args...)
	}
	return logger
}

type wasmtimeInstance struct {
	engine      *wasmtimeEngine
	plugin      string
	logger      *slog.Logger
	maxResponse uint32
	stdout      *lineWriter
	stderr      *lineWriter
	clocks      wasiClocks
	random      *rand.Rand

	// mu is held by every call, and by the engine's Close to release an
	// idle instance; calls come from one goroutine at a time, so it is
	// contended only by Close.
	mu            sync.Mutex
	flag          *interruptFlag // set: the running call stops
	store         *wasmtime.Store
	wc            *wasmtimeCall // calls into the store; no Go pointers, as cgo requires
	instance      *wasmtime.Instance
	mem           *wasmtime.Memory
	alloc         *wasmtime.Func
	process, init *wasmtime.Func // init is nil when the guest has no flowhost_init
	fdstat        *wasmtime.Func // wasmtime's fd_fdstat_get, to tell open descriptors
	state         instanceState
}

func (i *wasmtimeInstance) Init(ctx context.Context, payload []byte) ([]byte, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.usable(OpInit); err != nil {
		return nil, err
	}
	if i.init == nil {
		return nil, nil
	}
	packed, err := i.call(ctx, OpInit, i.init, payload)
	if err != nil || packed == 0 {
		return nil, err
	}
	return i.view(OpInit, packed)
}

func (i *wasmtimeInstance) Process(ctx context.Context, request []byte) ([]byte, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.usable(OpProcess); err != nil {
		return nil, err
	}
	packed, err := i.call(ctx, OpProcess, i.process, request)
	if err != nil {
		return nil, err
	}
	return i.view(OpProcess, packed)
}

func (i *wasmtimeInstance) Close(context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.state == stateClosed {
		return nil
	}
	i.flushOutput()
	i.release()
	i.state = stateClosed
	return nil
}

// release frees the store and the flag, once; the caller holds mu and no
// call is running.
func (i *wasmtimeInstance) release() {
	i.engine.instances.Delete(i)
	if i.store == nil {
		return
	}
	i.store.Close()
	i.flag.free()
	i.store, i.wc, i.instance, i.mem, i.alloc, i.process, i.init, i.fdstat = nil, nil, nil, nil, nil, nil, nil, nil
}

func (i *wasmtimeInstance) usable(op string) error {
	switch {
	case i.state == stateClosed:
		return &GuestError{Plugin: i.plugin, Op: op, Cause: ErrClosed}
	case i.engine.closed.Load():
		i.release()
		return &GuestError{Plugin: i.plugin, Op: op, Cause: ErrClosed}
	case i.state == stateDead:
		return &GuestError{Plugin: i.plugin, Op: op, Cause: ErrDead}
	}
	return nil
}

// watch arms the interruption of the next guest code for ctx and returns
// the function that disarms it, which must run before the call's result
// is looked at. When ctx is done, the flag is set and the epoch advanced,
// so the guest stops at its next loop head or function entry.
func (i *wasmtimeInstance) watch(ctx context.Context) (stop func()) {
	if !i.engine.interruptible {
		return func() {}
	}
	i.flag.clear()
	i.wc.setEpochDeadline()
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		i.flag.set()
		i.engine.incrementEpoch()
		close(fired)
	})
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		if !stopAfter() {
			<-fired
		}
	}
}

// call copies payload into guest memory from flowhost_alloc, calls fn with
// its pointer and length, and returns fn's i64 result. A request shorter
// than one byte is passed as (0, 0) without calling flowhost_alloc.
func (i *wasmtimeInstance) call(ctx context.Context, op string, fn *wasmtime.Func, payload []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		// The guest never ran, so it is still healthy.
		return 0, i.contextError(op, err)
	}
	if len(payload) > math.MaxInt32 {
		return 0, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrRequestTooLarge, Detail: fmt.Sprintf("%d bytes", len(payload))}
	}
	i.stderr.reset()
	stop := i.watch(ctx)
	wc := i.wc
	var ptr uint32
	if len(payload) > 0 {
		wc.vals[0] = rawVal{uint64(uint32(len(payload)))}
		if err := wc.call(i.alloc, 1); err != nil {
			stop()
			return 0, i.failure(ctx, OpAlloc, err)
		}
		ptr = uint32(wc.vals[0][0])
		if ptr == 0 {
			stop()
			return 0, &GuestError{Plugin: i.plugin, Op: OpAlloc, Cause: ErrAlloc, Detail: fmt.Sprintf("%d bytes", len(payload))}
		}
		mem := wc.memory(i.mem)
		if uint64(ptr)+uint64(len(payload)) > uint64(len(mem)) {
			stop()
			return 0, &GuestError{Plugin: i.plugin, Op: OpAlloc, Cause: ErrOutOfBounds, Detail: i.regionDetail(ptr, uint32(len(payload)))}
		}
		copy(mem[ptr:], payload)
	}
	wc.vals[0], wc.vals[1] = rawVal{uint64(ptr)}, rawVal{uint64(uint32(len(payload)))}
	err := wc.call(fn, 2)
	stop()
	if err != nil {
		return 0, i.failure(ctx, op, err)
	}
	return int64(wc.vals[0][0]), nil
}

// view interprets a packed result: a negative status, or ptr<<32|len of a
// region of guest memory, which it returns without copying.
func (i *wasmtimeInstance) view(op string, packed int64) ([]byte, error) {
	if packed < 0 {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrStatus, Status: packed}
	}
	ptr, n := uint32(packed>>32), uint32(packed)
	if n > i.maxResponse {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrResponseTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", n, i.maxResponse)}
	}
	mem := i.wc.memory(i.mem)
	if uint64(ptr)+uint64(n) > uint64(len(mem)) {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrOutOfBounds, Detail: i.regionDetail(ptr, n)}
	}
	return mem[ptr : ptr+n : ptr+n], nil
}

func (i *wasmtimeInstance) regionDetail(ptr, n uint32) string {
	return fmt.Sprintf("%d bytes at %#x, memory is %d bytes", n, ptr, len(i.wc.memory(i.mem)))
}

func (i *wasmtimeInstance) contextError(op string, err error) *GuestError {
	ge := &GuestError{Plugin: i.plugin, Op: op, Cause: ErrCanceled, Err: context.Canceled}
	if errors.Is(err, context.DeadlineExceeded) {
		ge.Cause, ge.Err = ErrDeadline, context.DeadlineExceeded
	}
	return ge
}

// failure classifies an error of a guest call and kills the instance: a
// guest stopped half-way has memory in an unknown state.
func (i *wasmtimeInstance) failure(ctx context.Context, op string, err error) *GuestError {
	i.flushOutput()
	ge := i.classify(ctx, op, err)
	if i.state == stateAlive {
		i.state = stateDead
		i.release()
	}
	return ge
}

// classify turns an error of wasmtime into a *GuestError.
func (i *wasmtimeInstance) classify(ctx context.Context, op string, err error) *GuestError {
	ge := &GuestError{Plugin: i.plugin, Op: op, Err: err}
	var werr *wasmtime.Error
	var trap *wasmtime.Trap
	var callErr *wasmtimeError
	switch {
	case i.engine.closed.Load():
		ge.Cause = ErrClosed
	case strings.Contains(err.Error(), interruptedMessage) && ctx != nil:
		ge.Cause, ge.Err = ErrCanceled, context.Canceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			ge.Cause, ge.Err = ErrDeadline, context.DeadlineExceeded
		}
	case errors.As(err, &callErr) && callErr.hasExit:
		ge.Cause = ErrExit
		ge.Detail = fmt.Sprintf("exit code %d", callErr.exit)
	case errors.As(err, &callErr):
		ge.Cause = ErrTrap
		ge.Detail = wasmtimeMessage(callErr.msg)
		if msg, ok := trapMessages[callErr.code]; ok && callErr.hasCode {
			ge.Detail = "wasm error: " + msg
			if callErr.code == wasmtime.StackOverflow {
				ge.Detail = msg // wazero reports its stack overflow without the prefix
			}
		}
	case errors.As(err, &werr) && isExit(werr):
		code, _ := werr.ExitStatus()
		ge.Cause = ErrExit
		ge.Detail = fmt.Sprintf("exit code %d", code)
	case errors.As(err, &trap):
		ge.Cause = ErrTrap
		ge.Detail = trapDetail(trap)
	default:
		ge.Cause = ErrTrap
		ge.Detail = wasmtimeMessage(err.Error())
	}
	// What the guest printed says more than the engine's view of it: a
	// Go guest prints "panic: ..." or "runtime: out of memory ..." and
	// then executes unreachable.
	if line := i.stderr.firstLine(); line != "" && (ge.Cause == ErrExit || ge.Cause == ErrTrap) {
		ge.Detail = line + " (" + ge.Detail + ")"
	}
	return ge
}

func isExit(err *wasmtime.Error) bool {
	_, ok := err.ExitStatus()
	return ok
}

// trapMessages words wasmtime's trap codes as wazero words its runtime
// errors, so that a trap reads the same on both engines.
var trapMessages = map[wasmtime.TrapCode]string{
	wasmtime.StackOverflow:          "stack overflow",
	wasmtime.MemoryOutOfBounds:      "out of bounds memory access",
	wasmtime.HeapMisaligned:         "unaligned atomic",
	wasmtime.TableOutOfBounds:       "invalid table access",
	wasmtime.IndirectCallToNull:     "invalid table access",
	wasmtime.BadSignature:           "indirect call type mismatch",
	wasmtime.IntegerOverflow:        "integer overflow",
	wasmtime.IntegerDivisionByZero:  "integer divide by zero",
	wasmtime.BadConversionToInteger: "invalid conversion to integer",
	wasmtime.UnreachableCodeReached: "unreachable",
}

func trapDetail(trap *wasmtime.Trap) string {
	if code := trap.Code(); code != nil {
		if msg, ok := trapMessages[*code]; ok {
			return "wasm error: " + msg
		}
	}
	return wasmtimeMessage(trap.Message())
}

// wasmtimeMessage is the line that says what happened in one of
// wasmtime's multi-line errors: the first cause after the backtrace (such
// as the message of a host function's trap), or else the first line.
func wasmtimeMessage(s string) string {
	if _, cause, ok := strings.Cut(s, "\nCaused by:\n"); ok {
		line, _, _ := strings.Cut(strings.TrimLeft(cause, " "), "\n")
		if n, rest, ok := strings.Cut(line, ": "); ok && strings.Trim(n, "0123456789") == "" {
			line = rest // anyhow numbers the causes when there are several
		}
		return line
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// flushOutput logs partial stdio lines the guest will not finish.
func (i *wasmtimeInstance) flushOutput() {
	for _, w := range []*lineWriter{i.stdout, i.stderr} {
		if len(w.partial) > 0 {
			w.flush()
		}
	}
}
