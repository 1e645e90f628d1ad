package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/flowtest"
	"github.com/flowhost/flowhost/host/spec"
)

func newTest() *cobra.Command {
	var (
		specPath, compare, cacheDir, keyField string
		pluginDirs, inputs, expects           []string
		update, verbose                       bool
	)
	cmd := &cobra.Command{
		Use:   "test -f PIPELINE.yaml --plugins DIR --input SOURCE=FILE... --expect STREAM=FILE...",
		Short: "Run a pipeline in memory on input files and compare its outputs with expectations",
		Long: `Test runs the pipeline to completion in memory: every source named with
--input (by its name or its stream's) reads the file given instead of its
own input, as a file source in the source's format (envelope by default,
the JSON lines of host/spec/README.md), with its partitions and watermark;
other sources must be files or generators. When the inputs end, the
watermarks reach the end of time and every pending timer fires. Nothing is
written: the spec's sinks and dead letter are replaced by the test's.

Each --expect STREAM=FILE compares the stream's outputs with FILE, one JSON
object a line with key, event_ts and payload (a file sink's json lines
work too: their other fields, which depend on the wall clock, are ignored).
--compare exact (the default) wants the same lines in the same order;
--compare per-key wants each key's lines in order, however the keys
interleave; a line's key is its record key, or with --key-field F the
value of the payload's top-level field F (for outputs that carry their
key in the payload). A difference prints which line, expected and got, and exits 1.
--update writes the outputs into the expectation files instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := flowtest.ParseMode(compare)
			if err != nil {
				return err
			}
			in, err := pairs("--input", inputs)
			if err != nil {
				return err
			}
			want, err := pairs("--expect", expects)
			if err != nil {
				return err
			}
			if len(want) == 0 {
				return fmt.Errorf("give at least one --expect STREAM=FILE")
			}
			pipe, err := spec.ParseFile(specPath)
			if err != nil {
				return err
			}
			cfg := flowtest.Config{Pipeline: pipe, Inputs: in, PluginDirs: pluginDirs, CacheDir: cacheDir}
			if verbose {
				cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			res, err := flowtest.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, l := range res.DeadLetters {
				fmt.Fprintf(out, "dead letter: %s\n", l)
			}
			return flowtest.Check(out, res.Outputs, want, mode, keyField, update)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&specPath, "file", "f", "", "pipeline spec (YAML or JSON)")
	f.StringSliceVar(&pluginDirs, "plugins", nil, "plugin directory, or a folder of them (repeatable)")
	f.StringArrayVar(&inputs, "input", nil, "SOURCE=FILE: the source (or stream) reads FILE instead (repeatable)")
	f.StringArrayVar(&expects, "expect", nil, "STREAM=FILE: the outputs the stream must have (repeatable)")
	f.StringVar(&compare, "compare", string(flowtest.Exact), "exact or per-key")
	f.StringVar(&keyField, "key-field", "", "per-key: group by this top-level payload field instead of the record key")
	f.BoolVar(&update, "update", false, "write the outputs into the --expect files instead of comparing")
	f.StringVar(&cacheDir, "cache-dir", "", "compilation cache (default: none)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the run at debug level on stderr")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// pairs reads NAME=FILE flag values.
func pairs(flag string, vals []string) (map[string]string, error) {
	m := map[string]string{}
	for _, v := range vals {
		name, file, ok := strings.Cut(v, "=")
		if !ok || name == "" || file == "" {
			return nil, fmt.Errorf("%s %q: want NAME=FILE", flag, v)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%s %s is given twice", flag, name)
		}
		m[name] = file
	}
	return m, nil
}
