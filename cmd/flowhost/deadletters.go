package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/spec"
)

func newDeadLetters() *cobra.Command {
	cmd := &cobra.Command{Use: "dead-letters", Short: "Work with a pipeline's dead letters"}
	var specPath, file, since, until string // file: the dead-letter file
	var f opview.DeadLetterFilter
	var asJSON bool
	list := &cobra.Command{
		Use:   "list (-f PIPELINE.yaml | --dead-letters FILE.jsonl) [--computation C] [--cause TEXT] [--since T] [--until T]",
		Short: "List the dead letters of a dead-letter file, filtered",
		Long: `List reads a pipeline's dead-letter file (its dead_letter: {type: file}, or
--dead-letters) and prints the dead letters that the filters select, one a line:
time, stage, computation (or the origin of a record a source could not read),
error. --json prints each as the JSON line of the file with its line number
and computation. --since and --until take RFC 3339 times; --cause selects
the errors that contain its text. It only reads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.Since, err = parseTimeFlag("--since", since); err != nil {
				return err
			}
			if f.Until, err = parseTimeFlag("--until", until); err != nil {
				return err
			}
			switch {
			case file != "" && specPath != "":
				return errors.New("give -f PIPELINE.yaml or --dead-letters, not both")
			case specPath != "":
				pipe, err := spec.ParseFile(specPath)
				if err != nil {
					return err
				}
				if pipe.DeadLetter.Type != spec.DeadLetterFile {
					return fmt.Errorf("%s: dead_letter is %q, not a file: nothing to list", specPath, pipe.DeadLetter.Type)
				}
				file = pipe.DeadLetter.File.Path
			case file == "":
				return errors.New("give -f PIPELINE.yaml or --dead-letters FILE.jsonl")
			}
			in, err := os.Open(file)
			if err != nil {
				return err
			}
			defer in.Close()
			out := cmd.OutOrStdout()
			n := 0
			err = opview.ReadDeadLetters(in, file, f, func(d opview.DeadLetter) error {
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
	fl := list.Flags()
	fl.StringVarP(&specPath, "file", "f", "", "pipeline spec whose dead-letter file to read")
	fl.StringVar(&file, "dead-letters", "", "the dead-letter file")
	fl.StringVar(&f.Computation, "computation", "", "only those this computation refused")
	fl.StringVar(&f.Cause, "cause", "", "only those whose error contains this text")
	fl.StringVar(&since, "since", "", "only those written at or after this RFC 3339 time")
	fl.StringVar(&until, "until", "", "only those written before this RFC 3339 time")
	fl.BoolVar(&asJSON, "json", false, "print JSON lines")
	cmd.AddCommand(list)
	return cmd
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
