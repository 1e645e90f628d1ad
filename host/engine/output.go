package engine

import (
	"bytes"
	"context"
	"log/slog"
)

// maxLineBytes bounds a guest log line and a buffered partial stdio line,
// so a guest cannot make the host hold unbounded text.
const maxLineBytes = 16 << 10

// lineWriter turns a guest's stdout or stderr into log records, one per
// line, and remembers the first line written since the last reset: for a
// Go guest that is "panic: ..." or "runtime: out of memory ...", the best
// detail for the error of the call that died. Instances are used by one
// goroutine at a time, and so is their lineWriter.
type lineWriter struct {
	logger  *slog.Logger
	level   slog.Level
	stream  string
	partial []byte
	first   string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLineBytes - len(w.partial)
			if len(p) < room {
				w.partial = append(w.partial, p...)
				break
			}
			w.partial = append(w.partial, p[:room]...)
			p = p[room:]
			w.flush()
			continue
		}
		w.partial = append(w.partial, p[:i]...)
		p = p[i+1:]
		w.flush()
	}
	return n, nil
}

// flush logs the buffered line, truncated to maxLineBytes.
func (w *lineWriter) flush() {
	line := w.partial
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes]
	}
	w.partial = w.partial[:0]
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	s := string(line)
	if w.first == "" {
		w.first = s
	}
	w.logger.Log(context.Background(), w.level, s, slog.String("stream", w.stream))
}

// reset forgets the first line, at the start of a call.
func (w *lineWriter) reset() { w.first = "" }

// firstLine returns the first complete or partial line written since the
// last reset.
func (w *lineWriter) firstLine() string {
	if w.first == "" && len(w.partial) > 0 {
		return string(w.partial)
	}
	return w.first
}
