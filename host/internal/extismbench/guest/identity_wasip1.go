//go:build wasip1

package main

import "encoding/binary"

// The Extism kernel's imports, as github.com/extism/go-sdk's
// instantiateEnvModule defines them.

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func inputLoadU64(offset uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env alloc
func alloc(length uint64) uint64

//go:wasmimport extism:host/env store_u64
func storeU64(offset, value uint64)

//go:wasmimport extism:host/env store_u8
func storeU8(offset uint64, value uint32)

//go:wasmimport extism:host/env output_set
func outputSet(offset, length uint64)

// input copies the call's input from kernel memory into guest memory,
// eight bytes per host call and the tail byte by byte, as go-pdk's Input.
func input() []byte {
	n := inputLength()
	buf := make([]byte, n)
	words := n &^ 7
	for i := uint64(0); i < words; i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], inputLoadU64(i))
	}
	for i := words; i < n; i++ {
		buf[i] = byte(inputLoadU8(i))
	}
	return buf
}

// output copies data into a kernel allocation and makes it the call's
// output, as go-pdk's Output.
func output(data []byte) {
	n := uint64(len(data))
	offset := alloc(n)
	words := n &^ 7
	for i := uint64(0); i < words; i += 8 {
		storeU64(offset+i, binary.LittleEndian.Uint64(data[i:]))
	}
	for i := words; i < n; i++ {
		storeU8(offset+i, uint32(data[i]))
	}
	outputSet(offset, n)
}

//go:wasmexport identity
func identity() int32 {
	output(input())
	return 0
}
