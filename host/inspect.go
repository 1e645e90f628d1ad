package host

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
	"github.com/flowhost/flowhost/plugins/suggest"
)

// Inspect writes what the data directory dir holds: streams and their
// partitions with positions, the queues between computations, each
// computation partition's last committed epoch, pending timers and state
// (each key's state size when keys is true), and the sinks' positions. The
// pipeline must not be running (it holds the directory). Inspect writes
// nothing to dir: a directory that does not exist or holds no store is
// refused with store.ErrNoStore, and none is created.
func Inspect(w io.Writer, dir string, keys bool) error {
	st, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := st.Inspect()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "data directory %s: %d records, %s on disk\n", dir, rep.RecordCount, byteSize(int64(rep.StoreBytes)))

	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nsource streams")
	fmt.Fprintln(tw, "  stream\tpartition\tretained\tappended\trouted\tunrouted\tevent watermark")
	for _, s := range rep.Sources {
		fmt.Fprintf(tw, "  %s\tp%d\t[%d, %d)\t%d\t%d\t%d\t%s\n", s.Stream, s.Partition, s.First, s.End, s.Appended, s.Read,
			s.Appended-min(s.Read, s.Appended), watermark(s.Watermarks.Event))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nqueues (committed, not yet consumed)")
	if len(rep.Queues) == 0 {
		fmt.Fprintln(w, "  all empty")
	}
	for _, q := range rep.Queues {
		fmt.Fprintf(tw, "  %s\t%d messages\t%s\n", q.Dest, q.Messages, byteSize(int64(q.Bytes)))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ncomputation partitions")
	fmt.Fprintln(tw, "  partition\tlast epoch\ttimers\tkeys with state\tstate bytes\toutput event watermark")
	for _, p := range rep.Partitions {
		total := 0
		for _, k := range p.States {
			total += k.Bytes
		}
		epoch, wm := "-", "-"
		if p.HasMeta {
			epoch, wm = strconv.FormatUint(p.Meta.Epoch, 10), watermark(p.Meta.Out.Event)
		}
		fmt.Fprintf(tw, "  %s/p%d\t%s\t%d\t%d\t%s\t%s\n", p.Computation, p.Partition, epoch, p.Timers, len(p.States), byteSize(int64(total)), wm)
	}
	tw.Flush()
	if keys {
		for _, p := range rep.Partitions {
			if len(p.States) == 0 {
				continue
			}
			fmt.Fprintf(w, "\nstate of %s/p%d\n", p.Computation, p.Partition)
			for _, k := range p.States {
				fmt.Fprintf(tw, "  %s\t%d bytes\n", k.Key, k.Bytes)
			}
			tw.Flush()
		}
	}

	fmt.Fprintln(w, "\nsinks")
	for _, s := range rep.Sinks {
		line := fmt.Sprintf("  %s\t%d records committed", s.Name, s.Position.Records)
		if s.Position.Bytes > 0 {
			line += fmt.Sprintf("\tfile length %d", s.Position.Bytes)
		}
		if s.LogRecords > 0 {
			line += fmt.Sprintf("\tlog [%d, %d)", s.LogFirst, s.LogEnd)
		}
		if s.Position.Batch > 0 {
			line += fmt.Sprintf("\tkafka batch %d committed", s.Position.Batch)
		}
		if p := s.Position.Pending; p != nil {
			line += fmt.Sprintf("\tkafka batch %d pending (settled with the marker on the next start)", p.N)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func watermark(ns int64) string {
	switch ns {
	case ordering.NoWatermark:
		return "none"
	case 1<<63 - 1:
		return "end of data"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ParseReplay reads `--from` values: SOURCE=OFFSET, SOURCE=TIME (RFC 3339,
// the first record written at or after it), or OFFSET / TIME alone for
// every source of pipe.
func ParseReplay(values []string, pipe *spec.Pipeline) (map[string]runtime.Replay, error) {
	out := map[string]runtime.Replay{}
	for _, v := range values {
		name, pos, named := strings.Cut(v, "=")
		if !named {
			pos = v
		}
		rp, err := parseReplayPosition(pos)
		if err != nil {
			return nil, fmt.Errorf("--from %q: %w", v, err)
		}
		if !named {
			for _, s := range pipe.Sources {
				out[s.Name] = rp
			}
			continue
		}
		found := false
		for _, s := range pipe.Sources {
			found = found || s.Name == name
		}
		if !found {
			names := make([]string, len(pipe.Sources))
			for i, s := range pipe.Sources {
				names[i] = s.Name
			}
			hint := suggest.DidYouMean(name, names)
			if hint != "" {
				hint = "; " + hint
			}
			return nil, fmt.Errorf("--from %q: the pipeline has no source %q%s (sources: %s)", v, name, hint, strings.Join(names, ", "))
		}
		out[name] = rp
	}
	return out, nil
}

func parseReplayPosition(pos string) (runtime.Replay, error) {
	if off, err := strconv.ParseUint(pos, 10, 64); err == nil {
		return runtime.Replay{Offset: off, ByOffset: true}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, pos)
	if err != nil {
		return runtime.Replay{}, fmt.Errorf("expected an offset (a non-negative integer) or an RFC 3339 time such as 2024-05-01T10:00:00Z")
	}
	return runtime.Replay{WriteTime: t.UnixNano()}, nil
}
