package connect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/flowhost/flowhost/ordering"
)

// DefaultMaxLineBytes bounds a record line when the config gives no bound.
const DefaultMaxLineBytes = 1 << 20

// intake turns record lines into records or rejections; the file and HTTP
// sources share it.
type intake struct {
	stream      string
	partitioner *Partitioner
	decoder     *RecordDecoder
}

func newIntake(stream string, partitions int, partitionBy []string, format SourceFormat, et EventTimeSource) (intake, error) {
	if err := ordering.CheckName(stream); err != nil {
		return intake{}, fmt.Errorf("stream: %w", err)
	}
	if et.Header != "" {
		return intake{}, errors.New("only Kafka records have headers; the event time comes from a field of the JSON payload")
	}
	d, err := NewRecordDecoder(format, et)
	if err != nil {
		return intake{}, err
	}
	if d.Format() == SourceRaw && len(partitionBy) > 0 {
		return intake{}, errors.New("format raw payloads are not JSON, so partition_by cannot read fields of them")
	}
	p, err := NewPartitioner(partitions, partitionBy)
	if err != nil {
		return intake{}, err
	}
	return intake{stream: stream, partitioner: p, decoder: d}, nil
}

// skips reports whether line carries no record: a blank line does not,
// except in format raw, where every line is a record, as it is.
func (in *intake) skips(line []byte) bool {
	return in.decoder.Format() != SourceRaw && len(bytes.TrimSpace(line)) == 0
}

// parse reads one line whose origin is "name:line". On failure it returns
// the rejection and where the fault is: its 1-based byte column (0 when it
// is not at a column, e.g. a missing key field) and the record field at
// fault, if any.
func (in *intake) parse(line []byte, origin string) (Record, *Rejection, lineFault) {
	lr, err := in.decoder.Decode(line)
	if err != nil {
		var le *LineError
		errors.As(err, &le) // Decode only returns *LineError
		return Record{}, &Rejection{
			Origin: origin + ":" + strconv.Itoa(le.Column),
			Stage:  StageIngest,
			Err:    le.Err,
			Record: bytes.Clone(line),
		}, lineFault{column: le.Column, field: le.Field}
	}
	partition, err := in.partitioner.Partition(lr.Payload)
	if err != nil {
		return Record{}, &Rejection{Origin: origin, Stage: StageKey, Err: fmt.Errorf("partition_by: %w", err), Record: bytes.Clone(line)}, lineFault{field: "payload"}
	}
	return Record{
		Stream: in.stream, Partition: partition, RoundRobin: in.partitioner.RoundRobin(),
		Event: lr.Event, HasEvent: lr.HasEvent,
		Write: lr.Write, HasWrite: lr.HasWrite,
		Payload: lr.Payload, Origin: origin, ID: lr.ID, Parents: lr.Parents,
	}, nil, lineFault{}
}

// lineFault locates what is wrong with a refused line.
type lineFault struct {
	column int
	field  string
}

// FileSourceConfig configures a [FileSource].
type FileSourceConfig struct {
	// Path is the file to replay, one record a line; it also names
	// records' origins ("PATH:LINE").
	Path string
	// Format is how a line is read ("" is [SourceEnvelope]); EventTime
	// (its Field, for format json) where the event time is.
	Format    SourceFormat
	EventTime EventTimeSource
	// Stream is the source stream; Partitions (at least 1) its partition
	// count; PartitionBy the fields that choose a partition (none: round
	// robin).
	Stream      string
	Partitions  int
	PartitionBy []string
	// MaxLineBytes bounds a line (default [DefaultMaxLineBytes]); a longer
	// line is refused, and its first MaxLineBytes bytes go to the dead
	// letter.
	MaxLineBytes int
	// Reject receives every refused line. An error from it stops the run.
	// Nil makes the first bad line stop the run with its error.
	Reject func(Rejection) error
	// Progress, if set, is called after every line and, with Done set,
	// at the end of the file.
	Progress func(FileProgress)
	// Resume is a token from a record's [Record.Resume]: Run continues
	// with the line after that record. Nil starts at the beginning.
	Resume []byte
}

// FileProgress is how far a [FileSource] has got.
type FileProgress struct {
	// BytesRead of TotalBytes (the file's size when the run started).
	BytesRead, TotalBytes int64
	// StartBytes is where this run started reading: 0, or the position
	// after what earlier runs read (Resume).
	StartBytes int64
	// Done is set on the last call, at the end of the file; BytesRead ==
	// StartBytes then means there was nothing new to read.
	Done bool
	// Records emitted and lines Rejected so far.
	Records, Rejected int64
}

// FileSource replays a file of records, one a line, in its format (see the
// package documentation). Blank lines are skipped, except in format raw;
// "\r\n" line ends are accepted, and are not part of a record.
type FileSource struct {
	cfg    FileSourceConfig
	intake intake
}

// NewFileSource checks cfg. The file is opened by Run.
func NewFileSource(cfg FileSourceConfig) (*FileSource, error) {
	if cfg.Path == "" {
		return nil, errors.New("file source: path is empty")
	}
	in, err := newIntake(cfg.Stream, cfg.Partitions, cfg.PartitionBy, cfg.Format, cfg.EventTime)
	if err != nil {
		return nil, fmt.Errorf("file source %s: %w", cfg.Path, err)
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	cfg.PartitionBy = append([]string(nil), cfg.PartitionBy...)
	return &FileSource{cfg: cfg, intake: in}, nil
}

// Run emits the file's records in file order and returns nil at its end.
func (s *FileSource) Run(ctx context.Context, emit func(Record) error) error {
	f, err := os.Open(s.cfg.Path)
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	defer f.Close()
	var progress FileProgress
	if fi, err := f.Stat(); err == nil {
		progress.TotalBytes = fi.Size()
	}
	reject := s.cfg.Reject
	if reject == nil {
		reject = func(r Rejection) error { return fmt.Errorf("%s: %w", r.Origin, r.Err) }
	}
	offset, lineNo, err := parseFileResume(s.cfg.Resume)
	if err != nil {
		return fmt.Errorf("file source %s: %w", s.cfg.Path, err)
	}
	if offset > progress.TotalBytes {
		return fmt.Errorf("file source %s: resuming at byte %d (line %d), but the file has only %d bytes: it was replaced or cut since the last run; use a fresh data directory to read it anew", s.cfg.Path, offset, lineNo, progress.TotalBytes)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("file source %s: %w", s.cfg.Path, err)
	}
	progress.BytesRead, progress.StartBytes = offset, offset
	lines := lineReader{r: bufio.NewReaderSize(f, 64<<10), max: s.cfg.MaxLineBytes}
	for ; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, n, tooLong, err := lines.next()
		if err == io.EOF && n == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("file source %s:%d: %w", s.cfg.Path, lineNo, err)
		}
		progress.BytesRead += int64(n)
		origin := s.cfg.Path + ":" + strconv.Itoa(lineNo)
		var rej *Rejection
		switch {
		case tooLong:
			rej = &Rejection{
				Origin: origin + ":" + strconv.Itoa(s.cfg.MaxLineBytes+1), Stage: StageIngest,
				Err:    fmt.Errorf("line is longer than %d bytes (dead letter keeps its start)", s.cfg.MaxLineBytes),
				Record: bytes.Clone(line),
			}
		case s.intake.skips(line):
		default:
			var rec Record
			rec, rej, _ = s.intake.parse(line, origin)
			if rej == nil {
				rec.Resume = fileResume(progress.BytesRead, lineNo+1)
				if err := emit(rec); err != nil {
					return err
				}
				progress.Records++
			}
		}
		if rej != nil {
			if err := reject(*rej); err != nil {
				return err
			}
			progress.Rejected++
		}
		if s.cfg.Progress != nil {
			s.cfg.Progress(progress)
		}
	}
	if s.cfg.Progress != nil {
		progress.Done = true
		s.cfg.Progress(progress)
	}
	return nil
}

// fileResume is the token of the position after a record: the byte offset
// and the number of the next line, "OFFSET:LINE".
func fileResume(offset int64, nextLine int) []byte {
	b := strconv.AppendInt(nil, offset, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(nextLine), 10)
}

// parseFileResume reads a fileResume token; nil is the file's start.
func parseFileResume(tok []byte) (offset int64, line int, err error) {
	if tok == nil {
		return 0, 1, nil
	}
	off, ln, ok := strings.Cut(string(tok), ":")
	o, err1 := strconv.ParseInt(off, 10, 64)
	l, err2 := strconv.Atoi(ln)
	if !ok || err1 != nil || err2 != nil || o < 0 || l < 1 {
		return 0, 0, fmt.Errorf("resume position %q is not OFFSET:LINE", tok)
	}
	return o, l, nil
}

// lineReader splits a stream into lines of bounded length.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its "\n" or "\r\n", the number of
// bytes it took from the stream, and whether it was cut at max bytes (the
// rest of it is consumed). At the end of the stream it returns io.EOF,
// with the last line if that had no terminator.
func (lr *lineReader) next() (line []byte, n int, tooLong bool, err error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += len(chunk)
		if room := lr.max + 2 - len(lr.buf); room > 0 { // +2: the terminator
			lr.buf = append(lr.buf, chunk[:min(len(chunk), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = lr.buf
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > lr.max {
			return line[:lr.max], n, true, nil
		}
		if err != nil && err != io.EOF {
			return nil, n, false, err
		}
		return line, n, false, err
	}
}
