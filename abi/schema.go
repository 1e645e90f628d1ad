package abi

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The checker below holds the rules of the strict decoders and words their
// errors. It reads only item heads (major type, argument, length) to walk
// the envelope once, without allocating, and reports the first violation
// with its field path. The decoder (decode.go) enforces the same rules in
// its own pass and, at a violation, asks the checker for the error; the
// checker alone also guards EncodeInit's free-form parameters. The schema
// is derived from the envelope types' cbor tags, which stay the definition
// of the wire format: the specialised codec spells the same names by hand,
// and its tests hold it to the reference codec that reads the tags
// (reference_test.go).

// maxNesting bounds how deeply arrays and maps may nest in any envelope. The
// fixed parts of the envelopes need at most 6 levels; the rest is headroom
// for Init parameters.
const maxNesting = 32

type schemaKind uint8

const (
	kindUint   schemaKind = iota // major type 0, at most node.max
	kindInt                      // major type 0 or 1, within int64
	kindText                     // major type 3, valid UTF-8
	kindBytes                    // major type 2
	kindArray                    // major type 4 of node.elem
	kindStruct                   // major type 5 with node.fields as keys
	kindMapAny                   // major type 5 with text keys and kindAny values
	kindAny                      // a parameter value: no tags, no undefined
)

// counter names a limit that an array's elements or a byte string's length
// count against.
type counter uint8

const (
	counterNone counter = iota
	counterEmits
	counterTimers
	counterStateBytes
)

type schemaNode struct {
	kind   schemaKind
	max    uint64        // kindUint: the largest value the Go field holds
	elem   *schemaNode   // kindArray
	fields []schemaField // kindStruct
	// nonEmpty: a present array must have an element (Emit.Parents, where
	// an empty list would silently mean "every input").
	nonEmpty bool
	counter  counter
	required uint64 // kindStruct: bit i set when fields[i] is required
}

type schemaField struct {
	name     string
	node     *schemaNode
	required bool
}

var (
	requestSchema    = schemaOf(reflect.TypeFor[Request]())
	responseSchema   = schemaOf(reflect.TypeFor[Response]())
	initSchema       = schemaOf(reflect.TypeFor[Init]())
	initResultSchema = schemaOf(reflect.TypeFor[InitResult]())
)

func init() {
	keys := responseSchema.field("keys").elem
	keys.field("emits").counter = counterEmits
	keys.field("emits").elem.field("parents").nonEmpty = true
	keys.field("timers_set").counter = counterTimers
	keys.field("timers_cancel").counter = counterTimers
	keys.field("state").counter = counterStateBytes
}

// field returns the schema of the named field; it panics on a name the
// type does not have, which only a wrong literal in this package can cause.
func (n *schemaNode) field(name string) *schemaNode {
	for _, f := range n.fields {
		if f.name == name {
			return f.node
		}
	}
	panic("abi: schema has no field " + name)
}

// schemaOf derives the wire schema of an envelope type from its cbor tags.
func schemaOf(t reflect.Type) *schemaNode {
	switch t.Kind() {
	case reflect.String:
		return &schemaNode{kind: kindText}
	case reflect.Int64:
		return &schemaNode{kind: kindInt}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &schemaNode{kind: kindUint, max: math.MaxUint64 >> (64 - t.Bits())}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &schemaNode{kind: kindBytes}
		}
		return &schemaNode{kind: kindArray, elem: schemaOf(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Interface {
			return &schemaNode{kind: kindMapAny}
		}
	case reflect.Struct:
		n := &schemaNode{kind: kindStruct}
		for i := range t.NumField() {
			sf := t.Field(i)
			name, opts, _ := strings.Cut(sf.Tag.Get("cbor"), ",")
			ft := sf.Type
			optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			if ft.Kind() == reflect.Pointer {
				ft, optional = ft.Elem(), true
			}
			n.fields = append(n.fields, schemaField{name: name, node: schemaOf(ft), required: !optional})
		}
		if len(n.fields) > 64 {
			panic("abi: more than 64 fields in " + t.String())
		}
		for i, f := range n.fields {
			if f.required {
				n.required |= 1 << i
			}
		}
		return n
	}
	panic("abi: no wire schema for " + t.String())
}

// checker walks one encoded envelope against a schema. It tracks no path
// while it walks: a violation is returned as a checkError and every
// container it passes through on the way out adds its own step, so that
// the success path pays nothing for paths.
type checker struct {
	data   []byte
	off    int
	limits ResponseLimits
	emits  int
	timers int
}

// pathSegment is one step of a field path: a field name, or an index when
// name is empty.
type pathSegment struct {
	name  string
	index int
}

type checkError struct {
	msg string
	rev []pathSegment // innermost step first
}

func failure(msg string) *checkError { return &checkError{msg: msg} }

func (e *checkError) in(name string) *checkError {
	e.rev = append(e.rev, pathSegment{name: name})
	return e
}

func (e *checkError) at(index int) *checkError {
	e.rev = append(e.rev, pathSegment{index: index})
	return e
}

func (e *checkError) toError() *Error {
	var b strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		s := e.rev[i]
		switch {
		case s.name == "":
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case isIdentifier(s.name):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(s.name))
			b.WriteByte(']')
		}
	}
	return &Error{Field: b.String(), Msg: e.msg}
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !letter && (i == 0 || !('0' <= r && r <= '9') && r != '-') {
			return false
		}
	}
	return true
}

// check reports the first violation of schema n in data, or nil when data
// is exactly one envelope that fits it.
func check(data []byte, n *schemaNode, limits ResponseLimits) *Error {
	if len(data) == 0 {
		return &Error{Msg: "empty envelope"}
	}
	c := checker{data: data, limits: limits}
	if err := c.value(n, 0); err != nil {
		return err.toError()
	}
	if rest := len(data) - c.off; rest > 0 {
		return &Error{Msg: strconv.Itoa(rest) + " trailing bytes after the envelope"}
	}
	return nil
}

// head reads one item head. For major types 0, 1 and 6 arg is the value,
// for 2 to 5 the length or count, for 7 the simple value or the raw float
// bits; info is the head's additional information.
func (c *checker) head() (major, info byte, arg uint64, err *checkError) {
	if c.off >= len(c.data) {
		return 0, 0, 0, failure("unexpected end of data")
	}
	b := c.data[c.off]
	major, info = b>>5, b&0x1f
	c.off++
	var n int
	switch {
	case info < 24:
		return major, info, uint64(info), nil
	case info <= 27:
		n = 1 << (info - 24)
	case info == 31:
		switch major {
		case 2, 3, 4, 5:
			return 0, 0, 0, failure("indefinite-length " + majorNames[major] + " is not allowed")
		case 7:
			return 0, 0, 0, failure("unexpected break")
		}
		fallthrough
	default:
		return 0, 0, 0, failure("malformed item head 0x" + strconv.FormatUint(uint64(b), 16))
	}
	if len(c.data)-c.off < n {
		return 0, 0, 0, failure("unexpected end of data")
	}
	for _, x := range c.data[c.off : c.off+n] {
		arg = arg<<8 | uint64(x)
	}
	c.off += n
	if major == 7 && info == 24 && arg < 32 {
		return 0, 0, 0, failure("malformed simple value " + strconv.FormatUint(arg, 10))
	}
	return major, info, arg, nil
}

var majorNames = [8]string{"uint", "negative int", "byte string", "text string", "array", "map", "tag", "simple value"}

// describe names the type of an item for "expected X, got Y" messages.
func describe(major, info byte, arg uint64) string {
	if major != 7 {
		return majorNames[major]
	}
	switch {
	case info == 20 || info == 21:
		return "bool"
	case info == 22:
		return "null"
	case info == 23:
		return "undefined"
	case info >= 25 && info <= 27:
		return "float"
	}
	return "simple value " + strconv.FormatUint(arg, 10)
}

var expectedNames = [...]string{
	kindUint:   "uint",
	kindInt:    "int",
	kindText:   "text string",
	kindBytes:  "byte string",
	kindArray:  "array",
	kindStruct: "map",
	kindMapAny: "map",
}

func mismatch(n *schemaNode, major, info byte, arg uint64) *checkError {
	return failure("expected " + expectedNames[n.kind] + ", got " + describe(major, info, arg))
}

func (c *checker) value(n *schemaNode, depth int) *checkError {
	major, info, arg, err := c.head()
	if err != nil {
		return err
	}
	switch n.kind {
	case kindUint:
		if major != 0 {
			return mismatch(n, major, info, arg)
		}
		if arg > n.max {
			return failure(strconv.FormatUint(arg, 10) + " exceeds the largest allowed value " + strconv.FormatUint(n.max, 10))
		}
	case kindInt:
		if major != 0 && major != 1 {
			return mismatch(n, major, info, arg)
		}
		if arg > math.MaxInt64 {
			return failure("integer overflows int64")
		}
	case kindText:
		if major != 3 {
			return mismatch(n, major, info, arg)
		}
		return c.text(arg)
	case kindBytes:
		if major != 2 {
			return mismatch(n, major, info, arg)
		}
		if n.counter == counterStateBytes && arg > uint64(c.limits.MaxStateBytes) {
			return failure(strconv.FormatUint(arg, 10) + " bytes of state exceed the limit of " + strconv.Itoa(c.limits.MaxStateBytes))
		}
		_, err := c.skip(arg)
		return err
	case kindArray:
		if major != 4 {
			return mismatch(n, major, info, arg)
		}
		return c.array(n, arg, depth)
	case kindStruct:
		if major != 5 {
			return mismatch(n, major, info, arg)
		}
		return c.structure(n, arg, depth)
	case kindMapAny:
		if major != 5 {
			return mismatch(n, major, info, arg)
		}
		return c.mapAny(arg, depth)
	case kindAny:
		return c.anyValue(major, info, arg, depth)
	}
	return nil
}

func (c *checker) text(n uint64) *checkError {
	s, err := c.skip(n)
	if err != nil {
		return err
	}
	if !utf8.Valid(s) {
		return failure("text string is not valid UTF-8")
	}
	return nil
}

// skip steps over the n content bytes of a string and returns them.
func (c *checker) skip(n uint64) ([]byte, *checkError) {
	if left := uint64(len(c.data) - c.off); n > left {
		return nil, failure("string of " + strconv.FormatUint(n, 10) + " bytes runs past the end of the data (" + strconv.FormatUint(left, 10) + " bytes left)")
	}
	s := c.data[c.off : c.off+int(n)]
	c.off += int(n)
	return s, nil
}

// enter guards against nesting too deep and against a count that the rest
// of the data cannot hold (every item takes at least one byte), so that no
// loop runs on a length the data does not back.
func (c *checker) enter(count uint64, itemsPer uint64, depth int) *checkError {
	if depth >= maxNesting {
		return failure("nesting exceeds " + strconv.Itoa(maxNesting) + " levels")
	}
	if left := uint64(len(c.data) - c.off); count > left/itemsPer {
		return failure("container of " + strconv.FormatUint(count, 10) + " items runs past the end of the data")
	}
	return nil
}

func (c *checker) array(n *schemaNode, count uint64, depth int) *checkError {
	if err := c.enter(count, 1, depth); err != nil {
		return err
	}
	if count == 0 && n.nonEmpty {
		return failure("empty array; leave the field out instead")
	}
	for i := range int(count) {
		switch n.counter {
		case counterEmits:
			if c.emits++; c.emits > c.limits.MaxEmits {
				return failure("more than " + strconv.Itoa(c.limits.MaxEmits) + " emits in the response").at(i)
			}
		case counterTimers:
			if c.timers++; c.timers > c.limits.MaxTimers {
				return failure("more than " + strconv.Itoa(c.limits.MaxTimers) + " timers set or cancelled in the response").at(i)
			}
		}
		if err := c.value(n.elem, depth+1); err != nil {
			return err.at(i)
		}
	}
	return nil
}

// mapKey reads a map key, which must be a text string, and returns it
// without copying. It leaves checking UTF-8 to the caller: a key equal to
// a field name needs no check.
func (c *checker) mapKey() ([]byte, *checkError) {
	major, info, arg, err := c.head()
	if err != nil {
		return nil, err
	}
	if major != 3 {
		return nil, failure("map key: expected text string, got " + describe(major, info, arg))
	}
	return c.skip(arg)
}

func (c *checker) structure(n *schemaNode, count uint64, depth int) *checkError {
	if err := c.enter(count, 2, depth); err != nil {
		return err
	}
	var seen uint64
	for range int(count) {
		key, err := c.mapKey()
		if err != nil {
			return err
		}
		i := 0
		for i < len(n.fields) && n.fields[i].name != string(key) {
			i++
		}
		if i == len(n.fields) {
			if !utf8.Valid(key) {
				return failure("map key is not valid UTF-8")
			}
			return failure("unknown field").in(string(key))
		}
		f := &n.fields[i]
		if seen&(1<<i) != 0 {
			return failure("duplicate field").in(f.name)
		}
		seen |= 1 << i
		if err := c.value(f.node, depth+1); err != nil {
			return err.in(f.name)
		}
	}
	if missing := n.required &^ seen; missing != 0 {
		for i, f := range n.fields {
			if missing&(1<<i) != 0 {
				return failure("missing required field").in(f.name)
			}
		}
	}
	return nil
}

func (c *checker) mapAny(count uint64, depth int) *checkError {
	if err := c.enter(count, 2, depth); err != nil {
		return err
	}
	seen := make(map[string]struct{}, count)
	for range int(count) {
		key, err := c.mapKey()
		if err != nil {
			return err
		}
		if !utf8.Valid(key) {
			return failure("map key is not valid UTF-8")
		}
		if _, dup := seen[string(key)]; dup {
			return failure("duplicate map key").in(string(key))
		}
		seen[string(key)] = struct{}{}
		major, info, arg, err := c.head()
		if err != nil {
			return err.in(string(key))
		}
		if err := c.anyValue(major, info, arg, depth+1); err != nil {
			return err.in(string(key))
		}
	}
	return nil
}

// anyValue checks a parameter value whose head has been read: anything that
// decodes to int64, float64, string, []byte, bool, nil, []any or
// map[string]any.
func (c *checker) anyValue(major, info byte, arg uint64, depth int) *checkError {
	switch major {
	case 0, 1:
		if arg > math.MaxInt64 {
			return failure("integer overflows int64")
		}
	case 2:
		_, err := c.skip(arg)
		return err
	case 3:
		return c.text(arg)
	case 4:
		if err := c.enter(arg, 1, depth); err != nil {
			return err
		}
		for i := range int(arg) {
			major, info, arg, err := c.head()
			if err == nil {
				err = c.anyValue(major, info, arg, depth+1)
			}
			if err != nil {
				return err.at(i)
			}
		}
	case 5:
		return c.mapAny(arg, depth)
	case 6:
		return failure("tags are not allowed")
	case 7:
		if info < 20 || info == 23 || info == 24 {
			return failure(describe(major, info, arg) + " is not allowed")
		}
	}
	return nil
}
