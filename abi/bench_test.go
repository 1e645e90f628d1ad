package abi

import (
	"bytes"
	"strconv"
	"testing"
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

func BenchmarkEncodeRequest(b *testing.B) {
	req, _ := benchBatch(1000, 100)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := EncodeRequestTo(&buf, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
	b.SetBytes(int64(buf.Len()))
}

func BenchmarkDecodeResponse(b *testing.B) {
	req, resp := benchBatch(1000, 100)
	data, err := EncodeResponse(resp)
	if err != nil {
		b.Fatal(err)
	}
	outputs := []string{"enriched"}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		got, err := DecodeResponse(data, ResponseLimits{})
		if err != nil {
			b.Fatal(err)
		}
		if err := ValidateResponse(got, req, outputs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
}

func BenchmarkDecodeRequest(b *testing.B) {
	req, _ := benchBatch(1000, 100)
	data, err := EncodeRequest(req)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeRequest(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/message")
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
