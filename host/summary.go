package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flowhost/flowhost/host/runtime"
)

// Exit statuses of `flowhost run` ([ExitCode]); a second SIGINT or SIGTERM
// exits at once with 128 + the signal's number (130, 143).
const (
	// ExitOK: the sources ended, or a signal stopped the run, and
	// everything accepted was delivered; no partition is quarantined.
	ExitOK = 0
	// ExitFailed: the run could not start (spec, plugins, data directory)
	// or stopped on a fatal error: a source, sink or computation that
	// could not continue.
	ExitFailed = 1
	// ExitQuarantined: the run ended with a quarantined partition, whose
	// inputs went to the dead-letter route.
	ExitQuarantined = 3
	// ExitInterrupted: a signal stopped the run and the stop's grace
	// period ran out: running batches were interrupted and not committed,
	// and what was accepted and not delivered waits in the data directory
	// for the next run.
	ExitInterrupted = 4
)

// ErrQuarantined is wrapped by the error of a run that ended with a
// quarantined partition.
var ErrQuarantined = errors.New("the run ended with quarantined partitions: their inputs went to the dead-letter route")

// ExitCode maps the error [Run] returned to the exit status `flowhost
// run` documents: an interrupted stop before a quarantine before any
// other error.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, context.Canceled) && !errors.Is(err, runtime.ErrInterrupted):
		return ExitOK
	case errors.Is(err, runtime.ErrInterrupted):
		return ExitInterrupted
	case errors.Is(err, ErrQuarantined):
		return ExitQuarantined
	}
	return ExitFailed
}

// RunSummary is what a run did, as [Run] reports it when the run ends
// (RunConfig.Summary, RunConfig.SummaryJSON): the runtime's
// [runtime.Summary] with where it committed and how it ended.
type RunSummary struct {
	runtime.Summary
	// DataDir is the data directory; "" for a run in memory.
	DataDir string `json:"data_dir,omitempty"`
	// StoreTopic is the Kafka topic of a run whose store is on Kafka (a
	// cluster block); DataDir is then "".
	StoreTopic string `json:"store_topic,omitempty"`
	// ElapsedNanos is how long the pipeline ran (after its plugins were
	// loaded).
	ElapsedNanos int64 `json:"elapsed_ns"`
	// Error is why the run ended badly ("" when it did not), ExitCode
	// the exit status of `flowhost run` (see ExitCode).
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// finish completes the summary of a run that ended with err and returns
// the error Run reports: err, or one wrapping ErrQuarantined when the
// run otherwise ended well with a quarantined partition.
func (s *RunSummary) finish(err error) error {
	if err == nil {
		var qs []error
		for _, c := range s.Computations {
			for _, q := range c.Quarantined {
				qs = append(qs, fmt.Errorf("computation %q partition %d: %s", c.Name, q.Partition, q.Reason))
			}
		}
		if len(qs) > 0 {
			err = fmt.Errorf("%w: %w", ErrQuarantined, errors.Join(qs...))
		}
	}
	s.ExitCode = ExitCode(err)
	if err != nil && s.ExitCode != ExitOK {
		s.Error = err.Error()
	}
	return err
}

// write prints the summary for people to w.
func (s *RunSummary) write(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("run summary of pipeline %q (%s, exit status %d):", s.Pipeline, time.Duration(s.ElapsedNanos).Round(time.Millisecond), s.ExitCode)
	for _, src := range s.Sources {
		p("  source %s (stream %s): %d records in%s", src.Name, src.Stream, src.Records, deadLettersText(src.DeadLetters, src.TopCause))
	}
	for _, c := range s.Computations {
		who := ""
		if c.Tenant != "" {
			who = fmt.Sprintf(" (tenant %s)", c.Tenant)
		}
		p("  computation %s%s: %d messages in, %d out%s, %d timers pending", c.Name, who, c.MessagesIn, c.MessagesOut,
			deadLettersText(c.DeadLetters, c.TopCause), c.PendingTimers)
		for _, q := range c.Quarantined {
			p("    partition %d quarantined: %s", q.Partition, q.Reason)
		}
	}
	for _, sk := range s.Sinks {
		p("  sink %s: %d records out", sk.Name, sk.Records)
	}
	switch {
	case s.DataDir != "":
		p("  data directory: %s", s.DataDir)
	case s.StoreTopic != "":
		p("  store: Kafka topic %s", s.StoreTopic)
	default:
		p("  in memory: nothing was kept")
	}
	switch s.ExitCode {
	case ExitOK:
		p("  result: ok")
	case ExitInterrupted:
		if s.DataDir != "" || s.StoreTopic != "" {
			p("  result: interrupted: running batches were not committed; the next run on the same store processes them")
		} else {
			p("  result: interrupted: running batches were not committed, and in memory what was not delivered is lost")
		}
	case ExitQuarantined:
		p("  result: partitions quarantined (above): their inputs went to the dead-letter route")
	default:
		p("  result: %s", s.Error)
	}
}

func deadLettersText(n int64, top *runtime.DeadLetterCause) string {
	if n == 0 {
		return ", no dead letters"
	}
	text := fmt.Sprintf(", %d dead letters", n)
	if n == 1 {
		text = ", 1 dead letter"
	}
	if top != nil {
		text += fmt.Sprintf(" (most common cause, %d of them: %s)", top.Count, top.Error)
	}
	return text
}

// report writes the summary where cfg asks for it.
func (s *RunSummary) report(cfg *RunConfig) error {
	if cfg.Summary != nil {
		s.write(cfg.Summary)
	}
	if cfg.SummaryJSON == "" {
		return nil
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	if err := os.WriteFile(cfg.SummaryJSON, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}
