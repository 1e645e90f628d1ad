package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/flowhost/flowhost/abi"
)

// reactorInit is the WASI reactor initialisation export; a Go guest built
// with -buildmode=c-shared must run it before any other export.
const reactorInit = "_initialize"

// NewWazero returns an Engine backed by wazero's optimizing compiler (never
// its interpreter). It provides flowhost.log and WASI preview1; Compile
// refuses modules importing WASI functions cfg's capabilities do not allow.
//
// Every guest call honours its context: a deadline or a cancellation stops
// the guest even inside a loop that never calls out. wazero pays for this
// with a check on every loop back-edge of guest code, which makes
// loop-heavy guests several times slower (about 6x for the echo guest's
// byte loop); it is the only way wazero can enforce a CPU limit.
func NewWazero(ctx context.Context, cfg Config) (Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(cfg.Interruptible())
	if cfg.memoryLimitPages != 0 {
		rc = rc.WithMemoryLimitPages(cfg.memoryLimitPages)
	}
	e := &wazeroEngine{cfg: cfg, logger: cfg.guestLogger()}
	if cfg.cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine: compilation cache %q: %w", cfg.cacheDir, err)
		}
		e.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if err := e.instantiateHostModules(ctx); err != nil {
		return nil, errors.Join(err, e.Close(ctx))
	}

	mc := wazero.NewModuleConfig()
	if cfg.caps.clock {
		mc = mc.WithSysWalltime().WithSysNanotime()
	}
	if len(cfg.caps.dirs) > 0 {
		fs := wazero.NewFSConfig()
		for _, d := range cfg.caps.dirs {
			// An os.Root, not wazero's directory mount: wazero follows a
			// symlink out of the directory, and a guest could then read
			// any file the host can. The root's fs.FS is read-only and
			// refuses every path that leaves it.
			root, err := os.OpenRoot(d.HostPath)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("engine: granted directory %q: %w", d.HostPath, err), e.Close(ctx))
			}
			e.roots = append(e.roots, root)
			fs = fs.WithFSMount(root.FS(), d.GuestPath)
		}
		mc = mc.WithFSConfig(fs)
	}
	e.moduleConfig = mc
	return e, nil
}

type wazeroEngine struct {
	roots        []*os.Root // granted directories, closed with the engine
	cfg          Config
	logger       *slog.Logger
	rt           wazero.Runtime
	cache        wazero.CompilationCache // nil without a cache dir
	moduleConfig wazero.ModuleConfig     // capabilities; name and stdio are per instance
	closed       atomic.Bool

	// instances maps a wazero module name to its instance, so that
	// flowhost.log, which wazero hands only the calling module, can find
	// the instance's logger.
	instances sync.Map
	seq       atomic.Uint64
}

func (e *wazeroEngine) instantiateHostModules(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		return fmt.Errorf("engine: WASI preview1: %w", err)
	}
	i32 := api.ValueTypeI32
	_, err := e.rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.ImportLog).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("engine: host module %s: %w", abi.ImportModule, err)
	}
	return nil
}

// hostLog implements flowhost.log(level, ptr, len). A line outside guest
// memory traps the guest, as its own out-of-bounds access would.
func (e *wazeroEngine) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level := slog.Level(api.DecodeI32(stack[0]))
	ptr, n := api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	line, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(fmt.Errorf("%s.%s: line of %d bytes at %#x is outside guest memory", abi.ImportModule, abi.ImportLog, n, ptr))
	}
	v, ok := e.instances.Load(mod.Name())
	if !ok {
		return
	}
	logger := v.(*wazeroInstance).logger
	if !logger.Enabled(ctx, level) {
		return
	}
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes]
	}
	logger.Log(ctx, level, string(line))
}

func (e *wazeroEngine) Compile(ctx context.Context, name string, wasm []byte) (Module, error) {
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
	compiled, err := e.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: compile: %w", name, err)
	}
	_, reactor := info.Export(reactorInit)
	_, hasInit := info.Export(abi.ExportInit)
	return &wazeroModule{engine: e, name: name, info: info, compiled: compiled, reactor: reactor, hasInit: hasInit}, nil
}

func (e *wazeroEngine) Close(ctx context.Context) error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := e.rt.Close(ctx)
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(ctx))
	}
	for _, r := range e.roots {
		err = errors.Join(err, r.Close())
	}
	return err
}

type wazeroModule struct {
	engine   *wazeroEngine
	name     string
	info     *ModuleInfo
	compiled wazero.CompiledModule
	reactor  bool
	hasInit  bool
	closed   atomic.Bool
}

func (m *wazeroModule) Name() string      { return m.name }
func (m *wazeroModule) Info() *ModuleInfo { return m.info }

func (m *wazeroModule) Close(ctx context.Context) error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	return m.compiled.Close(ctx)
}

func (m *wazeroModule) Instantiate(ctx context.Context, cfg InstanceConfig) (Instance, error) {
	e := m.engine
	if e.closed.Load() || m.closed.Load() {
		return nil, &GuestError{Plugin: m.name, Op: OpInstantiate, Cause: ErrClosed}
	}
	logger := e.logger.With(slog.String("plugin", m.name))
	if len(cfg.logAttrs) > 0 {
		args := make([]any, len(cfg.logAttrs))
		for i, a := range cfg.logAttrs {
			args[i] = a
		}
		logger = logger.With(args...)
	}
	inst := &wazeroInstance{
		engine:      e,
		plugin:      m.name,
		name:        fmt.Sprintf("%s#%d", m.name, e.seq.Add(1)),
		logger:      logger,
		maxResponse: e.cfg.responseLimit(),
		stdout:      &lineWriter{logger: logger, level: slog.LevelInfo, stream: "stdout"},
		stderr:      &lineWriter{logger: logger, level: slog.LevelWarn, stream: "stderr"},
	}
	mc := e.moduleConfig.WithName(inst.name).WithStdout(inst.stdout).WithStderr(inst.stderr)
	if m.reactor {
		mc = mc.WithStartFunctions(reactorInit)
	} else {
		mc = mc.WithStartFunctions()
	}
	// Registered before instantiation: _initialize may already log.
	e.instances.Store(inst.name, inst)
	mod, err := e.rt.InstantiateModule(ctx, m.compiled, mc)
	if err != nil {
		e.instances.Delete(inst.name)
		return nil, inst.failure(OpInstantiate, err)
	}
	inst.mod = mod
	inst.mem = mod.ExportedMemory(abi.ExportMemory)
	inst.alloc = mod.ExportedFunction(abi.ExportAlloc)
	inst.process = mod.ExportedFunction(abi.ExportProcess)
	if m.hasInit {
		inst.init = mod.ExportedFunction(abi.ExportInit)
	}
	return inst, nil
}

type instanceState uint8

const (
	stateAlive instanceState = iota
	stateDead
	stateClosed
)

type wazeroInstance struct {
	engine      *wazeroEngine
	plugin      string
	name        string // unique wazero module name: plugin#seq
	logger      *slog.Logger
	maxResponse uint32
	stdout      *lineWriter
	stderr      *lineWriter

	mod           api.Module
	mem           api.Memory
	alloc         api.Function
	process, init api.Function // init is nil when the guest has no flowhost_init
	stack         [2]uint64    // params and results of every call, reused
	state         instanceState
}

func (i *wazeroInstance) Init(ctx context.Context, payload []byte) ([]byte, error) {
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

func (i *wazeroInstance) Process(ctx context.Context, request []byte) ([]byte, error) {
	if err := i.usable(OpProcess); err != nil {
		return nil, err
	}
	packed, err := i.call(ctx, OpProcess, i.process, request)
	if err != nil {
		return nil, err
	}
	return i.view(OpProcess, packed)
}

func (i *wazeroInstance) Close(ctx context.Context) error {
	if i.state == stateClosed {
		return nil
	}
	alive := i.state == stateAlive
	i.state = stateClosed
	if !alive {
		return nil
	}
	i.flushOutput()
	i.engine.instances.Delete(i.name)
	return i.mod.Close(ctx)
}

func (i *wazeroInstance) usable(op string) error {
	switch {
	case i.state == stateClosed || i.engine.closed.Load():
		return &GuestError{Plugin: i.plugin, Op: op, Cause: ErrClosed}
	case i.state == stateDead:
		return &GuestError{Plugin: i.plugin, Op: op, Cause: ErrDead}
	}
	return nil
}

// call copies payload into guest memory from flowhost_alloc, calls fn with
// its pointer and length, and returns fn's i64 result. A request shorter
// than one byte is passed as (0, 0) without calling flowhost_alloc.
func (i *wazeroInstance) call(ctx context.Context, op string, fn api.Function, payload []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		// The guest never ran, so it is still healthy.
		return 0, i.contextError(op, err)
	}
	if len(payload) > math.MaxInt32 {
		return 0, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrRequestTooLarge, Detail: fmt.Sprintf("%d bytes", len(payload))}
	}
	i.stderr.reset()
	var ptr uint32
	if len(payload) > 0 {
		i.stack[0] = api.EncodeI32(int32(len(payload)))
		if err := i.alloc.CallWithStack(ctx, i.stack[:]); err != nil {
			return 0, i.failure(OpAlloc, err)
		}
		ptr = api.DecodeU32(i.stack[0])
		if ptr == 0 {
			return 0, &GuestError{Plugin: i.plugin, Op: OpAlloc, Cause: ErrAlloc, Detail: fmt.Sprintf("%d bytes", len(payload))}
		}
		if !i.mem.Write(ptr, payload) {
			return 0, &GuestError{Plugin: i.plugin, Op: OpAlloc, Cause: ErrOutOfBounds, Detail: i.regionDetail(ptr, uint32(len(payload)))}
		}
	}
	i.stack[0], i.stack[1] = api.EncodeU32(ptr), api.EncodeI32(int32(len(payload)))
	if err := fn.CallWithStack(ctx, i.stack[:]); err != nil {
		return 0, i.failure(op, err)
	}
	return int64(i.stack[0]), nil
}

// view interprets a packed result: a negative status, or ptr<<32|len of a
// region of guest memory, which it returns without copying.
func (i *wazeroInstance) view(op string, packed int64) ([]byte, error) {
	if packed < 0 {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrStatus, Status: packed}
	}
	ptr, n := uint32(packed>>32), uint32(packed)
	if n > i.maxResponse {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrResponseTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", n, i.maxResponse)}
	}
	b, ok := i.mem.Read(ptr, n)
	if !ok {
		return nil, &GuestError{Plugin: i.plugin, Op: op, Cause: ErrOutOfBounds, Detail: i.regionDetail(ptr, n)}
	}
	return b, nil
}

func (i *wazeroInstance) regionDetail(ptr, n uint32) string {
	return fmt.Sprintf("%d bytes at %#x, memory is %d bytes", n, ptr, i.mem.Size())
}

func (i *wazeroInstance) contextError(op string, err error) *GuestError {
	ge := &GuestError{Plugin: i.plugin, Op: op, Cause: ErrCanceled, Err: context.Canceled}
	if errors.Is(err, context.DeadlineExceeded) {
		ge.Cause, ge.Err = ErrDeadline, context.DeadlineExceeded
	}
	return ge
}

// failure classifies an error of a guest call and kills the instance: a
// guest stopped half-way has memory in an unknown state.
func (i *wazeroInstance) failure(op string, err error) *GuestError {
	i.flushOutput()
	ge := &GuestError{Plugin: i.plugin, Op: op, Err: err}
	var exit *sys.ExitError
	switch {
	case i.engine.closed.Load():
		ge.Cause = ErrClosed
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		ge.Cause, ge.Err = ErrDeadline, context.DeadlineExceeded
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		ge.Cause, ge.Err = ErrCanceled, context.Canceled
	case errors.As(err, &exit):
		ge.Cause = ErrExit
		ge.Detail = fmt.Sprintf("exit code %d", exit.ExitCode())
	default:
		ge.Cause = ErrTrap
		// wazero appends a multi-line wasm stack trace; the error keeps
		// it in Err, the message keeps one line.
		ge.Detail, _, _ = strings.Cut(err.Error(), "\n")
	}
	// What the guest printed says more than the engine's view of it: a
	// Go guest prints "panic: ..." or "runtime: out of memory ..." and
	// then executes unreachable.
	if line := i.stderr.firstLine(); line != "" && (ge.Cause == ErrExit || ge.Cause == ErrTrap) {
		ge.Detail = line + " (" + ge.Detail + ")"
	}
	if i.state == stateAlive {
		i.state = stateDead
		i.engine.instances.Delete(i.name)
		if i.mod != nil {
			// The error is already the one to report; the module is
			// closed either way.
			_ = i.mod.Close(context.Background())
		}
	}
	return ge
}

// flushOutput logs partial stdio lines the guest will not finish.
func (i *wazeroInstance) flushOutput() {
	for _, w := range []*lineWriter{i.stdout, i.stderr} {
		if len(w.partial) > 0 {
			w.flush()
		}
	}
}
