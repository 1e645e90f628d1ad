// Command guest is the Extism side of the comparison: an Extism plugin
// written in Go whose export "identity" returns its input unchanged. It
// does what github.com/extism/go-pdk's Input and Output do (that module is
// not available here), through the same kernel imports, so that it costs
// what an ordinary Go Extism plugin costs.
//
// Build it for WebAssembly as a reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o guest.wasm .
package main

func main() {}
