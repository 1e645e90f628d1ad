// Package abitest gives the tests of every SDK the golden vectors of
// abi/testdata/vectors: the request, response and init bytes that each
// language must read and write exactly. It is for tests only.
package abitest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Vector is the description of one golden case, from its NAME.json.
type Vector struct {
	// Name is the case's name; its parts are NAME.PART.cbor.
	Name string `json:"name"`
	// OutputStreams are the streams the computation declares.
	OutputStreams []string `json:"output_streams"`
}

// Dir returns the directory of the golden vectors, found from this
// package's source so that it works from any test's working directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "vectors")
}

// Read returns the bytes of one part of a case: "request", "response",
// "init" or "init_result". ok is false when the case has no such part;
// any other error fails the test.
func Read(tb testing.TB, name, part string) (b []byte, ok bool) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), name+"."+part+".cbor"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		tb.Fatalf("golden vector %s.%s: %v", name, part, err)
	}
	return b, true
}
