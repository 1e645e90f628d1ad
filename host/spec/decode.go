package spec

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/flowhost/flowhost/plugins/suggest"
)

// The decoder walks goccy's AST itself rather than calling yaml.Unmarshal,
// because goccy's decoder stops at the first problem, truncates 1.5 into an
// integer field and reports Go type names; walking the AST lets Parse report
// every structural problem at once, with the spec's field path and a message
// in the spec's own terms.

const (
	// maxNodes bounds the nodes visited, aliases expanded, so that a small
	// document of nested aliases cannot make Parse run out of memory.
	maxNodes = 1 << 20
	// maxDepth bounds nesting, which only free-form parameters can reach.
	maxDepth = 200
)

// source remembers where each field of a parsed spec came from.
type source struct {
	file string
	// tokens maps a field path to the token an error about it points at.
	tokens map[string]*token.Token
}

// lookup returns the token recorded for path or, when path is absent from the
// document (a defaulted field), for its nearest recorded ancestor.
func (s *source) lookup(path string) *token.Token {
	if s == nil {
		return nil
	}
	for i := len(path); i > 0; i-- {
		if i < len(path) && path[i] != '.' && path[i] != '[' {
			continue
		}
		if tk, ok := s.tokens[path[:i]]; ok {
			return tk
		}
	}
	return s.tokens[""]
}

// errorAt makes an error located at the recorded node for path.
func (s *source) errorAt(path, format string, args ...any) *Error {
	var file string
	if s != nil {
		file = s.file
	}
	return newError(file, s.lookup(path), path, fmt.Sprintf(format, args...))
}

// newError makes an error located at tk; a missing position becomes 1:1 so
// that every error names a place in the file.
func newError(file string, tk *token.Token, path, msg string) *Error {
	e := &Error{File: file, Line: 1, Column: 1, Path: path, Message: msg}
	if tk != nil && tk.Position != nil {
		e.token = tk
		e.Line = max(tk.Position.Line, 1)
		e.Column = max(tk.Position.Column, 1)
	}
	return e
}

// Path construction. A path reads like the YAML it points into:
// computations[1].input_ordering.stream_delays.payments.

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// keyPath appends a mapping key, quoted when it could be misread as path syntax.
func keyPath(parent, key string) string {
	if key != "" && strings.IndexFunc(key, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return fieldPath(parent, key)
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// enum is implemented by the string types that take one of a fixed set of values.
type enum interface{ values() []string }

// defaulter is implemented by structs whose zero value is not their default.
// The decoder calls setDefaults on every struct it creates, before decoding
// into it, so that fields present in the spec override the defaults and
// explicit zeros stay visible to validation.
type defaulter interface{ setDefaults() }

var (
	durationType = reflect.TypeFor[time.Duration]()
	enumType     = reflect.TypeFor[enum]()
)

// structField describes a field of a struct the decoder fills.
type structField struct {
	name  string
	index int
	// size marks an int64 holding a byte size, written as 65536 or "64MiB".
	size bool
}

type structInfo struct {
	fields []structField
	byName map[string]structField
}

var structInfos sync.Map // reflect.Type -> *structInfo

func infoOf(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{byName: map[string]structField{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		sf := structField{name: name, index: i, size: f.Tag.Get("spec") == "size"}
		info.fields = append(info.fields, sf)
		info.byName[name] = sf
	}
	v, _ := structInfos.LoadOrStore(t, info)
	return v.(*structInfo)
}

// decoder turns the AST of a spec into Go values, collecting errors.
type decoder struct {
	src     *source
	errs    ErrorList
	anchors map[string]ast.Node
	nodes   int
	depth   int
	// exhausted is set once a resource bound is hit; decoding then stops.
	exhausted bool
}

func newDecoder(file string) *decoder {
	return &decoder{
		src:     &source{file: file, tokens: map[string]*token.Token{}},
		anchors: map[string]ast.Node{},
	}
}

func (d *decoder) errorf(n ast.Node, path, format string, args ...any) {
	d.errs = append(d.errs, newError(d.src.file, nodeToken(n), path, fmt.Sprintf(format, args...)))
}

// record remembers n as the place errors about path point at.
func (d *decoder) record(path string, tk *token.Token) {
	if _, ok := d.src.tokens[path]; !ok && tk != nil {
		d.src.tokens[path] = tk
	}
}

// enter counts a visit to n and reports whether decoding may go on.
func (d *decoder) enter(n ast.Node, path string) bool {
	if d.exhausted {
		return false
	}
	d.nodes++
	d.depth++
	switch {
	case d.nodes > maxNodes:
		d.errorf(n, path, "the spec expands to more than %d nodes (aliases of aliases?)", maxNodes)
	case d.depth > maxDepth:
		d.errorf(n, path, "nested deeper than %d levels", maxDepth)
	default:
		return true
	}
	d.exhausted = true
	return false
}

func (d *decoder) leave() { d.depth-- }

// nodeToken returns the token to point at for n: for a block mapping its first
// key (goccy's own token for it is the first ':'), for an entry its key.
func nodeToken(n ast.Node) *token.Token {
	switch n := n.(type) {
	case nil:
		return nil
	case *ast.DocumentNode:
		return nodeToken(n.Body)
	case *ast.MappingNode:
		if !n.IsFlowStyle && len(n.Values) > 0 {
			return nodeToken(n.Values[0])
		}
		return n.Start
	case *ast.MappingValueNode:
		if n.Key != nil {
			return n.Key.GetToken()
		}
		return n.Start
	}
	return n.GetToken()
}

// deref follows aliases to their anchored node and unwraps anchors and tags,
// registering anchors after their node is complete: an alias inside its own
// anchor is reported as unknown rather than expanded forever.
func (d *decoder) deref(n ast.Node, path string, visit func(ast.Node)) {
	switch t := n.(type) {
	case *ast.AnchorNode:
		d.deref(t.Value, path, visit)
		if t.Name != nil {
			d.anchors[t.Name.GetToken().Value] = t.Value
		}
	case *ast.AliasNode:
		name := ""
		if t.Value != nil {
			name = t.Value.GetToken().Value
		}
		target, ok := d.anchors[name]
		if !ok {
			d.errorf(n, path, "alias *%s refers to no anchor defined before it", name)
			return
		}
		d.deref(target, path, visit)
	case *ast.TagNode:
		if t.Start != nil && t.Start.Value == "!!str" {
			switch v := t.Value.(type) {
			case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
				visit(ast.String(v.GetToken()))
				return
			}
		}
		d.deref(t.Value, path, visit)
	default:
		visit(n)
	}
}

// decode fills v from n. size marks an int64 byte size.
func (d *decoder) decode(n ast.Node, path string, v reflect.Value, size bool) {
	if !d.enter(n, path) {
		return
	}
	defer d.leave()
	d.deref(n, path, func(n ast.Node) { d.decodeValue(n, path, v, size) })
}

func (d *decoder) decodeValue(n ast.Node, path string, v reflect.Value, size bool) {
	if n == nil || n.Type() == ast.NullType {
		return // null leaves the default in place
	}
	t := v.Type()
	switch {
	case t == durationType:
		d.decodeDuration(n, path, v)
		return
	case size:
		d.decodeSize(n, path, v)
		return
	case t.Implements(enumType):
		d.decodeEnum(n, path, v)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		setDefaults(p)
		d.decodeValue(n, path, p.Elem(), size)
		v.Set(p)
	case reflect.Slice:
		d.decodeSlice(n, path, v)
	case reflect.Map:
		d.decodeMap(n, path, v)
	case reflect.Interface:
		if val := d.anyValue(n, path); val != nil {
			v.Set(reflect.ValueOf(val))
		}
	case reflect.String:
		s, ok := stringValue(n)
		if !ok {
			d.mismatch(n, path, "a string")
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.mismatch(n, path, "an integer")
			return
		}
		x, ok := int64Value(i)
		if !ok || v.OverflowInt(x) {
			d.errorf(n, path, "integer %s is out of range", i.GetToken().Value)
			return
		}
		v.SetInt(x)
	case reflect.Float64:
		f, ok := floatValue(n)
		if !ok {
			d.mismatch(n, path, "a number")
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.mismatch(n, path, "true or false")
			return
		}
		v.SetBool(b.Value)
	default:
		panic(fmt.Sprintf("spec: no decoding for %s", t)) // a field type this file does not know
	}
}

func setDefaults(p reflect.Value) {
	if df, ok := p.Interface().(defaulter); ok {
		df.setDefaults()
	}
}

// entry is one key and value of a mapping, merge keys already applied.
type entry struct {
	key   string
	keyTk *token.Token
	value ast.Node
}

// entries lists the entries of mapping n; it reports false (after recording
// an error) when n is no mapping. Explicit keys override merged ones ("<<"),
// and of merged ones the first wins, as YAML's merge key specifies.
func (d *decoder) entries(n ast.Node, path string) ([]entry, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.mismatch(n, path, "a mapping")
		return nil, false
	}
	var out, merged []entry
	seen := map[string]bool{}
	for _, mv := range values {
		if mv.Key != nil && mv.Key.IsMergeKey() {
			merged = append(merged, d.mergeEntries(mv.Value, path)...)
			continue
		}
		keyNode := ast.Node(mv.Key)
		if k, ok := keyNode.(*ast.MappingKeyNode); ok {
			keyNode = k.Value
		}
		var key string
		ok := false
		d.deref(keyNode, path, func(k ast.Node) {
			if key, ok = stringValue(k); !ok {
				d.mismatch(k, path, "a string key")
			}
		})
		if !ok {
			continue
		}
		if key == "<<" {
			// Not parsed as a merge key (say, "{<<}"), but it would be once
			// written back out: reject it rather than change meaning.
			d.errorf(keyNode, path, "<< is YAML's merge key; expected a mapping or a list of mappings to merge after it")
			continue
		}
		seen[key] = true
		out = append(out, entry{key: key, keyTk: nodeToken(keyNode), value: mv.Value})
	}
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			out = append(out, e)
		}
	}
	return out, true
}

// mergeEntries lists the entries a merge key's value brings in: a mapping or
// a list of mappings, usually aliases.
func (d *decoder) mergeEntries(n ast.Node, path string) []entry {
	if !d.enter(n, path) {
		return nil
	}
	defer d.leave()
	var out []entry
	d.deref(n, path, func(n ast.Node) {
		switch t := n.(type) {
		case *ast.SequenceNode:
			for _, item := range t.Values {
				d.deref(item, path, func(item ast.Node) {
					if es, ok := d.entries(item, path); ok {
						out = append(out, es...)
					}
				})
			}
		case *ast.MappingNode, *ast.MappingValueNode:
			es, _ := d.entries(n, path)
			out = append(out, es...)
		default:
			d.mismatch(n, path, "a mapping or a list of mappings to merge")
		}
	})
	return out
}

func (d *decoder) decodeStruct(n ast.Node, path string, v reflect.Value) {
	entries, ok := d.entries(n, path)
	if !ok {
		return
	}
	info := infoOf(v.Type())
	for _, e := range entries {
		f, ok := info.byName[e.key]
		if !ok {
			d.errs = append(d.errs, newError(d.src.file, e.keyTk, keyPath(path, e.key), unknownField(e.key, info)))
			continue
		}
		fp := fieldPath(path, f.name)
		d.record(fp, nodeToken(e.value))
		d.decode(e.value, fp, v.Field(f.index), f.size)
	}
}

// unknownField says which field was probably meant, or lists them all.
func unknownField(key string, info *structInfo) string {
	names := make([]string, len(info.fields))
	for i, f := range info.fields {
		names[i] = f.name
	}
	if hint := suggest.DidYouMean(key, names); hint != "" {
		return "unknown field; " + hint
	}
	if len(names) == 1 {
		return "unknown field; expected " + names[0]
	}
	return "unknown field; expected one of " + strings.Join(names, ", ")
}

func (d *decoder) decodeSlice(n ast.Node, path string, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.mismatch(n, path, "a list")
		return
	}
	if len(seq.Values) == 0 {
		return // nil, so that an empty list and a missing one are the same
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		ip := indexPath(path, i)
		d.record(ip, nodeToken(item))
		setDefaults(s.Index(i).Addr())
		d.decode(item, ip, s.Index(i), false)
	}
	v.Set(s)
}

func (d *decoder) decodeMap(n ast.Node, path string, v reflect.Value) {
	entries, ok := d.entries(n, path)
	if !ok || len(entries) == 0 {
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(entries))
	for _, e := range entries {
		kp := keyPath(path, e.key)
		d.record(kp, e.keyTk)
		val := reflect.New(v.Type().Elem())
		setDefaults(val)
		d.decode(e.value, kp, val.Elem(), false)
		m.SetMapIndex(reflect.ValueOf(e.key).Convert(v.Type().Key()), val.Elem())
	}
	v.Set(m)
}

// anyValue converts free-form YAML to plain Go values.
func (d *decoder) anyValue(n ast.Node, path string) any {
	if !d.enter(n, path) {
		return nil
	}
	defer d.leave()
	var out any
	d.deref(n, path, func(n ast.Node) {
		switch t := n.(type) {
		case nil, *ast.NullNode:
		case *ast.BoolNode:
			out = t.Value
		case *ast.IntegerNode:
			out = t.Value
		case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
			out, _ = floatValue(n)
		case *ast.StringNode, *ast.LiteralNode:
			out, _ = stringValue(n)
		case *ast.SequenceNode:
			list := make([]any, len(t.Values))
			for i, item := range t.Values {
				ip := indexPath(path, i)
				d.record(ip, nodeToken(item))
				list[i] = d.anyValue(item, ip)
			}
			out = list
		case *ast.MappingNode, *ast.MappingValueNode:
			entries, _ := d.entries(n, path)
			m := make(map[string]any, len(entries))
			for _, e := range entries {
				kp := keyPath(path, e.key)
				d.record(kp, e.keyTk)
				m[e.key] = d.anyValue(e.value, kp)
			}
			out = m
		default:
			d.errorf(n, path, "unexpected %s", n.Type().YAMLName())
		}
	})
	return out
}

func (d *decoder) decodeEnum(n ast.Node, path string, v reflect.Value) {
	allowed := v.Interface().(enum).values()
	expected := "one of " + strings.Join(allowed, ", ")
	s, ok := stringValue(n)
	if !ok {
		d.mismatch(n, path, expected)
		return
	}
	for _, a := range allowed {
		if s == a {
			v.SetString(s)
			return
		}
	}
	d.errorf(n, path, "expected %s; got %s", expected, describe(n))
}

func (d *decoder) decodeDuration(n ast.Node, path string, v reflect.Value) {
	var dur time.Duration
	switch t := n.(type) {
	case *ast.IntegerNode:
		ms, ok := int64Value(t)
		if !ok {
			d.errorf(n, path, "expected %s; got %s (too large)", durationExpected, describe(n))
			return
		}
		var err error
		if dur, err = durationFromMillis(ms); err != nil {
			d.errorf(n, path, "expected %s; got %s (%v)", durationExpected, describe(n), err)
			return
		}
	case *ast.StringNode:
		var err error
		if dur, err = time.ParseDuration(t.Value); err != nil || dur < 0 {
			d.errorf(n, path, "expected %s; got %s", durationExpected, describe(n))
			return
		}
	default:
		d.mismatch(n, path, durationExpected)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) decodeSize(n ast.Node, path string, v reflect.Value) {
	var size int64
	switch t := n.(type) {
	case *ast.IntegerNode:
		x, ok := int64Value(t)
		if !ok || x < 0 {
			d.errorf(n, path, "%v; got %s", errSize, describe(n))
			return
		}
		size = x
	case *ast.StringNode:
		var err error
		if size, err = ParseSize(t.Value); err != nil {
			d.errorf(n, path, "%v; got %s", err, describe(n))
			return
		}
	default:
		d.mismatch(n, path, sizeExpected)
		return
	}
	v.SetInt(size)
}

// mismatch reports a value of the wrong kind.
func (d *decoder) mismatch(n ast.Node, path, expected string) {
	hint := ""
	if strings.HasPrefix(expected, "a string") || strings.HasPrefix(expected, "one of") {
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
			hint = " (quote it to make it a string)"
		}
	}
	d.errorf(n, path, "expected %s; got %s%s", expected, describe(n), hint)
}

// describe names a node's value for "got ..." in an error.
func describe(n ast.Node) string {
	switch t := n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := stringValue(n)
		if len(s) > 60 {
			s = s[:57] + "..."
		}
		return strconv.Quote(s)
	case *ast.IntegerNode:
		return "integer " + t.GetToken().Value
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + t.GetToken().Value
	case *ast.BoolNode:
		return "boolean " + t.GetToken().Value
	}
	return "a " + n.Type().YAMLName()
}

func stringValue(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return t.Value.Value, true
	}
	return "", false
}

// int64Value returns an integer node's value; goccy keeps non-negative
// integers as uint64.
func int64Value(n *ast.IntegerNode) (int64, bool) {
	switch x := n.Value.(type) {
	case int64:
		return x, true
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

func floatValue(n ast.Node) (float64, bool) {
	switch t := n.(type) {
	case *ast.FloatNode:
		return t.Value, true
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			return float64(x), true
		case uint64:
			return float64(x), true
		}
	case *ast.InfinityNode:
		return t.Value, true
	case *ast.NanNode:
		return math.NaN(), true
	}
	return 0, false
}

// sortErrors puts errors in file order; errors at one place keep their order.
func sortErrors(errs ErrorList) {
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].Line != errs[j].Line {
			return errs[i].Line < errs[j].Line
		}
		return errs[i].Column < errs[j].Column
	})
}
