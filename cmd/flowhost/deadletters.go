package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/spec"
)

// deadLetterFlags select dead letters of a file: the flags list and
// replay share.
type deadLetterFlags struct {
	specPath, file, since, until string
	filter                       opview.DeadLetterFilter
	pipe                         *spec.Pipeline // of specPath, once read
}

func (f *deadLetterFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.specPath, "file", "f", "", "pipeline spec whose dead-letter file to read")
	fl.StringVar(&f.file, "dead-letters", "", "the dead-letter file")
	fl.StringVar(&f.filter.Computation, "computation", "", "only those this computation refused")
	fl.StringVar(&f.filter.Cause, "cause", "", "only those whose error contains this text")
	fl.StringVar(&f.since, "since", "", "only those written at or after this RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "only those written before this RFC 3339 time")
}

// read calls fn with each dead letter selected.
func (f *deadLetterFlags) read(fn func(opview.DeadLetter) error) error {
	var err error
	if f.filter.Since, err = parseTimeFlag("--since", f.since); err != nil {
		return err
	}
	if f.filter.Until, err = parseTimeFlag("--until", f.until); err != nil {
		return err
	}
	if f.specPath != "" {
		if f.pipe, err = spec.ParseFile(f.specPath); err != nil {
			return err
		}
	}
	switch {
	case f.file != "" && f.specPath != "":
		return errors.New("give -f PIPELINE.yaml or --dead-letters, not both")
	case f.specPath != "":
		if f.pipe.DeadLetter.Type != spec.DeadLetterFile {
			return fmt.Errorf("%s: dead_letter is %q, not a file: nothing to read", f.specPath, f.pipe.DeadLetter.Type)
		}
		f.file = f.pipe.DeadLetter.File.Path
	case f.file == "":
		return errors.New("give -f PIPELINE.yaml or --dead-letters FILE.jsonl")
	}
	in, err := os.Open(f.file)
	if err != nil {
		return err
	}
	defer in.Close()
	return opview.ReadDeadLetters(in, f.file, f.filter, fn)
}

func newDeadLetters() *cobra.Command {
	cmd := &cobra.Command{Use: "dead-letters", Short: "Work with a pipeline's dead letters"}
	cmd.AddCommand(newDeadLettersList(), newDeadLettersReplay())
	return cmd
}

func newDeadLettersList() *cobra.Command {
	var dl deadLetterFlags
	var asJSON bool
	list := &cobra.Command{
		Use:   "list (-f PIPELINE.yaml | --dead-letters FILE.jsonl) [--computation C] [--cause TEXT] [--since T] [--until T]",
		Short: "List the dead letters of a dead-letter file, filtered",
		Long: `List reads a pipeline's dead-letter file (its dead_letter: {type: file}, or
--dead-letters) and prints the dead letters that the filters select, one a
line: time, stage, computation (or the origin of a record a source could not
read), error. --json prints each as the JSON line of the file with its line
number and computation. --since and --until take RFC 3339 times; --cause
selects the errors that contain its text. It only reads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			n := 0
			err := dl.read(func(d opview.DeadLetter) error {
				n++
				if asJSON {
					b, err := json.Marshal(d)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(out, string(b))
					return err
				}
				who := d.Computation
				if who == "" {
					who = d.Origin
				}
				_, err := fmt.Fprintf(out, "%s  %-6s  %s  %s\n", d.Time, d.Stage, who, d.Error)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d dead letters\n", n)
			return nil
		},
	}
	dl.add(list)
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON lines")
	return list
}

func newDeadLettersReplay() *cobra.Command {
	var dl deadLetterFlags
	var to, url, tokenFile, caFile string
	replay := &cobra.Command{
		Use:   "replay -f PIPELINE.yaml --to SOURCE [--url URL] [--computation C] [--cause TEXT] [--since T] [--until T]",
		Short: "Send selected dead letters again, after a fix, through an HTTP source of the running pipeline",
		Long: `Replay reads the dead letters the filters select (as dead-letters list does)
and posts their records to the HTTP source SOURCE of the running pipeline,
each with the id "dead-letter:COMPUTATION:MESSAGE-ID", where MESSAGE-ID is
the original message's id. An HTTP source with a data directory accepts an
id once: a dead letter replayed twice, or by a replay that was interrupted
and run again, reaches the pipeline exactly once. Give the pipeline an HTTP
source whose stream the computation reads, for its replays.

The source's URL is its listen address and path from the spec; one that
listens on a free port (:0) needs --url (its log says "http source
listening url=..."). Its bearer token is the spec's (auth) unless
--token-file is given; --ca-file trusts a self-signed certificate. Dead
letters of records a source could not read, and records that are not
JSON, are refused: fix those at their source.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dl.specPath == "" || to == "" {
				return errors.New("give the pipeline with -f and its HTTP source with --to")
			}
			var letters []opview.DeadLetter
			if err := dl.read(func(d opview.DeadLetter) error {
				if err := opview.Replayable(d); err != nil {
					return fmt.Errorf("%s: %w", dl.file, err)
				}
				letters = append(letters, d)
				return nil
			}); err != nil {
				return err
			}
			src := dl.pipe.Source(to)
			if src == nil || src.Type != spec.SourceHTTP {
				return fmt.Errorf("--to %s: pipeline %q has no http source %q", to, dl.pipe.Name, to)
			}
			target, err := replayURL(src, url)
			if err != nil {
				return err
			}
			token, err := replayToken(src, tokenFile)
			if err != nil {
				return err
			}
			client, err := opview.HTTPClient(caFile)
			if err != nil {
				return err
			}
			n, err := opview.Replay(cmd.Context(), client, target, token, letters)
			fmt.Fprintf(cmd.ErrOrStderr(), "replayed %d of %d dead letters to %s\n", n, len(letters), target)
			return err
		},
	}
	dl.add(replay)
	fl := replay.Flags()
	fl.StringVar(&to, "to", "", "the HTTP source of the pipeline to send them through")
	fl.StringVar(&url, "url", "", "the source's URL, when its listen port is :0")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the source's bearer token (default: the spec's auth)")
	fl.StringVar(&caFile, "ca-file", "", "PEM certificate the source's https certificate must be signed by")
	return replay
}

// replayURL is the URL of the http source src: url when given, else its
// listen address and path.
func replayURL(src *spec.Source, url string) (string, error) {
	if url != "" {
		return url, nil
	}
	ep := src.HTTP
	if _, port, err := net.SplitHostPort(ep.Listen); err != nil || port == "0" {
		return "", fmt.Errorf("--to %s: the source listens on %q, a free port: give its URL with --url (its log says \"http source listening url=...\")", src.Name, ep.Listen)
	}
	scheme := "http"
	if ep.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + ep.Listen + ep.Path, nil
}

// replayToken is the bearer token of src: tokenFile's when given, else
// the spec's.
func replayToken(src *spec.Source, tokenFile string) (string, error) {
	file := tokenFile
	if a := src.HTTP.Auth; file == "" && a != nil {
		if a.BearerTokenEnv != "" {
			return strings.TrimSpace(os.Getenv(a.BearerTokenEnv)), nil
		}
		file = a.BearerTokenFile
	}
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("bearer token of source %s: %w", src.Name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func parseTimeFlag(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, fmt.Errorf("%s %q: want an RFC 3339 time such as 2024-05-01T10:00:00Z", flag, v)
	}
	return t, nil
}
