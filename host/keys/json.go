package keys

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, so that a payload is valid here
// exactly when json.Valid accepts it.
const maxDepth = 10000

// span is the position of a field's raw value in the payload; end == 0
// means not found.
type span struct{ start, end int }

// jsonScanner validates a JSON text in one pass without allocating, and
// records where the group_by fields' values are. It accepts exactly what
// encoding/json accepts (including bytes that are not UTF-8 in strings that
// are not part of the key).
type jsonScanner struct {
	data  []byte
	pos   int
	depth int
	spans []span
	kinds []byte // per trie node: kind of the value seen, 0 if none
}

// ValidJSON reports whether data is one JSON text, exactly as
// encoding/json's Valid does (bytes that are not UTF-8 inside strings
// included), in the one pass of the scanner that keys use, without
// allocating and in well under half of Valid's time.
func ValidJSON(data []byte) bool {
	s := jsonScanner{data: data}
	return s.document(nil) == nil // no fields to match: it only validates
}

func (e *Extractor) appendJSONKey(key, payload []byte) ([]byte, error) {
	var spanBuf [8]span
	var kindBuf [16]byte
	s := jsonScanner{data: payload}
	s.spans = spanBuf[:0]
	s.spans = slices.Grow(s.spans, len(e.fields))[:len(e.fields)]
	s.kinds = kindBuf[:0]
	s.kinds = slices.Grow(s.kinds, e.nodes)[:e.nodes]
	if err := s.document(e.root); err != nil {
		return key, err
	}
	key = append(key, '[')
	for f, sp := range s.spans {
		if sp.end == 0 {
			return key, e.missing(f, s.kinds)
		}
		if f > 0 {
			key = append(key, ',')
		}
		var err error
		key, err = appendCanonicalJSON(key, payload[sp.start:sp.end])
		if err != nil {
			return key, fmt.Errorf("%w: group_by field %q: %v", ErrPayload, e.fields[f], err)
		}
	}
	return append(key, ']'), nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) && isSpace(s.data[s.pos]) {
		s.pos++
	}
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w is not valid JSON: byte %d: %s", ErrPayload, s.pos, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) unexpected(want string) error {
	if s.pos >= len(s.data) {
		return s.errorf("unexpected end, want %s", want)
	}
	return s.errorf("unexpected %q, want %s", s.data[s.pos], want)
}

// document scans a whole JSON text that must be one value; n is the trie
// node whose children are looked up in it (nil: look nothing up).
func (s *jsonScanner) document(n *node) error {
	s.skipSpace()
	if _, err := s.value(n); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos != len(s.data) {
		return s.unexpected("end of payload")
	}
	return nil
}

// value scans one value at s.pos and returns its kind. If n has children
// and the value is an object, its members are matched against them.
func (s *jsonScanner) value(n *node) (byte, error) {
	if s.pos >= len(s.data) {
		return 0, s.unexpected("a value")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return kindObject, s.object(n)
	case c == '[':
		return kindArray, s.array()
	case c == '"':
		_, err := s.string()
		return kindString, err
	case c == '-' || c >= '0' && c <= '9':
		return kindNumber, s.number()
	case c == 't':
		return kindBool, s.literal("true")
	case c == 'f':
		return kindBool, s.literal("false")
	case c == 'n':
		return kindNull, s.literal("null")
	}
	return 0, s.unexpected("a value")
}

func (s *jsonScanner) literal(lit string) error {
	if !strings.HasPrefix(string(s.data[s.pos:]), lit) {
		return s.errorf("invalid literal, want %s", lit)
	}
	s.pos += len(lit)
	return nil
}

func (s *jsonScanner) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return s.errorf("nested deeper than %d", maxDepth)
	}
	return nil
}

func (s *jsonScanner) object(n *node) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.unexpected("an object key")
		}
		nameStart := s.pos
		escaped, err := s.string()
		if err != nil {
			return err
		}
		var c *node
		if n != nil && len(n.children) > 0 {
			name := s.data[nameStart+1 : s.pos-1]
			if escaped {
				if name, err = unescape(nil, name); err != nil {
					// A name that cannot be decoded matches no field.
					name = nil
				}
			}
			c = n.child(name)
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.unexpected("':' after an object key")
		}
		s.pos++
		s.skipSpace()
		start := s.pos
		if c != nil && s.kinds[c.id] != 0 {
			return fmt.Errorf("%w repeats field %q (byte %d)", ErrPayload, c.path, nameStart)
		}
		kind, err := s.value(c)
		if err != nil {
			return err
		}
		if c != nil {
			s.kinds[c.id] = kind
			if c.field >= 0 {
				s.spans[c.field] = span{start, s.pos}
			}
		}
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.skipSpace()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			s.depth--
			return nil
		}
		return s.unexpected("',' or '}' in an object")
	}
}

func (s *jsonScanner) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if _, err := s.value(nil); err != nil {
			return err
		}
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.skipSpace()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			s.depth--
			return nil
		}
		return s.unexpected("',' or ']' in an array")
	}
}

// string scans a string literal and reports whether it holds escapes.
func (s *jsonScanner) string() (escaped bool, err error) {
	s.pos++ // '"'
	for s.pos < len(s.data) {
		// Most string bytes need no decision: skip them by table.
		for s.pos < len(s.data) && plainStringByte[s.data[s.pos]] {
			s.pos++
		}
		if s.pos == len(s.data) {
			break
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return escaped, nil
		case c == '\\':
			escaped = true
			s.pos++
			if s.pos >= len(s.data) {
				return false, s.unexpected("an escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) || !isHex(s.data[s.pos]) {
						return false, s.unexpected("a hex digit in \\u escape")
					}
					s.pos++
				}
			default:
				return false, s.unexpected("an escape")
			}
		case c < 0x20:
			return false, s.errorf("control character 0x%02x in a string", c)
		default:
			s.pos++
		}
	}
	return false, s.unexpected("'\"' closing a string")
}

// plainStringByte is true for the bytes that a JSON string holds as they
// are: not '"', '\\' or a control character.
var plainStringByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *jsonScanner) digits() error {
	if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
		return s.unexpected("a digit")
	}
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
	return nil
}

func (s *jsonScanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if err := s.digits(); err != nil {
		return err
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if err := s.digits(); err != nil {
			return err
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if err := s.digits(); err != nil {
			return err
		}
	}
	return nil
}

// unescape appends the decoded content of a string literal (without its
// quotes) that the scanner has validated. It rejects invalid UTF-8 and lone
// surrogates.
func unescape(dst, lit []byte) ([]byte, error) {
	for i := 0; i < len(lit); {
		c := lit[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				dst = append(dst, c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(lit[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, fmt.Errorf("string is not valid UTF-8 at byte %d", i)
			}
			dst = append(dst, lit[i:i+size]...)
			i += size
			continue
		}
		i++
		switch lit[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(lit[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+6 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
					return nil, fmt.Errorf("string has a lone surrogate \\u%04x", r)
				}
				r2 := hex4(lit[i+3:])
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return nil, fmt.Errorf("string has a lone surrogate")
				}
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, lit[i])
		}
		i++
	}
	return dst, nil
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendCanonicalJSON appends the canonical text of one validated JSON
// value.
func appendCanonicalJSON(dst, v []byte) ([]byte, error) {
	if v[0] == '{' || v[0] == '[' {
		// Built apart so that dst, which is often on the caller's stack,
		// does not flow into the heap-allocated member lists.
		s := jsonScanner{data: v}
		c, err := s.canonical(nil)
		if err != nil {
			return nil, err
		}
		return append(dst, c...), nil
	}
	return appendCanonicalScalar(dst, v)
}

// appendCanonicalScalar appends the canonical text of a validated string,
// number or literal.
func appendCanonicalScalar(dst, v []byte) ([]byte, error) {
	switch v[0] {
	case '"':
		lit := v[1 : len(v)-1]
		if !bytesContain(lit, '\\') {
			if !utf8.Valid(lit) {
				return nil, fmt.Errorf("string is not valid UTF-8")
			}
			// Validated JSON holds no raw control characters, quotes or
			// backslashes, so the literal is already canonical.
			return append(dst, v...), nil
		}
		var tmp [64]byte
		text, err := unescape(tmp[:0], lit)
		if err != nil {
			return nil, err
		}
		return appendCanonicalString(dst, string(text)), nil
	case 't', 'f', 'n':
		return append(dst, v...), nil
	}
	return appendCanonicalNumber(dst, v)
}

func bytesContain(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// canonical re-reads a validated value at s.pos and appends its canonical
// form. Objects and arrays are rare in keys: clarity over speed.
func (s *jsonScanner) canonical(dst []byte) ([]byte, error) {
	s.skipSpace()
	start := s.pos
	switch s.data[s.pos] {
	case '{':
		type member struct {
			name  string
			value []byte
		}
		var members []member
		s.pos++
		for {
			s.skipSpace()
			if s.data[s.pos] == '}' {
				s.pos++
				break
			}
			if s.data[s.pos] == ',' {
				s.pos++
				s.skipSpace()
			}
			nameStart := s.pos
			if _, err := s.string(); err != nil {
				return nil, err
			}
			name, err := unescape(nil, s.data[nameStart+1:s.pos-1])
			if err != nil {
				return nil, fmt.Errorf("object key: %v", err)
			}
			s.skipSpace()
			s.pos++ // ':'
			value, err := s.canonical(nil)
			if err != nil {
				return nil, err
			}
			members = append(members, member{string(name), value})
		}
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				if m.name == members[i-1].name {
					return nil, fmt.Errorf("object repeats key %q", m.name)
				}
				dst = append(dst, ',')
			}
			dst = appendCanonicalString(dst, m.name)
			dst = append(dst, ':')
			dst = append(dst, m.value...)
		}
		return append(dst, '}'), nil
	case '[':
		s.pos++
		dst = append(dst, '[')
		for first := true; ; first = false {
			s.skipSpace()
			if s.data[s.pos] == ']' {
				s.pos++
				break
			}
			if s.data[s.pos] == ',' {
				s.pos++
			}
			if !first {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = s.canonical(dst); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	if _, err := s.value(nil); err != nil {
		return nil, err
	}
	return appendCanonicalScalar(dst, s.data[start:s.pos])
}

// appendCanonicalString appends text as a canonical JSON string; text is
// valid UTF-8.
func appendCanonicalString(dst []byte, text string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(dst, '"')
}
