package benthosbench_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"log/slog"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	// The pure components bring the "none" metrics exporter and tracer
	// that the stream builder's defaults name.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

// records is the number of records of one benchmark run: flowhost's
// `make bench` passes the count its own benchmarks use.
var records = flag.Int("records", 1_000_000, "records per benchmark run")

// batchSize is the number of records the input hands Benthos at once:
// flowhost's default batch size (spec.DefaultBatchMaxRows).
const batchSize = 1000

// payload is the i-th record's payload, byte for byte the one of
// flowhost's memorySource (host/bench_test.go): about 100 bytes over 1000
// keys.
func payload(i int) []byte {
	return fmt.Appendf(nil, `{"k":"key-%04d","seq":"%09d","fill":"%s"}`, i%1000, i, "0123456789012345678901234567890123456789012345678901")
}

// recordsInput hands out count records in batches of batchSize, then ends
// the input, which ends the stream once every batch is acknowledged.
type recordsInput struct {
	count, next int
}

func (r *recordsInput) Connect(context.Context) error { return nil }

func (r *recordsInput) ReadBatch(context.Context) (service.MessageBatch, service.AckFunc, error) {
	if r.next >= r.count {
		return nil, nil, service.ErrEndOfInput
	}
	n := min(batchSize, r.count-r.next)
	batch := make(service.MessageBatch, n)
	for j := range batch {
		batch[j] = service.NewMessage(payload(r.next + j))
	}
	r.next += n
	return batch, func(_ context.Context, err error) error { return err }, nil
}

func (r *recordsInput) Close(context.Context) error { return nil }

// noopProcessor hands every batch on unchanged.
type noopProcessor struct{}

func (noopProcessor) ProcessBatch(_ context.Context, b service.MessageBatch) ([]service.MessageBatch, error) {
	return []service.MessageBatch{b}, nil
}
func (noopProcessor) Close(context.Context) error { return nil }

// wasmProcessor calls the identity guest once per message: the payload is
// written into the guest's memory, identity copies it, and the bytes it
// returns become the message's payload. Benthos builds one processor per
// pipeline thread, so one instance is never called concurrently.
type wasmProcessor struct {
	rt    wazero.Runtime
	mod   api.Module
	mem   api.Memory
	fn    api.Function
	stack []uint64
}

// identityWasm is testdata/identity.wat compiled by wat2wasm, once.
var identityWasm = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "benthosbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "identity.wasm")
	if msg, err := exec.Command("wat2wasm", "-o", out, filepath.Join("testdata", "identity.wat")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wat2wasm testdata/identity.wat (Debian package wabt): %v: %s", err, msg)
	}
	return os.ReadFile(out)
})

func newWasmProcessor(ctx context.Context) (*wasmProcessor, error) {
	wasm, err := identityWasm()
	if err != nil {
		return nil, err
	}
	// The compiler, not interruptible: the engine settings of flowhost's
	// guest benchmarks.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	return &wasmProcessor{rt: rt, mod: mod, mem: mod.Memory(), fn: mod.ExportedFunction("identity"), stack: make([]uint64, 2)}, nil
}

func (p *wasmProcessor) ProcessBatch(ctx context.Context, b service.MessageBatch) ([]service.MessageBatch, error) {
	for i, m := range b {
		in, err := m.AsBytes()
		if err != nil {
			return nil, err
		}
		if len(in) > 65536 || !p.mem.Write(0, in) {
			return nil, fmt.Errorf("message %d: %d bytes do not fit the guest's 64 KiB input region", i, len(in))
		}
		p.stack[0], p.stack[1] = 0, uint64(len(in))
		if err := p.fn.CallWithStack(ctx, p.stack); err != nil {
			return nil, fmt.Errorf("message %d: identity: %w", i, err)
		}
		out, ok := p.mem.Read(uint32(p.stack[0]), uint32(len(in)))
		if !ok {
			return nil, fmt.Errorf("message %d: identity returned offset %d, outside its memory", i, p.stack[0])
		}
		// out aliases the guest's memory, which the next call overwrites.
		m.SetBytes(bytes.Clone(out))
	}
	return []service.MessageBatch{b}, nil
}

func (p *wasmProcessor) Close(ctx context.Context) error { return p.rt.Close(ctx) }

func init() {
	err := errors.Join(
		service.RegisterBatchInput("flowhost_records",
			service.NewConfigSpec().Field(service.NewIntField("count")),
			func(conf *service.ParsedConfig, _ *service.Resources) (service.BatchInput, error) {
				n, err := conf.FieldInt("count")
				return &recordsInput{count: n}, err
			}),
		service.RegisterBatchProcessor("flowhost_noop", service.NewConfigSpec(),
			func(*service.ParsedConfig, *service.Resources) (service.BatchProcessor, error) {
				return noopProcessor{}, nil
			}),
		service.RegisterBatchProcessor("flowhost_wazero_identity", service.NewConfigSpec(),
			func(*service.ParsedConfig, *service.Resources) (service.BatchProcessor, error) {
				return newWasmProcessor(context.Background())
			}),
	)
	if err != nil {
		panic(err)
	}
}

// run streams n records through Benthos with the processor named proc
// (one pipeline thread, as flowhost's one partition) into a consumer that
// hands every batch to consume, and returns when the input has ended and
// every batch was consumed.
func run(tb testing.TB, proc string, n int, consume func(service.MessageBatch) error) {
	tb.Helper()
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.DiscardHandler))
	// A mux of our own, so that Benthos starts no HTTP server.
	sb.SetHTTPMux(http.NewServeMux())
	sb.SetThreads(1)
	must(tb, sb.AddInputYAML(fmt.Sprintf("flowhost_records: {count: %d}", n)))
	must(tb, sb.AddProcessorYAML(proc+": {}"))
	must(tb, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error { return consume(b) }))
	stream, err := sb.Build()
	must(tb, err)
	must(tb, stream.Run(context.Background()))
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// TestBothPathsDeliverEveryRecordInOrder checks that each measured path
// delivers exactly the generated payloads, each once, in input order.
func TestBothPathsDeliverEveryRecordInOrder(t *testing.T) {
	const n = 2500 // two full batches and a short one
	for _, proc := range []string{"flowhost_noop", "flowhost_wazero_identity"} {
		t.Run(proc, func(t *testing.T) {
			next := 0
			run(t, proc, n, func(b service.MessageBatch) error {
				for _, m := range b {
					got, err := m.AsBytes()
					if err != nil {
						return err
					}
					if want := payload(next); !bytes.Equal(got, want) {
						return fmt.Errorf("record %d: got %q, want %q", next, got, want)
					}
					next++
				}
				return nil
			})
			if next != n {
				t.Fatalf("%d records delivered, want %d", next, n)
			}
		})
	}
}

// BenchmarkBenthos runs the records through Benthos with a no-op batch
// processor and with the wazero identity called per message, and reports
// for each msgs/s (wall) and cpu-ns/msg (the process's user and system
// CPU time, steadier than wall time on a loaded machine):
//
//	go test -run '^$' -bench Benthos -benchtime 1x
//
// Both paths first run a short warm-up stream, so that neither pays alone
// for what the first stream of a process costs (Benthos's and wazero's
// one-off set-up, the heap growing to its working size).
func BenchmarkBenthos(b *testing.B) {
	variants := []struct{ name, proc string }{
		{"noop", "flowhost_noop"},
		{"wazero", "flowhost_wazero_identity"},
	}
	for _, v := range variants {
		run(b, v.proc, 50*batchSize, func(service.MessageBatch) error { return nil })
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			n := *records
			var total atomic.Int64
			b.ResetTimer()
			cpu0, cpuOK := cpuTime()
			start := time.Now()
			for range b.N {
				run(b, v.proc, n, func(batch service.MessageBatch) error {
					total.Add(int64(len(batch)))
					return nil
				})
			}
			elapsed := time.Since(start)
			cpu1, _ := cpuTime()
			if want := int64(n) * int64(b.N); total.Load() != want {
				b.Fatalf("%d records delivered, want %d", total.Load(), want)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "msgs/s")
			if cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(n*b.N), "cpu-ns/msg")
			}
		})
	}
}
