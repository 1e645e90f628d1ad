package flowhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/flowhost/flowhost/abi"
)

// Typed state: named cells (a value, a list or a map) layered on a key's
// one state blob, because ABI v1 gives a key exactly one blob. The blob is
// a canonical CBOR map from cell name to cell; the CBOR type of the cell
// says its kind:
//
//	value: byte string            (the element, encoded by the codec)
//	list:  array of byte strings  (the elements in append order)
//	map:   map text -> byte string
//
// Canonical means RFC 8949 core deterministic encoding: shortest heads,
// definite lengths, map keys sorted by their encoded bytes (shorter first,
// then bytewise). The same cells therefore always give the same blob, in
// the Go and the Rust SDK alike, so replays and golden tests compare bytes.
// A cell exists only while it holds something: clearing a cell, or
// deleting the last entry of a map, removes it, and a key left with no
// cells has its state deleted.

// Codec encodes and decodes the elements of typed state cells. [JSON] and
// [CBOR] are the SDK's; any other implementation works as long as Decode
// reads what Encode writes.
type Codec interface {
	// Encode returns v's encoding.
	Encode(v any) ([]byte, error)
	// Decode fills v (a pointer) from data.
	Decode(data []byte, v any) error
}

// JSON encodes elements with encoding/json.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Encode(v any) ([]byte, error)    { return json.Marshal(v) }
func (jsonCodec) Decode(data []byte, v any) error { return json.Unmarshal(data, v) }

// CellError says why a cell cannot be used as asked: it is another kind,
// or an element does not decode or encode. Cell names the cell.
type CellError struct {
	// Cell is the cell's name.
	Cell string
	// Element is "" for the cell as a whole, "element 3" for a list
	// element, `entry "k"` for a map entry.
	Element string
	// Msg says what is wrong.
	Msg string
	// Err is the codec's error, if any.
	Err error
}

// Error reads `state cell "total": Msg` or `state cell "m": entry "k": Msg`.
func (e *CellError) Error() string {
	s := "state cell " + strconv.Quote(e.Cell) + ": "
	if e.Element != "" {
		s += e.Element + ": "
	}
	return s + e.Msg
}

// Unwrap returns the codec's error.
func (e *CellError) Unwrap() error { return e.Err }

// StateError says why a key's state blob is not typed state. Offset is the
// byte of the blob where decoding stopped; Cell is the cell being read, or
// "" outside any cell.
type StateError struct {
	// Offset is the byte offset in the blob.
	Offset int
	// Cell is the cell concerned, or "".
	Cell string
	// Msg says what is wrong.
	Msg string
}

// Error reads `typed state: byte 7: cell "total": Msg`.
func (e *StateError) Error() string {
	s := "typed state: byte " + strconv.Itoa(e.Offset) + ": "
	if e.Cell != "" {
		s += "cell " + strconv.Quote(e.Cell) + ": "
	}
	return s + e.Msg
}

// QuotaError is what SaveState returns when the encoded state is larger
// than the limit (Computation.MaxStateBytes, the parameter
// max_state_bytes_per_key, or the ABI's 16 MiB). Nothing was saved: the
// key's state stays as it was.
type QuotaError struct {
	// Key is the key's text.
	Key string
	// Size is the encoded state's size in bytes.
	Size int
	// Limit is the limit in bytes.
	Limit int
}

// Error reads `key "k": typed state of 20 bytes exceeds the limit of 10 bytes; its state stays as it was`.
func (e *QuotaError) Error() string {
	return "key " + strconv.Quote(e.Key) + ": typed state of " + strconv.Itoa(e.Size) + " bytes exceeds the limit of " +
		strconv.Itoa(e.Limit) + " bytes; its state stays as it was"
}

type cellKind uint8

const (
	kindValue cellKind = iota + 1
	kindList
	kindMap
)

func (c cellKind) String() string {
	switch c {
	case kindValue:
		return "a value"
	case kindList:
		return "a list"
	case kindMap:
		return "a map"
	}
	return "unknown"
}

type cell struct {
	kind  cellKind
	value []byte
	list  [][]byte
	m     map[string][]byte
}

// typedState is a key's cells as the batch has left them so far.
type typedState struct {
	cells map[string]*cell
	dirty bool
	// finish is saveAtEnd, set by the first use of a cell. Reaching it only
	// through this field keeps the encoder out of modules that never use
	// typed state (they pay about 9 KB instead of 80 KB).
	finish func(*Key)
}

// DecodeTypedState decodes a typed state blob into its cells, each as the
// raw bytes the codec wrote: a value cell as []byte, a list as [][]byte,
// a map as map[string][]byte. An empty blob has no cells. Any blob that is
// not typed state fails with a *StateError naming the byte.
func DecodeTypedState(blob []byte) (map[string]any, error) {
	ts, err := decodeTypedState(blob)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(ts.cells))
	for name, c := range ts.cells {
		switch c.kind {
		case kindValue:
			out[name] = c.value
		case kindList:
			out[name] = c.list
		case kindMap:
			out[name] = c.m
		}
	}
	return out, nil
}

func decodeTypedState(blob []byte) (*typedState, error) {
	ts := &typedState{cells: map[string]*cell{}}
	if len(blob) == 0 {
		return ts, nil
	}
	d := &stateDecoder{b: blob}
	n, err := d.head(5, "the state to be a map of cells")
	if err != nil {
		return nil, err
	}
	for range n {
		d.cell = ""
		start := d.off
		name, err := d.text("a cell name (text)")
		if err != nil {
			return nil, err
		}
		if _, dup := ts.cells[name]; dup {
			return nil, &StateError{Offset: start, Cell: name, Msg: "the cell appears twice"}
		}
		d.cell = name
		c, err := d.readCell()
		if err != nil {
			return nil, err
		}
		ts.cells[name] = c
	}
	if d.off != len(blob) {
		return nil, &StateError{Offset: d.off, Msg: strconv.Itoa(len(blob)-d.off) + " bytes after the map of cells"}
	}
	return ts, nil
}

type stateDecoder struct {
	b    []byte
	off  int
	cell string
}

func (d *stateDecoder) fail(off int, msg string) error {
	return &StateError{Offset: off, Cell: d.cell, Msg: msg}
}

var majorNames = [8]string{"an unsigned integer", "a negative integer", "a byte string", "a text string", "an array", "a map", "a tag", "a simple value or float"}

// peekMajor returns the major type of the next item.
func (d *stateDecoder) peekMajor() (byte, error) {
	if d.off >= len(d.b) {
		return 0, d.fail(d.off, "unexpected end of the state")
	}
	return d.b[d.off] >> 5, nil
}

// head reads the head of an item of major type major and returns its
// argument; a length must fit in what is left of the blob.
func (d *stateDecoder) head(major byte, want string) (int, error) {
	start := d.off
	m, err := d.peekMajor()
	if err != nil {
		return 0, err
	}
	if m != major {
		return 0, d.fail(start, "expected "+want+", got "+majorNames[m])
	}
	info := d.b[d.off] & 0x1f
	d.off++
	var arg uint64
	switch {
	case info < 24:
		arg = uint64(info)
	case info <= 27:
		n := 1 << (info - 24)
		if len(d.b)-d.off < n {
			return 0, d.fail(start, "unexpected end of the state in an item's head")
		}
		for _, c := range d.b[d.off : d.off+n] {
			arg = arg<<8 | uint64(c)
		}
		d.off += n
	case info == 31:
		return 0, d.fail(start, "indefinite lengths are not canonical")
	default:
		return 0, d.fail(start, "reserved additional information "+strconv.Itoa(int(info)))
	}
	// Every element takes at least one byte, so a count larger than the
	// rest of the blob is wrong, and checking it bounds allocations.
	if arg > uint64(len(d.b)-d.off) {
		return 0, d.fail(start, "a length of "+strconv.FormatUint(arg, 10)+" exceeds the "+strconv.Itoa(len(d.b)-d.off)+" bytes left")
	}
	return int(arg), nil
}

func (d *stateDecoder) bytes(want string) ([]byte, error) {
	n, err := d.head(2, want)
	if err != nil {
		return nil, err
	}
	p := slices.Clone(d.b[d.off : d.off+n])
	d.off += n
	return p, nil
}

func (d *stateDecoder) text(want string) (string, error) {
	start := d.off
	n, err := d.head(3, want)
	if err != nil {
		return "", err
	}
	s := d.b[d.off : d.off+n]
	if !utf8.Valid(s) {
		return "", d.fail(start, "text is not valid UTF-8")
	}
	d.off += n
	return string(s), nil
}

func (d *stateDecoder) readCell() (*cell, error) {
	m, err := d.peekMajor()
	if err != nil {
		return nil, err
	}
	switch m {
	case 2:
		v, err := d.bytes("")
		return &cell{kind: kindValue, value: v}, err
	case 4:
		start := d.off
		n, err := d.head(4, "")
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, d.fail(start, "an empty list is not stored (a cell exists only while it holds something)")
		}
		c := &cell{kind: kindList, list: make([][]byte, 0, n)}
		for i := range n {
			e, err := d.bytes("list element " + strconv.Itoa(i) + " to be a byte string")
			if err != nil {
				return nil, err
			}
			c.list = append(c.list, e)
		}
		return c, nil
	case 5:
		start := d.off
		n, err := d.head(5, "")
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, d.fail(start, "an empty map is not stored (a cell exists only while it holds something)")
		}
		c := &cell{kind: kindMap, m: make(map[string][]byte, n)}
		for range n {
			kstart := d.off
			k, err := d.text("a map entry's key (text)")
			if err != nil {
				return nil, err
			}
			if _, dup := c.m[k]; dup {
				return nil, d.fail(kstart, "map key "+strconv.Quote(k)+" appears twice")
			}
			e, err := d.bytes("map entry " + strconv.Quote(k) + " to be a byte string")
			if err != nil {
				return nil, err
			}
			c.m[k] = e
		}
		return c, nil
	}
	return nil, d.fail(d.off, "expected a cell (a byte string, an array or a map), got "+majorNames[m])
}

func appendStateHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// canonicalKeys returns m's keys in the order of their CBOR encoding:
// shorter first, then bytewise.
func canonicalKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return bytes.Compare([]byte(a), []byte(b))
	})
	return keys
}

// encode returns the canonical blob of the cells.
func (ts *typedState) encode() []byte {
	b := appendStateHead(nil, 5, uint64(len(ts.cells)))
	for _, name := range canonicalKeys(ts.cells) {
		b = appendStateHead(b, 3, uint64(len(name)))
		b = append(b, name...)
		c := ts.cells[name]
		switch c.kind {
		case kindValue:
			b = appendStateHead(b, 2, uint64(len(c.value)))
			b = append(b, c.value...)
		case kindList:
			b = appendStateHead(b, 4, uint64(len(c.list)))
			for _, e := range c.list {
				b = appendStateHead(b, 2, uint64(len(e)))
				b = append(b, e...)
			}
		case kindMap:
			b = appendStateHead(b, 5, uint64(len(c.m)))
			for _, k := range canonicalKeys(c.m) {
				b = appendStateHead(b, 3, uint64(len(k)))
				b = append(b, k...)
				e := c.m[k]
				b = appendStateHead(b, 2, uint64(len(e)))
				b = append(b, e...)
			}
		}
	}
	return b
}

// typedState returns the key's cells, decoding the state on first use.
func (k *Key) typedState() (*typedState, error) {
	if k.typed != nil {
		return k.typed, nil
	}
	blob, _ := k.State()
	ts, err := decodeTypedState(blob)
	if err != nil {
		return nil, err
	}
	ts.finish = (*Key).saveAtEnd
	k.typed = ts
	return ts, nil
}

// cellOf returns the cell name when it is of kind want, nil when there is
// none, and a *CellError when it is another kind.
func (k *Key) cellOf(name string, want cellKind) (*typedState, *cell, error) {
	ts, err := k.typedState()
	if err != nil {
		return nil, nil, err
	}
	c := ts.cells[name]
	if c != nil && c.kind != want {
		return nil, nil, &CellError{Cell: name, Msg: "is " + c.kind.String() + ", used as " + want.String()}
	}
	return ts, c, nil
}

func (k *Key) clearCell(name string) error {
	k.requireTransform("clearing a state cell")
	ts, err := k.typedState()
	if err != nil {
		return err
	}
	if _, ok := ts.cells[name]; ok {
		delete(ts.cells, name)
		ts.dirty = true
	}
	return nil
}

func encodeElem(c Codec, cellName, elem string, v any) ([]byte, error) {
	p, err := c.Encode(v)
	if err != nil {
		return nil, &CellError{Cell: cellName, Element: elem, Msg: "cannot encode: " + err.Error(), Err: err}
	}
	return p, nil
}

func decodeElem[T any](c Codec, cellName, elem string, p []byte) (T, error) {
	var v T
	if err := c.Decode(p, &v); err != nil {
		return v, &CellError{Cell: cellName, Element: elem, Msg: "cannot decode: " + err.Error(), Err: err}
	}
	return v, nil
}

// ValueCell is a state cell holding one value of type T.
type ValueCell[T any] struct {
	k     *Key
	name  string
	codec Codec
}

// Value returns the key's value cell name, whose element is encoded with
// codec. The cell is read from the key's state on first use of any cell;
// writes are kept until SaveState or the end of the batch.
func Value[T any](k *Key, name string, codec Codec) *ValueCell[T] {
	return &ValueCell[T]{k: k, name: name, codec: codec}
}

// Get returns the value; ok is false when the cell does not exist. It
// fails with a *CellError when the cell is another kind or does not
// decode as T, with a *StateError when the key's state is not typed state.
func (c *ValueCell[T]) Get() (v T, ok bool, err error) {
	_, cl, err := c.k.cellOf(c.name, kindValue)
	if err != nil || cl == nil {
		return v, false, err
	}
	v, err = decodeElem[T](c.codec, c.name, "", cl.value)
	return v, err == nil, err
}

// Set replaces the value, creating the cell. It fails (changing nothing)
// when the cell is another kind or v does not encode. It panics in a map
// computation.
func (c *ValueCell[T]) Set(v T) error {
	c.k.requireTransform("Value.Set")
	ts, _, err := c.k.cellOf(c.name, kindValue)
	if err != nil {
		return err
	}
	p, err := encodeElem(c.codec, c.name, "", v)
	if err != nil {
		return err
	}
	ts.cells[c.name] = &cell{kind: kindValue, value: p}
	ts.dirty = true
	return nil
}

// Clear removes the cell, whatever its kind. It panics in a map
// computation.
func (c *ValueCell[T]) Clear() error { return c.k.clearCell(c.name) }

// ListCell is a state cell holding a list of T in append order.
type ListCell[T any] struct {
	k     *Key
	name  string
	codec Codec
}

// List returns the key's list cell name, whose elements are encoded with
// codec. Like Value, writes are kept until SaveState or the end of the
// batch.
func List[T any](k *Key, name string, codec Codec) *ListCell[T] {
	return &ListCell[T]{k: k, name: name, codec: codec}
}

// Append adds v at the end, creating the cell. It fails (changing
// nothing) when the cell is another kind or v does not encode. It panics
// in a map computation.
func (c *ListCell[T]) Append(v T) error {
	c.k.requireTransform("List.Append")
	ts, cl, err := c.k.cellOf(c.name, kindList)
	if err != nil {
		return err
	}
	n := 0
	if cl != nil {
		n = len(cl.list)
	}
	p, err := encodeElem(c.codec, c.name, "element "+strconv.Itoa(n), v)
	if err != nil {
		return err
	}
	if cl == nil {
		cl = &cell{kind: kindList}
		ts.cells[c.name] = cl
	}
	cl.list = append(cl.list, p)
	ts.dirty = true
	return nil
}

// All returns the elements in append order; none when the cell does not
// exist. It fails with a *CellError naming the element that does not
// decode, or when the cell is another kind.
func (c *ListCell[T]) All() ([]T, error) {
	_, cl, err := c.k.cellOf(c.name, kindList)
	if err != nil || cl == nil {
		return nil, err
	}
	out := make([]T, 0, len(cl.list))
	for i, p := range cl.list {
		v, err := decodeElem[T](c.codec, c.name, "element "+strconv.Itoa(i), p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Len returns the number of elements, without decoding them.
func (c *ListCell[T]) Len() (int, error) {
	_, cl, err := c.k.cellOf(c.name, kindList)
	if err != nil || cl == nil {
		return 0, err
	}
	return len(cl.list), nil
}

// Clear removes the cell, whatever its kind. It panics in a map
// computation.
func (c *ListCell[T]) Clear() error { return c.k.clearCell(c.name) }

// MapCell is a state cell holding T values by text key.
type MapCell[T any] struct {
	k     *Key
	name  string
	codec Codec
}

// Map returns the key's map cell name, whose values are encoded with
// codec. Like Value, writes are kept until SaveState or the end of the
// batch.
func Map[T any](k *Key, name string, codec Codec) *MapCell[T] {
	return &MapCell[T]{k: k, name: name, codec: codec}
}

// Get returns the entry's value; ok is false when there is none. It fails
// with a *CellError when the cell is another kind or the entry does not
// decode.
func (c *MapCell[T]) Get(key string) (v T, ok bool, err error) {
	_, cl, err := c.k.cellOf(c.name, kindMap)
	if err != nil || cl == nil {
		return v, false, err
	}
	p, ok := cl.m[key]
	if !ok {
		return v, false, nil
	}
	v, err = decodeElem[T](c.codec, c.name, "entry "+strconv.Quote(key), p)
	return v, err == nil, err
}

// Put sets the entry, creating the cell. It fails (changing nothing) when
// the cell is another kind, key is not valid UTF-8 or v does not encode.
// It panics in a map computation.
func (c *MapCell[T]) Put(key string, v T) error {
	c.k.requireTransform("Map.Put")
	ts, cl, err := c.k.cellOf(c.name, kindMap)
	if err != nil {
		return err
	}
	elem := "entry " + strconv.Quote(key)
	if !utf8.ValidString(key) {
		return &CellError{Cell: c.name, Element: elem, Msg: "the key is not valid UTF-8"}
	}
	p, err := encodeElem(c.codec, c.name, elem, v)
	if err != nil {
		return err
	}
	if cl == nil {
		cl = &cell{kind: kindMap, m: map[string][]byte{}}
		ts.cells[c.name] = cl
	}
	cl.m[key] = p
	ts.dirty = true
	return nil
}

// Delete removes the entry; deleting the last one removes the cell. It
// fails when the cell is another kind. It panics in a map computation.
func (c *MapCell[T]) Delete(key string) error {
	c.k.requireTransform("Map.Delete")
	ts, cl, err := c.k.cellOf(c.name, kindMap)
	if err != nil || cl == nil {
		return err
	}
	if _, ok := cl.m[key]; !ok {
		return nil
	}
	delete(cl.m, key)
	if len(cl.m) == 0 {
		delete(ts.cells, c.name)
	}
	ts.dirty = true
	return nil
}

// Keys returns the entries' keys in sorted (bytewise) order.
func (c *MapCell[T]) Keys() ([]string, error) {
	_, cl, err := c.k.cellOf(c.name, kindMap)
	if err != nil || cl == nil {
		return nil, err
	}
	keys := make([]string, 0, len(cl.m))
	for k := range cl.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Len returns the number of entries.
func (c *MapCell[T]) Len() (int, error) {
	_, cl, err := c.k.cellOf(c.name, kindMap)
	if err != nil || cl == nil {
		return 0, err
	}
	return len(cl.m), nil
}

// Clear removes the cell, whatever its kind. It panics in a map
// computation.
func (c *MapCell[T]) Clear() error { return c.k.clearCell(c.name) }

// MaxStateParam is the computation parameter that sets the typed state
// limit when Computation.MaxStateBytes is 0: set it to the tenant's
// quotas.max_state_bytes_per_key, which the guest is not told, so that
// SaveState refuses what the host would.
const MaxStateParam = "max_state_bytes_per_key"

// stateLimit is the limit SaveState applies: the ABI's bound unless a
// smaller one was configured.
func (b *Batch) stateLimit() int {
	abiMax := abi.DefaultResponseLimits().MaxStateBytes
	if b.maxState > 0 && b.maxState < abiMax {
		return b.maxState
	}
	return abiMax
}

// SaveState writes the key's typed cells into its state, once, however
// many cells changed: it sets the canonical blob, or deletes the state
// when no cell is left. When the blob is larger than the limit it returns
// a *QuotaError and the key's state stays as it was; the changes stay
// pending, so a later SaveState (after clearing cells, say) may succeed.
//
// Changes not saved when Process returns are saved then, and an error at
// that point fails the key (Key.Fail) with it: typed writes are never lost
// silently. SaveState with no pending changes does nothing.
func SaveState(k *Key) error {
	ts := k.typed
	if ts == nil || !ts.dirty {
		return nil
	}
	k.requireTransform("SaveState")
	if len(ts.cells) == 0 {
		if _, had := k.State(); had {
			k.out.StateOp, k.out.State = abi.StateDelete, nil
		}
		ts.dirty = false
		return nil
	}
	blob := ts.encode()
	if limit := k.batch.stateLimit(); len(blob) > limit {
		return &QuotaError{Key: k.in.Key, Size: len(blob), Limit: limit}
	}
	k.out.StateOp, k.out.State = abi.StateReplace, blob
	ts.dirty = false
	return nil
}

// DiscardStateChanges drops the key's unsaved typed changes: the next use
// of a cell reads the state as it is (as stored, or as last saved).
func DiscardStateChanges(k *Key) { k.typed = nil }

// saveAtEnd saves what Process left unsaved, failing the key on error.
func (k *Key) saveAtEnd() {
	if k.err != nil || k.typed == nil || !k.typed.dirty {
		return
	}
	if err := SaveState(k); err != nil {
		k.Fail(fmt.Errorf("saving typed state at the end of the batch: %w", err))
	}
}

// checkRawState keeps a raw SetState or DeleteState from silently
// overwriting, or being overwritten by, unsaved typed changes.
func (k *Key) checkRawState(call string) {
	if k.typed != nil && k.typed.dirty {
		panic("flowhost: " + call + " with unsaved typed state changes; call SaveState or DiscardStateChanges first")
	}
	k.typed = nil // the next typed use reads the new state
}

// stateLimitParam reads MaxStateParam: 0 when it is not set.
func stateLimitParam(p Params) (int, error) {
	if !p.Has(MaxStateParam) {
		return 0, nil
	}
	n, err := p.Int(MaxStateParam)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, &ParamError{Name: MaxStateParam, Msg: "expected a positive number of bytes, got " + strconv.FormatInt(n, 10)}
	}
	return int(min(n, int64(abi.DefaultResponseLimits().MaxStateBytes))), nil
}
