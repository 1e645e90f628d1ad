package engine

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ModuleInfo is what a module imports and exports, read from its binary
// without compiling it.
type ModuleInfo struct {
	// Imports in declaration order.
	Imports []Import
	// Exports in declaration order.
	Exports []Export
}

// Export returns the export called name.
func (m *ModuleInfo) Export(name string) (Export, bool) {
	for _, e := range m.Exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}

// Import is one import of a module.
type Import struct {
	Module string
	Name   string
	Kind   ExternKind
	// Func is the signature when Kind is KindFunc.
	Func FuncType
	// Memory is the memory type when Kind is KindMemory.
	Memory MemoryType
}

// String returns "module.name", the form every error uses.
func (i Import) String() string { return i.Module + "." + i.Name }

// Export is one export of a module.
type Export struct {
	Name string
	Kind ExternKind
	// Func is the signature when Kind is KindFunc.
	Func FuncType
	// Memory is the memory type when Kind is KindMemory.
	Memory MemoryType
}

// ExternKind is what an import or export is.
type ExternKind byte

// The kinds of imports and exports, numbered as in the binary format.
const (
	KindFunc   ExternKind = 0
	KindTable  ExternKind = 1
	KindMemory ExternKind = 2
	KindGlobal ExternKind = 3
	KindTag    ExternKind = 4
)

func (k ExternKind) String() string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	case KindTag:
		return "tag"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// ValueType is a WebAssembly value type, encoded as in the binary format.
type ValueType byte

// The value types of WebAssembly 2.0.
const (
	I32       ValueType = 0x7f
	I64       ValueType = 0x7e
	F32       ValueType = 0x7d
	F64       ValueType = 0x7c
	V128      ValueType = 0x7b
	FuncRef   ValueType = 0x70
	ExternRef ValueType = 0x6f
)

func (v ValueType) String() string {
	switch v {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("valtype(%#x)", byte(v))
}

// FuncType is a function signature.
type FuncType struct {
	Params  []ValueType
	Results []ValueType
}

// Func returns the signature with the given parameters and results.
func Func(params []ValueType, results ...ValueType) FuncType {
	return FuncType{Params: params, Results: results}
}

// Equal reports whether t and o have the same parameters and results.
func (t FuncType) Equal(o FuncType) bool {
	return valueTypesEqual(t.Params, o.Params) && valueTypesEqual(t.Results, o.Results)
}

// String renders the signature as "(i32, i32) -> i64", with "()" for no
// parameters or results.
func (t FuncType) String() string {
	return valueTypesString(t.Params) + " -> " + valueTypesString(t.Results)
}

func valueTypesEqual(a, b []ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func valueTypesString(ts []ValueType) string {
	if len(ts) == 1 {
		return ts[0].String()
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// MemoryType is a linear memory's size limits in 64 KiB pages.
type MemoryType struct {
	Min    uint64
	Max    uint64
	HasMax bool
	Shared bool
	// Is64 marks a memory64 memory, addressed with i64.
	Is64 bool
}

// Inspect reads the imports and exports of a WebAssembly binary module
// without compiling it, so it is cheap and engine-neutral. It checks the
// structure of the sections it reads (types, imports, functions, memories,
// exports) and the framing of the others, but it is not a validator: a
// module Inspect accepts can still fail to compile. An error gives the
// offset of the byte where the problem starts.
func Inspect(wasm []byte) (*ModuleInfo, error) {
	p := parser{b: wasm}
	info, err := p.module()
	if err != nil {
		return nil, fmt.Errorf("invalid wasm at offset %#x: %w", p.off, err)
	}
	return info, nil
}

// Section ids of the binary format, in the order they must appear.
const (
	sectionCustom   = 0
	sectionType     = 1
	sectionImport   = 2
	sectionFunction = 3
	sectionMemory   = 5
	sectionExport   = 7
	sectionTag      = 13
)

var (
	errEOF      = errors.New("unexpected end")
	errOverflow = errors.New("integer too large")
)

type parser struct {
	b   []byte
	off int
}

func (p *parser) module() (*ModuleInfo, error) {
	magic, err := p.bytes(4)
	if err != nil {
		return nil, errors.New("too short for a wasm module")
	}
	if string(magic) != "\x00asm" {
		return nil, errors.New(`not a wasm module: missing "\0asm" magic`)
	}
	version, err := p.bytes(4)
	if err != nil {
		return nil, errors.New("too short for a wasm module")
	}
	switch {
	case string(version) == "\x01\x00\x00\x00":
	case version[2] == 1 && version[3] == 0:
		return nil, errors.New("a WebAssembly component, not a core module")
	default:
		return nil, fmt.Errorf("unsupported wasm version % x", version)
	}

	var (
		m       ModuleInfo
		types   []FuncType
		funcs   []uint32 // type index of every function: imports, then definitions
		mems    []MemoryType
		lastID  byte
		defined bool // any non-custom section seen, for ordering
	)
	for p.off < len(p.b) {
		// Errors about a whole section point at its first byte.
		start := p.off
		id, _ := p.u8()
		size, err := p.u32()
		if err != nil {
			p.off = start
			return nil, fmt.Errorf("section %d: size: %w", id, err)
		}
		if uint64(size) > uint64(len(p.b)-p.off) {
			left := len(p.b) - p.off
			p.off = start
			return nil, fmt.Errorf("section %d: size %d exceeds the %d bytes left", id, size, left)
		}
		end := p.off + int(size)
		if id > sectionTag {
			p.off = start
			return nil, fmt.Errorf("unknown section id %d", id)
		}
		if id != sectionCustom {
			if defined && sectionOrder(id) <= sectionOrder(lastID) {
				p.off = start
				return nil, fmt.Errorf("section %d out of order or repeated after section %d", id, lastID)
			}
			lastID, defined = id, true
		}
		body := parser{b: p.b[:end], off: p.off}
		switch id {
		case sectionType:
			types, err = body.typeSection()
		case sectionImport:
			err = body.importSection(&m, types, &funcs, &mems)
		case sectionFunction:
			err = body.functionSection(types, &funcs)
		case sectionMemory:
			err = body.memorySection(&mems)
		case sectionExport:
			err = body.exportSection(&m, types, funcs, mems)
		default:
			body.off = end
		}
		if err == nil && body.off != end {
			err = fmt.Errorf("%d bytes left over", end-body.off)
		}
		if err != nil {
			p.off = body.off
			return nil, fmt.Errorf("%s section: %w", sectionName(id), err)
		}
		p.off = end
	}
	return &m, nil
}

// sectionOrder ranks section ids by their required position; the data
// count (12) and tag (13) sections come before code (10).
func sectionOrder(id byte) int {
	switch id {
	case 12:
		return 95
	case sectionTag:
		return 55 // after memory (5), before global (6)
	}
	return int(id) * 10
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count", "tag"}
	return names[id]
}

func (p *parser) typeSection() ([]FuncType, error) {
	n, err := p.count()
	if err != nil {
		return nil, err
	}
	types := make([]FuncType, n)
	for i := range types {
		form, err := p.u8()
		if err != nil {
			return nil, err
		}
		if form != 0x60 {
			p.off--
			return nil, fmt.Errorf("type %d: unsupported form %#x (only function types)", i, form)
		}
		if types[i].Params, err = p.valueTypes(); err != nil {
			return nil, fmt.Errorf("type %d: %w", i, err)
		}
		if types[i].Results, err = p.valueTypes(); err != nil {
			return nil, fmt.Errorf("type %d: %w", i, err)
		}
	}
	return types, nil
}

func (p *parser) importSection(m *ModuleInfo, types []FuncType, funcs *[]uint32, mems *[]MemoryType) error {
	n, err := p.count()
	if err != nil {
		return err
	}
	m.Imports = make([]Import, 0, n)
	for i := 0; i < n; i++ {
		var imp Import
		if imp.Module, err = p.name(); err != nil {
			return fmt.Errorf("import %d: module: %w", i, err)
		}
		if imp.Name, err = p.name(); err != nil {
			return fmt.Errorf("import %d: name: %w", i, err)
		}
		kind, err := p.u8()
		if err != nil {
			return err
		}
		imp.Kind = ExternKind(kind)
		switch imp.Kind {
		case KindFunc:
			idx, err := p.typeIndex(types)
			if err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
			imp.Func = types[idx]
			*funcs = append(*funcs, idx)
		case KindTable:
			if _, err := p.valueType(); err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
			if _, err := p.limits(); err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
		case KindMemory:
			if imp.Memory, err = p.limits(); err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
			*mems = append(*mems, imp.Memory)
		case KindGlobal:
			if _, err := p.valueType(); err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
			if mut, err := p.u8(); err != nil || mut > 1 {
				return fmt.Errorf("import %s: bad global mutability", imp)
			}
		case KindTag:
			if attr, err := p.u8(); err != nil || attr != 0 {
				return fmt.Errorf("import %s: bad tag attribute", imp)
			}
			if _, err := p.typeIndex(types); err != nil {
				return fmt.Errorf("import %s: %w", imp, err)
			}
		default:
			p.off--
			return fmt.Errorf("import %s: unknown kind %#x", imp, kind)
		}
		m.Imports = append(m.Imports, imp)
	}
	return nil
}

func (p *parser) functionSection(types []FuncType, funcs *[]uint32) error {
	n, err := p.count()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		idx, err := p.typeIndex(types)
		if err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
		*funcs = append(*funcs, idx)
	}
	return nil
}

func (p *parser) memorySection(mems *[]MemoryType) error {
	n, err := p.count()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		mem, err := p.limits()
		if err != nil {
			return fmt.Errorf("memory %d: %w", i, err)
		}
		*mems = append(*mems, mem)
	}
	return nil
}

func (p *parser) exportSection(m *ModuleInfo, types []FuncType, funcs []uint32, mems []MemoryType) error {
	n, err := p.count()
	if err != nil {
		return err
	}
	m.Exports = make([]Export, 0, n)
	for i := 0; i < n; i++ {
		var exp Export
		if exp.Name, err = p.name(); err != nil {
			return fmt.Errorf("export %d: name: %w", i, err)
		}
		kind, err := p.u8()
		if err != nil {
			return err
		}
		exp.Kind = ExternKind(kind)
		idxStart := p.off
		idx, err := p.u32()
		if err != nil {
			return fmt.Errorf("export %q: index: %w", exp.Name, err)
		}
		switch exp.Kind {
		case KindFunc:
			if uint64(idx) >= uint64(len(funcs)) {
				p.off = idxStart
				return fmt.Errorf("export %q: function %d does not exist", exp.Name, idx)
			}
			exp.Func = types[funcs[idx]]
		case KindMemory:
			if uint64(idx) >= uint64(len(mems)) {
				p.off = idxStart
				return fmt.Errorf("export %q: memory %d does not exist", exp.Name, idx)
			}
			exp.Memory = mems[idx]
		case KindTable, KindGlobal, KindTag:
		default:
			p.off = idxStart - 1
			return fmt.Errorf("export %q: unknown kind %#x", exp.Name, kind)
		}
		m.Exports = append(m.Exports, exp)
	}
	return nil
}

func (p *parser) typeIndex(types []FuncType) (uint32, error) {
	start := p.off
	idx, err := p.u32()
	if err != nil {
		return 0, err
	}
	if uint64(idx) >= uint64(len(types)) {
		p.off = start
		return 0, fmt.Errorf("type %d does not exist", idx)
	}
	return idx, nil
}

func (p *parser) limits() (MemoryType, error) {
	flags, err := p.u8()
	if err != nil {
		return MemoryType{}, err
	}
	if flags > 7 {
		p.off--
		return MemoryType{}, fmt.Errorf("bad limits flags %#x", flags)
	}
	mem := MemoryType{HasMax: flags&1 != 0, Shared: flags&2 != 0, Is64: flags&4 != 0}
	read := p.u32as64
	if mem.Is64 {
		read = p.u64
	}
	if mem.Min, err = read(); err != nil {
		return MemoryType{}, err
	}
	if mem.HasMax {
		if mem.Max, err = read(); err != nil {
			return MemoryType{}, err
		}
	}
	return mem, nil
}

func (p *parser) valueTypes() ([]ValueType, error) {
	n, err := p.count()
	if err != nil {
		return nil, err
	}
	ts := make([]ValueType, n)
	for i := range ts {
		if ts[i], err = p.valueType(); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (p *parser) valueType() (ValueType, error) {
	b, err := p.u8()
	if err != nil {
		return 0, err
	}
	switch t := ValueType(b); t {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return t, nil
	}
	p.off--
	return 0, fmt.Errorf("unsupported value type %#x", b)
}

// count reads a vector length. Every element takes at least one byte, so a
// count beyond the bytes left is malformed; refusing it early keeps a
// hostile length from allocating.
func (p *parser) count() (int, error) {
	start := p.off
	n, err := p.u32()
	if err != nil {
		return 0, err
	}
	if left := len(p.b) - p.off; uint64(n) > uint64(left) {
		p.off = start
		return 0, fmt.Errorf("count %d exceeds the %d bytes left", n, left)
	}
	return int(n), nil
}

func (p *parser) name() (string, error) {
	start := p.off
	n, err := p.count()
	if err != nil {
		return "", err
	}
	b, err := p.bytes(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		p.off = start
		return "", errors.New("name is not valid UTF-8")
	}
	return string(b), nil
}

func (p *parser) bytes(n int) ([]byte, error) {
	if n > len(p.b)-p.off {
		return nil, errEOF
	}
	b := p.b[p.off : p.off+n]
	p.off += n
	return b, nil
}

func (p *parser) u8() (byte, error) {
	if p.off >= len(p.b) {
		return 0, errEOF
	}
	b := p.b[p.off]
	p.off++
	return b, nil
}

func (p *parser) u32() (uint32, error) {
	v, err := p.leb128(32)
	return uint32(v), err
}

func (p *parser) u32as64() (uint64, error) { return p.leb128(32) }

func (p *parser) u64() (uint64, error) { return p.leb128(64) }

// leb128 reads an unsigned LEB128 integer of at most bits bits, refusing
// overlong encodings whose unused high bits are set, as the spec does.
func (p *parser) leb128(bits uint) (uint64, error) {
	start := p.off
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := p.u8()
		if err != nil {
			return 0, err
		}
		if shift+7 > bits && b>>(bits-shift) != 0 {
			// The last byte allowed: bits beyond the width, or a
			// continuation bit, overflow.
			p.off = start
			return 0, errOverflow
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, nil
		}
	}
}
