module github.com/flowhost/flowhost/host/internal/extismbench

go 1.26.0

require (
	github.com/extism/go-sdk v1.7.1
	github.com/flowhost/flowhost v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/bytecodealliance/wasmtime-go/v39 v39.0.1 // indirect
	github.com/dylibso/observe-sdk/go v0.0.0-20240819160327-2d926c5d788a // indirect
	github.com/fxamacker/cbor/v2 v2.10.0 // indirect
	github.com/gobwas/glob v0.2.3 // indirect
	github.com/ianlancetaylor/demangle v0.0.0-20240805132620-81f5be970eca // indirect
	github.com/tetratelabs/wabin v0.0.0-20230304001439-f6f874872834 // indirect
	github.com/tetratelabs/wazero v1.12.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opentelemetry.io/proto/otlp v1.3.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/flowhost/flowhost => ../../..
