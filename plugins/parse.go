package plugins

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/flowhost/flowhost/plugins/suggest"
)

// ParseManifest parses and checks the manifest data read from path; path
// is used only in error messages. It reports every problem it finds, not
// just the first: the error is a *ManifestError or an errors.Join of them,
// ordered by position, each naming path, line, column and field. Unknown
// fields are rejected.
//
// The manifest is read from the YAML syntax tree rather than decoded into a
// struct so that each problem points at the exact value and all problems
// are reported at once.
func ParseManifest(path string, data []byte) (*Manifest, error) {
	p := &manifestParser{file: path}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, p.syntaxError(err)
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		return nil, &ManifestError{File: path, Line: 1, Column: 1,
			Msg: "manifest is empty; required fields: " + strings.Join(requiredFields, ", ")}
	}
	if len(docs) > 1 {
		at := firstKeyPos(docs[1].Body)
		if !isMapping(docs[1].Body) {
			at = posOf(docs[1].Body, pos{1, 1})
		}
		return nil, &ManifestError{File: path, Line: at.line, Column: at.col,
			Msg: "a manifest is a single YAML document; found a second one"}
	}
	body := docs[0].Body
	p.collectAnchors(body)
	m := p.manifest(body)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *ManifestError) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		})
		if len(p.errs) == 1 {
			return nil, p.errs[0]
		}
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return m, nil
}

var requiredFields = []string{"name", "version", "abi", "wasm", "sha256", "kinds"}

var (
	topFields          = []string{"name", "version", "abi", "wasm", "sha256", "kinds", "description", "parameters", "limits", "capabilities", "engine"}
	limitsFields       = []string{"memory_pages", "batch_timeout", "max_response_bytes"}
	capabilitiesFields = []string{"clock", "read_only_dirs"}
)

// pos is a 1-based line and column.
type pos struct{ line, col int }

func posOf(n ast.Node, fallback pos) pos {
	if n == nil {
		return fallback
	}
	return posOfToken(n.GetToken(), fallback)
}

// valuePos is where a value starts. The token of a block mapping is the
// colon after its first key, so a mapping is placed at that key instead.
func valuePos(n ast.Node, fallback pos) pos {
	if isMapping(n) {
		return firstKeyPos(n)
	}
	return posOf(n, fallback)
}

func posOfToken(tk *token.Token, fallback pos) pos {
	if tk == nil || tk.Position == nil || tk.Position.Line < 1 {
		return fallback
	}
	return pos{tk.Position.Line, max(tk.Position.Column, 1)}
}

type anchorDef struct {
	offset int
	value  ast.Node
}

type manifestParser struct {
	file    string
	errs    []*ManifestError
	anchors map[string][]anchorDef
	body    ast.Node
}

func (p *manifestParser) errorf(at pos, field, format string, args ...any) {
	p.errs = append(p.errs, &ManifestError{File: p.file, Line: at.line, Column: at.col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *manifestParser) syntaxError(err error) *ManifestError {
	at := pos{1, 1}
	msg := err.Error()
	var ye yaml.Error
	if errors.As(err, &ye) {
		msg = ye.GetMessage()
		at = posOfToken(ye.GetToken(), at)
	}
	return &ManifestError{File: p.file, Line: at.line, Column: at.col, Msg: "invalid YAML: " + msg}
}

func (p *manifestParser) collectAnchors(body ast.Node) {
	p.body = body
	p.anchors = map[string][]anchorDef{}
	ast.Walk(visitFunc(func(n ast.Node) {
		if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
			name := tokenText(a.Name)
			p.anchors[name] = append(p.anchors[name], anchorDef{offsetOf(a), a.Value})
		}
	}), body)
}

type visitFunc func(ast.Node)

func (f visitFunc) Visit(n ast.Node) ast.Visitor {
	if n == nil {
		return nil
	}
	f(n)
	return f
}

func tokenText(n ast.Node) string {
	if n == nil {
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

func offsetOf(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Offset
	}
	return 0
}

// resolve looks through anchors, aliases and the standard "!!" tags to the
// node that carries the value. It returns "" or a message saying why the
// value cannot be resolved.
func (p *manifestParser) resolve(n ast.Node) (ast.Node, string) {
	// Each alias must point to an earlier anchor, so a chain is at most as
	// long as the number of anchors; the bound only stops malformed trees.
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			tag := ""
			if v.Start != nil {
				tag = v.Start.Value
			}
			if !strings.HasPrefix(tag, "!!") {
				return nil, fmt.Sprintf("unsupported tag %s", tag)
			}
			n = v.Value
		case *ast.AliasNode:
			target, msg := p.aliasTarget(v)
			if msg != "" {
				return nil, msg
			}
			n = target
		case *ast.MappingKeyNode:
			n = v.Value
		default:
			return n, ""
		}
	}
	return nil, "aliases nest too deeply"
}

func (p *manifestParser) aliasTarget(a *ast.AliasNode) (ast.Node, string) {
	name := tokenText(a.Value)
	if name == "" {
		return nil, "alias without a name"
	}
	at := offsetOf(a)
	var target *anchorDef
	for i, d := range p.anchors[name] {
		if d.offset < at {
			target = &p.anchors[name][i]
		}
	}
	if target == nil {
		return nil, fmt.Sprintf("alias *%s refers to no earlier anchor &%s", name, name)
	}
	return target.value, ""
}

// checkAliases reports aliases inside n that resolve to nothing, so that
// the YAML decoder, which reports them without a position, never sees them.
func (p *manifestParser) checkAliases(field string, n ast.Node) bool {
	ok := true
	ast.Walk(visitFunc(func(n ast.Node) {
		if a, isAlias := n.(*ast.AliasNode); isAlias {
			if _, msg := p.aliasTarget(a); msg != "" {
				p.errorf(posOf(a, pos{1, 1}), field, "%s", msg)
				ok = false
			}
		}
	}), n)
	return ok
}

// entry is one key: value pair of a mapping, with positions to report.
type entry struct {
	key      string
	field    string
	keyAt    pos
	value    ast.Node // unresolved; nil when absent
	valueAt  pos
	resolved ast.Node
	// failed is set when the value could not be resolved and an error was
	// reported; the field counts as present but is not read.
	failed bool
}

// entries returns the pairs of the mapping n, reporting non-scalar keys,
// merge keys and keys not in known.
func (p *manifestParser) entries(parent string, n ast.Node, known []string) []entry {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	var out []entry
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		keyAt := posOf(mv.Key, posOf(mv, pos{1, 1}))
		if _, isMerge := mv.Key.(*ast.MergeKeyNode); isMerge {
			p.errorf(keyAt, joinField(parent, "<<"), "merge keys are not supported here; write the fields out")
			continue
		}
		key, msg := p.resolve(mv.Key)
		if msg != "" {
			p.errorf(keyAt, parent, "%s", msg)
			continue
		}
		name, ok := scalarText(key)
		if !ok {
			p.errorf(keyAt, parent, "expected a field name, got %s", describe(key))
			continue
		}
		field := joinField(parent, name)
		if !slices.Contains(known, name) {
			p.errorf(keyAt, field, "unknown field %q%s; known fields: %s", name, didYouMean(name, known), strings.Join(known, ", "))
			continue
		}
		e := entry{key: name, field: field, keyAt: keyAt, value: mv.Value, valueAt: valuePos(mv.Value, keyAt)}
		if e.resolved, msg = p.resolve(mv.Value); msg != "" {
			p.errorf(e.valueAt, field, "%s", msg)
			e.failed = true
		}
		out = append(out, e)
	}
	return out
}

func joinField(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// didYouMean returns a " (did you mean ...?)" hint when name is a likely
// typo of a known name.
func didYouMean(name string, known []string) string {
	if hint := suggest.DidYouMean(name, known); hint != "" {
		return " (" + hint + ")"
	}
	return ""
}

func isNull(n ast.Node) bool {
	_, null := n.(*ast.NullNode)
	return n == nil || null
}

func isMapping(n ast.Node) bool {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return true
	}
	return false
}

// scalarText returns a scalar as written, without quotes, so that a
// version such as 1.10 or a name such as 007 keeps its digits.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return tokenText(v), true
	}
	return "", false
}

// describe names a value's YAML type for error messages.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return fmt.Sprintf("string %q", v.Value)
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return "integer " + tokenText(v)
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + tokenText(v)
	case *ast.BoolNode:
		return "boolean " + tokenText(v)
	}
	return n.Type().YAMLName()
}

func (p *manifestParser) str(e entry) (string, bool) {
	s, ok := scalarText(e.resolved)
	if !ok {
		p.errorf(e.valueAt, e.field, "expected a string, got %s", describe(e.resolved))
	}
	return s, ok
}

func (p *manifestParser) integer(e entry) (int64, bool) {
	if n, ok := e.resolved.(*ast.IntegerNode); ok {
		switch v := n.Value.(type) {
		case int64:
			return v, true
		case uint64:
			if v <= math.MaxInt64 {
				return int64(v), true
			}
		}
		p.errorf(e.valueAt, e.field, "integer %s is out of range", tokenText(n))
		return 0, false
	}
	p.errorf(e.valueAt, e.field, "expected an integer, got %s", describe(e.resolved))
	return 0, false
}

func (p *manifestParser) boolean(e entry) (bool, bool) {
	if n, ok := e.resolved.(*ast.BoolNode); ok {
		return n.Value, true
	}
	p.errorf(e.valueAt, e.field, "expected true or false, got %s", describe(e.resolved))
	return false, false
}

// list returns the elements of a list as entries named field[i].
func (p *manifestParser) list(e entry, example string) ([]entry, bool) {
	seq, ok := e.resolved.(*ast.SequenceNode)
	if !ok {
		p.errorf(e.valueAt, e.field, "expected a list such as %s, got %s", example, describe(e.resolved))
		return nil, false
	}
	var out []entry
	for i, v := range seq.Values {
		el := entry{field: fmt.Sprintf("%s[%d]", e.field, i), value: v, valueAt: valuePos(v, e.valueAt)}
		resolved, msg := p.resolve(v)
		if msg != "" {
			p.errorf(el.valueAt, el.field, "%s", msg)
			continue
		}
		el.resolved = resolved
		out = append(out, el)
	}
	return out, true
}

// check reports msg, when not empty, at the entry's value.
func (p *manifestParser) check(e entry, msg string) bool {
	if msg != "" {
		p.errorf(e.valueAt, e.field, "%s", msg)
		return false
	}
	return true
}

func (p *manifestParser) manifest(body ast.Node) *Manifest {
	root, msg := p.resolve(body)
	if msg != "" || !isMapping(root) {
		if msg == "" {
			msg = "expected a mapping of manifest fields, got " + describe(root)
		}
		p.errorf(posOf(body, pos{1, 1}), "", "%s", msg)
		return nil
	}
	m := &Manifest{}
	seen := map[string]bool{}
	for _, e := range p.entries("", root, topFields) {
		seen[e.key] = true
		if e.failed {
			continue
		}
		if isNull(e.resolved) {
			if slices.Contains(requiredFields, e.key) {
				p.errorf(e.keyAt, e.field, "required field has no value")
			}
			continue
		}
		switch e.key {
		case "name":
			if s, ok := p.str(e); ok && p.check(e, checkName(s)) {
				m.Name = s
			}
		case "version":
			if s, ok := p.str(e); ok && p.check(e, checkVersion(s)) {
				m.Version = s
			}
		case "abi":
			if v, ok := p.integer(e); ok && p.check(e, checkABI(v)) {
				m.ABI = int(v)
			}
		case "wasm":
			if s, ok := p.str(e); ok {
				clean, msg := cleanRelPath(s, false)
				if p.check(e, msg) {
					m.Wasm = clean
				}
			}
		case "sha256":
			if s, ok := p.str(e); ok {
				sum, msg := normalizeSHA256(s)
				if p.check(e, msg) {
					m.SHA256 = sum
				}
			}
		case "kinds":
			m.Kinds = p.kinds(e)
		case "description":
			if s, ok := p.str(e); ok {
				m.Description = s
			}
		case "parameters":
			m.Parameters = p.parameters(e)
		case "limits":
			m.Limits = p.limits(e)
		case "capabilities":
			m.Capabilities = p.capabilities(e)
		case "engine":
			if s, ok := p.str(e); ok && p.check(e, checkEngine(s)) {
				m.Engine = Engine(s)
			}
		}
	}
	at := firstKeyPos(root)
	for _, f := range requiredFields {
		if !seen[f] {
			p.errorf(at, f, "required field is missing")
		}
	}
	return m
}

// firstKeyPos is where a missing field is reported: the start of the
// mapping that lacks it.
func firstKeyPos(n ast.Node) pos {
	if m, ok := n.(*ast.MappingNode); ok {
		if m.IsFlowStyle || len(m.Values) == 0 {
			return posOf(m, pos{1, 1})
		}
		return posOf(m.Values[0].Key, pos{1, 1})
	}
	if mv, ok := n.(*ast.MappingValueNode); ok {
		return posOf(mv.Key, pos{1, 1})
	}
	return pos{1, 1}
}

func (p *manifestParser) kinds(e entry) []Kind {
	items, ok := p.list(e, "[transform]")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.errorf(e.valueAt, e.field, "at least one kind is required: %s or %s", KindTransform, KindMap)
		return nil
	}
	var kinds []Kind
	for _, it := range items {
		s, ok := p.str(it)
		if !ok || !p.check(it, checkKind(s)) {
			continue
		}
		if slices.Contains(kinds, Kind(s)) {
			p.errorf(it.valueAt, it.field, "%q is listed twice", s)
			continue
		}
		kinds = append(kinds, Kind(s))
	}
	return kinds
}

func (p *manifestParser) parameters(e entry) map[string]any {
	if !isMapping(e.resolved) {
		p.errorf(e.valueAt, e.field, "expected a mapping of parameter names to values, got %s", describe(e.resolved))
		return nil
	}
	if !p.checkAliases(e.field, e.resolved) {
		return nil
	}
	// Aliases let a small file stand for a huge value; the decoder shares
	// the repeats, but whoever encodes the parameters for a guest would not.
	counter := &valueCounter{p: p, memo: map[ast.Node]int{}, active: map[ast.Node]bool{}}
	if n := counter.count(e.resolved); n > maxParameterValues {
		p.errorf(e.valueAt, e.field, "expands to more than %d values through aliases", maxParameterValues)
		return nil
	}
	// Parameters are free-form, so the YAML decoder turns them into Go
	// values. It decodes the whole body so that aliases to anchors outside
	// the parameters resolve as they would anywhere else.
	var out struct {
		Parameters map[string]any `yaml:"parameters"`
	}
	if err := yaml.NodeToValue(p.body, &out); err != nil {
		at, msg := e.valueAt, err.Error()
		var ye yaml.Error
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			at = posOfToken(ye.GetToken(), at)
		}
		p.errorf(at, e.field, "%s", msg)
		return nil
	}
	return out.Parameters
}

func (p *manifestParser) limits(e entry) Limits {
	var l Limits
	if !isMapping(e.resolved) {
		p.errorf(e.valueAt, e.field, "expected a mapping with %s, got %s", strings.Join(limitsFields, ", "), describe(e.resolved))
		return l
	}
	for _, f := range p.entries(e.field, e.resolved, limitsFields) {
		if f.failed || isNull(f.resolved) {
			continue
		}
		switch f.key {
		case "memory_pages":
			if v, ok := p.integer(f); ok && p.check(f, checkMemoryPages(v)) {
				l.MemoryPages = uint32(v)
			}
		case "batch_timeout":
			s, isString := f.resolved.(*ast.StringNode)
			if !isString {
				p.errorf(f.valueAt, f.field, "expected a duration with a unit such as \"5s\" or \"250ms\", got %s", describe(f.resolved))
				continue
			}
			d, err := time.ParseDuration(s.Value)
			if err != nil {
				p.errorf(f.valueAt, f.field, "expected a duration such as \"5s\" or \"250ms\", got %q", s.Value)
				continue
			}
			if p.check(f, checkBatchTimeout(d)) {
				l.BatchTimeout = d
			}
		case "max_response_bytes":
			var v int64
			if _, isInt := f.resolved.(*ast.IntegerNode); isInt {
				var ok bool
				if v, ok = p.integer(f); !ok {
					continue
				}
			} else if s, isString := f.resolved.(*ast.StringNode); isString {
				var msg string
				if v, msg = parseSize(s.Value); !p.check(f, msg) {
					continue
				}
			} else {
				p.errorf(f.valueAt, f.field, "expected a byte count such as 1048576 or \"64MiB\", got %s", describe(f.resolved))
				continue
			}
			if p.check(f, checkMaxResponseBytes(v)) {
				l.MaxResponseBytes = v
			}
		}
	}
	return l
}

func (p *manifestParser) capabilities(e entry) Capabilities {
	var c Capabilities
	if !isMapping(e.resolved) {
		p.errorf(e.valueAt, e.field, "expected a mapping with %s, got %s", strings.Join(capabilitiesFields, ", "), describe(e.resolved))
		return c
	}
	for _, f := range p.entries(e.field, e.resolved, capabilitiesFields) {
		if f.failed || isNull(f.resolved) {
			continue
		}
		switch f.key {
		case "clock":
			c.Clock, _ = p.boolean(f)
		case "read_only_dirs":
			items, _ := p.list(f, "[data]")
			for _, it := range items {
				s, ok := p.str(it)
				if !ok {
					continue
				}
				clean, msg := cleanRelPath(s, true)
				if !p.check(it, msg) {
					continue
				}
				if slices.Contains(c.ReadOnlyDirs, clean) {
					p.errorf(it.valueAt, it.field, "%q is listed twice", clean)
					continue
				}
				c.ReadOnlyDirs = append(c.ReadOnlyDirs, clean)
			}
		}
	}
	return c
}

// maxParameterValues bounds the parameters after alias expansion; real
// defaults are a handful of values.
const maxParameterValues = 100_000

// valueCounter counts the values a node stands for with aliases expanded,
// saturating just above maxParameterValues.
type valueCounter struct {
	p      *manifestParser
	memo   map[ast.Node]int
	active map[ast.Node]bool
}

func (c *valueCounter) count(n ast.Node) int {
	if n == nil {
		return 1
	}
	if v, ok := c.memo[n]; ok {
		return v
	}
	if c.active[n] {
		// An alias inside its own anchor; the decoder reads it as null.
		return 1
	}
	c.active[n] = true
	defer delete(c.active, n)
	total := 1
	add := func(children ...ast.Node) {
		for _, child := range children {
			total = min(total+c.count(child), maxParameterValues+1)
		}
	}
	switch v := n.(type) {
	case *ast.AliasNode:
		target, _ := c.p.aliasTarget(v)
		total = c.count(target)
	case *ast.AnchorNode:
		total = c.count(v.Value)
	case *ast.TagNode:
		total = c.count(v.Value)
	case *ast.MappingNode:
		for _, mv := range v.Values {
			add(mv)
		}
	case *ast.MappingValueNode:
		add(v.Key, v.Value)
	case *ast.SequenceNode:
		add(v.Values...)
	}
	c.memo[n] = total
	return total
}
