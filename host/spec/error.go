package spec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/printer"
	"github.com/goccy/go-yaml/token"
)

// Error is one problem in a spec, located in its file. Line and Column are
// 1-based and always set for errors returned by Parse; they point at the
// offending value, key or section.
type Error struct {
	// File is the name of the spec file.
	File string
	// Line is the 1-based line of the offending node.
	Line int
	// Column is the 1-based column of the offending node.
	Column int
	// Path locates the offending field, as in "computations[1].kind"; empty for
	// problems of the document as a whole.
	Path string
	// Message says what is wrong and what was expected.
	Message string

	// token is the offending token, for printing the source around it.
	token *token.Token
}

// Error formats the error as "file:line:column: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is every problem Parse found, in file order. Parse returns an
// ErrorList (never empty) for any problem in the spec itself; errors.As with a
// *Error target yields the first.
type ErrorList []*Error

// Error formats the errors one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each *Error to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// FormatError renders err for a terminal: each spec error followed by the
// lines of the spec around it with a caret under the offending column (goccy's
// error printer), optionally in color; what an error wrapping the spec errors
// says before them is kept as their first line. Other errors are rendered with
// Error.
func FormatError(err error, colored bool) string {
	var list ErrorList
	if !errors.As(err, &list) {
		var one *Error
		if !errors.As(err, &one) {
			return err.Error()
		}
		list = ErrorList{one}
	}
	parts := make([]string, 0, len(list)+1)
	if text, inner := err.Error(), list.Error(); len(inner) > 0 {
		if i := strings.Index(text, inner); i > 0 {
			parts = append(parts, strings.TrimRight(text[:i], " \n"))
		}
	}
	for _, e := range list {
		part := e.Error()
		if e.token != nil {
			var p printer.Printer
			part += "\n" + p.PrintErrorToken(e.token, colored)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "\n")
}
