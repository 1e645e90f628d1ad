package runtime

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
)

// TraceRecord is one line of the --trace file: one delivery of a message or
// a timer to a computation, written in the exact order delivered within the
// computation partition. Field names are part of flowhost's interface:
// tools and the project's conformance checks read them.
type TraceRecord struct {
	Computation string   `json:"computation"`
	Partition   int      `json:"partition"`
	Epoch       uint64   `json:"epoch"`
	Key         string   `json:"key"`
	Kind        string   `json:"kind"` // "message" or "timer"
	Stream      string   `json:"stream"`
	MessageID   string   `json:"message_id"`
	Parents     []string `json:"parents"`
	EventTS     int64    `json:"event_ts"`
	SystemTS    int64    `json:"system_ts"`
	AlignmentTS int64    `json:"alignment_ts"`
	WriteTS     int64    `json:"write_ts"`
	Bias        int64    `json:"bias"`
	Delay       int64    `json:"delay"`
	PriorityTS  int64    `json:"priority_ts"`
	TaskID      uint64   `json:"task_id"`
	TriggerTS   int64    `json:"trigger_ts"`
}

// Trace kinds.
const (
	TraceMessage = "message"
	TraceTimer   = "timer"
)

// traceWriter serialises the trace lines of every partition. Each partition
// hands over one batch's records at once, so a batch's deliveries stay
// contiguous in the file.
type traceWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

func newTraceWriter(w io.Writer) *traceWriter {
	bw := bufio.NewWriterSize(w, 1<<16)
	return &traceWriter{w: bw, enc: json.NewEncoder(bw)}
}

func (t *traceWriter) write(recs []TraceRecord) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range recs {
		if t.err != nil {
			return t.err
		}
		t.err = t.enc.Encode(&recs[i])
	}
	return t.err
}

func (t *traceWriter) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	return t.w.Flush()
}
