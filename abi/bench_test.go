package abi

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// benchBatch builds a batch of n messages over n/10 keys with payloads of
// payloadSize bytes and realistic nanosecond timestamps, and a response
// that emits one message per input with an explicit parent.
func benchBatch(n, payloadSize int) (*Request, *Response) {
	const base = int64(1_750_000_000_000_000_000)
	payload := bytes.Repeat([]byte{'x'}, payloadSize)
	req := &Request{ABI: Version, Computation: "enrich", Kind: KindTransform, Partition: 3, Epoch: 42,
		Watermarks: Watermarks{Event: base, System: base}}
	resp := &Response{}
	perKey := 10
	for k := 0; k < n/perKey; k++ {
		rk := RequestKey{Key: "user-" + strconv.Itoa(k), State: []byte("state")}
		out := ResponseKey{Key: rk.Key}
		for m := range perKey {
			i := k*perKey + m
			rk.Messages = append(rk.Messages, Message{
				ID: "17-clicks:" + strconv.Itoa(i), Stream: "clicks",
				EventTimestamp: base + int64(i), SystemTimestamp: base + int64(i) + 5, AlignmentTimestamp: base + int64(i) + 7,
				Payload: payload,
			})
			out.Emits = append(out.Emits, Emit{Stream: "enriched", Payload: payload, Parents: []uint32{uint32(m)}})
		}
		req.Keys = append(req.Keys, rk)
		resp.Keys = append(resp.Keys, out)
	}
	return req, resp
}

// The codec benchmarks run the reference codec (fxamacker/cbor behind the
// same checker, reference_test.go) and the specialised one side by side, so
// that their ratio comes from one run:
//
//	go test -run '^$' -bench 'EncodeRequest|DecodeResponse|DecodeRequest|EncodeResponse' -count 3 ./abi/

// perMessage reports the time per message of a batch of n messages: wall
// time, and the process's CPU time (GC included) since start, which a
// shared machine's waiting for a core does not inflate.
func perMessage(b *testing.B, n int, start time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/message")
	if cpu := processCPU() - start; start > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/message")
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	req, _ := benchBatch(1000, 100)
	for _, c := range []struct {
		name   string
		encode func(*bytes.Buffer, *Request) error
	}{
		{"reference", func(buf *bytes.Buffer, req *Request) error { return encMode.MarshalToBuffer(req, buf) }},
		{"specialised", EncodeRequestTo},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				buf.Reset()
				if err := c.encode(&buf, req); err != nil {
					b.Fatal(err)
				}
			}
			perMessage(b, 1000, start)
			b.SetBytes(int64(buf.Len()))
		})
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	_, resp := benchBatch(1000, 100)
	for _, c := range []struct {
		name   string
		encode func(*bytes.Buffer, *Response) error
	}{
		{"reference", func(buf *bytes.Buffer, resp *Response) error { return encMode.MarshalToBuffer(resp, buf) }},
		{"specialised", EncodeResponseTo},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				buf.Reset()
				if err := c.encode(&buf, resp); err != nil {
					b.Fatal(err)
				}
			}
			perMessage(b, 1000, start)
			b.SetBytes(int64(buf.Len()))
		})
	}
}

// BenchmarkDecodeResponse decodes and validates a response of 1000 emits,
// as the host does with every batch.
func BenchmarkDecodeResponse(b *testing.B) {
	req, resp := benchBatch(1000, 100)
	data, err := EncodeResponse(resp)
	if err != nil {
		b.Fatal(err)
	}
	outputs := []string{"enriched"}
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Response, error)
	}{
		{"reference", func(data []byte) (*Response, error) {
			limits := DefaultResponseLimits()
			var resp Response
			return &resp, refDecode(data, responseSchema, limits, &resp)
		}},
		{"specialised", func(data []byte) (*Response, error) { return DecodeResponse(data, ResponseLimits{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			start := processCPU()
			for b.Loop() {
				got, err := c.decode(data)
				if err != nil {
					b.Fatal(err)
				}
				if err := ValidateResponse(got, req, outputs); err != nil {
					b.Fatal(err)
				}
			}
			perMessage(b, 1000, start)
		})
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	req, _ := benchBatch(1000, 100)
	data, err := EncodeRequest(req)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Request, error)
	}{
		{"reference", func(data []byte) (*Request, error) {
			var req Request
			return &req, refDecode(data, requestSchema, ResponseLimits{}, &req)
		}},
		{"specialised", DecodeRequest},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			start := processCPU()
			for b.Loop() {
				if _, err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
			perMessage(b, 1000, start)
		})
	}
}

func BenchmarkCheckResponse(b *testing.B) {
	_, resp := benchBatch(1000, 100)
	data, err := EncodeResponse(resp)
	if err != nil {
		b.Fatal(err)
	}
	limits := DefaultResponseLimits()
	b.ReportAllocs()
	for b.Loop() {
		if err := check(data, responseSchema, limits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
}
