package flowhost

import (
	"fmt"
	"strconv"
)

// Level is the severity of a log line; the values are log/slog's.
type Level int32

// Log levels.
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// String returns the level's name as log/slog writes it.
func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "DEBUG"
	case LevelInfo:
		return "INFO"
	case LevelWarn:
		return "WARN"
	case LevelError:
		return "ERROR"
	}
	return "LEVEL(" + strconv.Itoa(int(l)) + ")"
}

// logSink receives every log line. In a WebAssembly guest it is the host's
// imported flowhost.log; elsewhere (tests of a computation) it writes to
// standard error. Tests of this package replace it.
var logSink = hostLog

// Log writes msg to the host's log at level; the host adds the plugin's
// name. It is meant for diagnostics, not for data: every call crosses the
// WebAssembly boundary.
func Log(level Level, msg string) { logSink(level, msg) }

// Logf is Log with fmt.Sprintf formatting.
func Logf(level Level, format string, args ...any) { logSink(level, fmt.Sprintf(format, args...)) }
