package flowhost

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"unsafe"

	"github.com/flowhost/flowhost/abi"
)

// guest is the instance-wide state behind the exported functions. The host
// calls one export at a time, so it needs no lock.
type guest struct {
	comp        *Computation
	initialized bool
	outputs     []string // declared output streams, from the init envelope
	maxState    int      // the typed state limit (0: the ABI's)
	in          []byte   // the region flowhost_alloc handed out last
	// out holds the envelope returned last; the host may read it until
	// the next call, so it is only reset when that call starts.
	out []byte
	// payloads and parents are the chunks of the last batch (Batch), kept
	// for the next one: once the response is encoded nothing refers to
	// them.
	payloads []byte
	parents  []uint32
}

// instance is the module's one guest: exports have no receiver.
var instance guest

// shrinkAbove is the region size above which alloc gives memory back when
// a much smaller request follows a large one.
const shrinkAbove = 1 << 20

// alloc returns a region of at least size bytes for the next envelope; a
// zero size still gets a region, so that its address is never 0. It
// returns nil for a negative size.
func (g *guest) alloc(size int32) []byte {
	if size < 0 {
		return nil
	}
	n := max(int(size), 1)
	if c := cap(g.in); c < n || (c > shrinkAbove && c/4 > n) {
		g.in = make([]byte, n)
	}
	g.in = g.in[:n]
	return g.in
}

// region returns the request the host wrote at ptr, which must lie in the
// region alloc handed out.
func (g *guest) region(ptr uintptr, size int32) ([]byte, bool) {
	if g.in == nil || ptr != uintptr(unsafe.Pointer(unsafe.SliceData(g.in))) || size < 0 || int(size) > len(g.in) {
		return nil, false
	}
	return g.in[:size], true
}

// processAt runs flowhost_process on the region at ptr.
func (g *guest) processAt(ptr uintptr, size int32) ([]byte, abi.Status) {
	b, ok := g.region(ptr, size)
	if !ok {
		Log(LevelError, "flowhost: flowhost_process("+strconv.FormatUint(uint64(ptr), 10)+", "+strconv.Itoa(int(size))+") names memory that flowhost_alloc did not hand out")
		return nil, abi.StatusBadRequest
	}
	return g.process(b)
}

// initAt runs flowhost_init on the region at ptr.
func (g *guest) initAt(ptr uintptr, size int32) ([]byte, abi.Status) {
	b, ok := g.region(ptr, size)
	if !ok {
		Log(LevelError, "flowhost: flowhost_init("+strconv.FormatUint(uint64(ptr), 10)+", "+strconv.Itoa(int(size))+") names memory that flowhost_alloc did not hand out")
		return nil, abi.StatusBadRequest
	}
	return g.init(b)
}

const noComputation = "flowhost: no computation registered; call flowhost.Register from an init function"

// recoverPanic turns a panic of the user's code into a logged guest
// failure instead of a trap that would tell the host nothing.
func recoverPanic(what string, out *[]byte, status *abi.Status) {
	if r := recover(); r != nil {
		Log(LevelError, fmt.Sprintf("flowhost: %s panicked: %v\n%s", what, r, debug.Stack()))
		*out, *status = nil, abi.StatusGuestFailure
	}
}

// badEnvelope reports an envelope that does not decode: as a newer ABI
// version when its abi field says so, as a bad request otherwise.
func badEnvelope(what string, data []byte, err error) abi.Status {
	if v, ok := abi.PeekVersion(data); ok && v != abi.Version {
		Log(LevelError, "flowhost: "+what+" speaks ABI version "+strconv.FormatUint(v, 10)+"; this SDK speaks "+strconv.Itoa(abi.Version))
		return abi.StatusUnsupportedVersion
	}
	Log(LevelError, "flowhost: cannot decode the "+what+": "+err.Error())
	return abi.StatusBadRequest
}

// init handles flowhost_init: it returns no bytes and status 0 on success,
// an encoded InitResult when the computation refuses to start, or a
// negative status.
func (g *guest) init(data []byte) (out []byte, status abi.Status) {
	defer recoverPanic("Init", &out, &status)
	in, err := abi.DecodeInit(data)
	if err != nil {
		return nil, badEnvelope("init envelope", data, err)
	}
	if in.ABI != abi.Version {
		return nil, badEnvelope("init envelope", data, nil)
	}
	if err := in.Validate(); err != nil {
		Log(LevelError, "flowhost: invalid init envelope: "+err.Error())
		return nil, abi.StatusBadRequest
	}
	if g.comp == nil {
		Log(LevelError, noComputation)
		return nil, abi.StatusGuestFailure
	}
	g.outputs = in.OutputStreams
	g.maxState = g.comp.MaxStateBytes
	if g.maxState <= 0 {
		n, err := stateLimitParam(newParams(in))
		if err != nil {
			return g.encode(&abi.InitResult{Error: errorText(err)})
		}
		g.maxState = n
	}
	if g.comp.Init != nil {
		if err := g.comp.Init(newParams(in)); err != nil {
			return g.encode(&abi.InitResult{Error: errorText(err)})
		}
	}
	g.initialized = true
	return nil, 0
}

// process handles flowhost_process: it returns the encoded Response, or a
// negative status.
func (g *guest) process(data []byte) (out []byte, status abi.Status) {
	defer recoverPanic("Process", &out, &status)
	if g.comp == nil {
		Log(LevelError, noComputation)
		return nil, abi.StatusGuestFailure
	}
	if g.comp.Init != nil && !g.initialized {
		Log(LevelError, "flowhost: flowhost_process called before a successful flowhost_init")
		return nil, abi.StatusGuestFailure
	}
	req, err := abi.DecodeRequest(data)
	if err != nil {
		return nil, badEnvelope("request", data, err)
	}
	if req.ABI != abi.Version {
		return nil, badEnvelope("request", data, nil)
	}
	if !req.Kind.Valid() {
		Log(LevelError, "flowhost: request of unknown kind "+strconv.Quote(string(req.Kind)))
		return nil, abi.StatusBadRequest
	}
	b := newBatch(req, g.outputs)
	b.maxState = g.maxState
	b.payloads, b.parents = g.payloads[:0], g.parents[:0]
	out, status = g.encode(b.response(g.comp.Process(b)))
	g.payloads, g.parents = b.payloads[:0], b.parents[:0]
	return out, status
}

func (g *guest) encode(v any) ([]byte, abi.Status) {
	switch v := v.(type) {
	case *abi.Response:
		g.out = abi.AppendResponse(g.out[:0], v)
	case *abi.InitResult:
		b, err := abi.EncodeInitResult(v)
		if err != nil {
			Log(LevelError, "flowhost: cannot encode the response: "+err.Error())
			return nil, abi.StatusGuestFailure
		}
		g.out = append(g.out[:0], b...)
	}
	return g.out, 0
}

// Run passes one batch through c the way the host does, envelopes and all,
// but without WebAssembly: it is meant for tests of a computation. When
// init is not nil it is passed to c.Init first. A guest failure comes back
// as an abi.Status error (the panic is logged), a refused init as an error
// carrying the computation's message, a failed batch as a response whose
// Error is set.
func Run(c Computation, init *abi.Init, req *abi.Request) (*abi.Response, error) {
	g := &guest{comp: &c}
	if init != nil {
		b, err := abi.EncodeInit(init)
		if err != nil {
			return nil, err
		}
		out, status := g.init(b)
		if status != 0 {
			return nil, status
		}
		if out != nil {
			r, err := abi.DecodeInitResult(out)
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("flowhost: Init refused to start: %s", r.Error)
		}
	}
	b, err := abi.EncodeRequest(req)
	if err != nil {
		return nil, err
	}
	out, status := g.process(b)
	if status != 0 {
		return nil, status
	}
	return abi.DecodeResponse(out, abi.ResponseLimits{})
}
