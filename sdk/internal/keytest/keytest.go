// Package keytest holds what the Rust, C and AssemblyScript SDKs' tests of
// their group_by key decoders share: the table of keys, and the line in
// which each SDK's test guest (and here, the Go SDK's ParseKey) reports what
// every accessor returns, so that the three compare with Go alike.
package keytest

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// Case is a key and the group_by names it is parsed with.
type Case struct {
	Key   string
	Names []string
}

// GoLine is Go's ParseKey on c as a test guest reports it: "E <hex error>"
// when the parse fails, else for each name and one name that is not there
// ("zz") the Raw, String, Int, Float (as bits) and Bool results, each "o"
// and the hex value or "e" and the hex error.
func GoLine(c Case) string {
	kf, err := flowhost.ParseKey(c.Key, c.Names...)
	if err != nil {
		return "E " + hex.EncodeToString([]byte(err.Error()))
	}
	res := func(v string, err error) string {
		if err != nil {
			return "e" + hex.EncodeToString([]byte(err.Error()))
		}
		return "o" + hex.EncodeToString([]byte(v))
	}
	var f []string
	for _, n := range append(append([]string{}, c.Names...), "zz") {
		r, err := kf.Raw(n)
		f = append(f, res(string(r), err))
		f = append(f, res(kf.String(n)))
		i, err := kf.Int(n)
		f = append(f, res(strconv.FormatInt(i, 10), err))
		fl, err := kf.Float(n)
		f = append(f, res(strconv.FormatUint(math.Float64bits(fl), 10), err))
		b, err := kf.Bool(n)
		f = append(f, res(strconv.FormatBool(b), err))
	}
	return strings.Join(f, " ")
}

// DecodeLine renders a line of GoLine's form readably, for failure messages.
func DecodeLine(l string) string {
	var parts []string
	for _, p := range strings.Fields(l) {
		if len(p) > 1 && (p[0] == 'o' || p[0] == 'e') {
			b, _ := hex.DecodeString(p[1:])
			parts = append(parts, p[:1]+strconv.Quote(string(b)))
		} else {
			b, err := hex.DecodeString(p)
			if err != nil {
				parts = append(parts, p)
			} else {
				parts = append(parts, strconv.Quote(string(b)))
			}
		}
	}
	return strings.Join(parts, " ")
}

// Table covers what the host writes and what it never does, in keys every
// SDK can hold (valid UTF-8, no NUL); a fresh copy on each call.
func Table() []Case {
	return []Case{
		{`["o-17",3]`, []string{"id", "n"}},
		{`["a\"b\\c\/\b\f\n\r\t\u00e9\u0000"]`, []string{"s"}},
		{`["héllo 😀 日本"]`, []string{"s"}},
		{`["\ud83d\ude00","\ud800","\udc00\ud800x","\ud800\u0041"]`, []string{"a", "b", "c", "d"}},
		{`[0,-1,9223372036854775807,-9223372036854775808,9223372036854775808,-9223372036854775809,12345678901234567890123]`, []string{"a", "b", "c", "d", "e", "f", "g"}},
		{`[1.5,-0.25,1e3,1E-3,-0,0.0,1e400,-1e400,1e-400,2.2250738585072014e-308]`, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}},
		{`[true,false,null]`, []string{"t", "f", "n"}},
		{`[{"a":[1,{"b":null}]},[],{},[[["x"]]]]`, []string{"o", "e", "eo", "n"}},
		{`["3","-4.5","1e2"," 3","abc","\u0033",""]`, []string{"a", "b", "c", "d", "e", "f", "g"}},
		{` [ 1 , "a" ] `, []string{"x", "y"}},
		{`[1]`, []string{"a", "b"}},
		{`[1,2]`, []string{"a"}},
		{`[]`, nil},
		{`[]`, []string{"a"}},
		{``, nil},
		{``, []string{"a", "b"}},
		{`null`, nil},
		{`null`, []string{"a"}},
		{`{"a":1}`, []string{"a"}},
		{`"x"`, []string{"a"}},
		{`[1,]`, []string{"a"}},
		{`[01]`, []string{"a"}},
		{`[1.]`, []string{"a"}},
		{`[-]`, []string{"a"}},
		{`["\x"]`, []string{"a"}},
		{`["\u12"]`, []string{"a"}},
		{"[\"a\tb\"]", []string{"a"}},
		{`[tru]`, []string{"a"}},
		{`[1] x`, []string{"a"}},
		{`[1][2]`, []string{"a"}},
		{`[{"a" 1}]`, []string{"a"}},
		{`[{1:2}]`, []string{"a"}},
		{`[{"a":1,}]`, []string{"a"}},
		{`[1 2]`, []string{"a"}},
		{`[NaN]`, []string{"a"}},
		{`["x"]`, []string{"a\"b\n"}},
		{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), nil},
		{"[" + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + "]", []string{"a"}},
		{"[" + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "]", []string{"a"}},
	}
}
