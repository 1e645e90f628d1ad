// Command flowhost runs stream-processing pipelines whose computations are
// WebAssembly plugins. It is a thin layer over package host.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// version is set with -ldflags "-X main.version=..." by release builds.
var version = "dev"

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "flowhost:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "flowhost",
		Short:         "Run stream-processing pipelines of WebAssembly computations in a guaranteed order",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRun(), newInspect(), newPlugin(), newVersion(), newNew(), newSavepoint())
	return root
}

func newRun() *cobra.Command {
	var cfg host.RunConfig
	var verbose bool
	var from []string
	var workers int
	cmd := &cobra.Command{
		Use:   "run -f PIPELINE.yaml --plugins DIR...",
		Short: "Run a pipeline until its sources end or until interrupted",
		Long: `Run reads the pipeline spec, loads and checks every plugin it names from the
plugin directories, and runs the pipeline. File sources end the run when they
are read; otherwise it runs until SIGINT or SIGTERM, then stops taking input
and delivers everything already accepted before exiting.

The run is exactly-once: records, the queues between computations, state,
timers and positions are committed to the data directory (--data-dir, by
default ~/.local/state/flowhost/PIPELINE-NAME). Killed at any moment and
started again on the same directory, it resumes from its last commits:
nothing is lost and nothing is processed twice. A file source that was read
to its end is not read again; --from reprocesses a source from an offset or
a write time, as far as retention kept its records. --in-memory keeps
nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			finished := make(chan struct{})
			defer close(finished)
			go func() {
				// The first signal drains; restoring the default handling
				// lets a second one end the process at once.
				select {
				case <-ctx.Done():
					stop()
					cfg.Logger.Info("stopping: delivering what was accepted (interrupt again to quit at once)")
				case <-finished:
				}
			}()
			if len(from) > 0 {
				pipe, err := spec.ParseFile(cfg.SpecPath)
				if err != nil {
					return err
				}
				if cfg.Replay, err = host.ParseReplay(from, pipe); err != nil {
					return err
				}
			}
			if workers > 0 {
				cfg.Options = append(cfg.Options, runtime.WithWorkers(workers))
			}
			err := host.Run(ctx, cfg)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.SpecPath, "file", "f", "", "pipeline spec (YAML or JSON)")
	f.StringSliceVar(&cfg.PluginDirs, "plugins", nil, "plugin directory, or a folder of them (repeatable)")
	f.StringVar(&cfg.TracePath, "trace", "", "write one JSON line per delivery to this file")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:9464", "serve Prometheus /metrics here (empty: off)")
	f.StringVar(&cfg.CacheDir, "cache-dir", "", "compilation cache (default: the user cache dir)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "data directory of the exactly-once store (default ~/.local/state/flowhost/PIPELINE-NAME)")
	f.BoolVar(&cfg.InMemory, "in-memory", false, "keep nothing on disk: no exactly-once, a restart processes everything again")
	f.StringArrayVar(&from, "from", nil, "reprocess a source from a position: SOURCE=OFFSET, SOURCE=RFC3339-TIME, or a position for every source (repeatable)")
	f.BoolVar(&cfg.Reload, "reload", true, "reload a plugin whose manifest gets a new checksum while the pipeline runs (--reload=false: never)")
	f.IntVar(&workers, "workers", 0, "batches running at once, shared between tenants by weight (default: the number of cores)")
	f.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	_ = cmd.MarkFlagRequired("file")
	cmd.MarkFlagsMutuallyExclusive("in-memory", "data-dir")
	cmd.MarkFlagsMutuallyExclusive("in-memory", "from")
	addReplayFlags(cmd, &cfg)
	return cmd
}

func newInspect() *cobra.Command {
	var dir, specPath string
	var keys bool
	cmd := &cobra.Command{
		Use:   "inspect (--data-dir DIR | -f PIPELINE.yaml)",
		Short: "Show what a data directory holds: positions, queues, epochs, timers, state sizes",
		Long: `Inspect lists a stopped pipeline's data directory: every source stream
partition with its retained, appended and routed offsets and watermark; the
committed messages still queued for each computation partition and sink; each
computation partition's last committed epoch, pending timers and state size
(per key with --keys); and each sink's committed position. The pipeline must
not be running: it holds its data directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				if specPath == "" {
					return errors.New("give --data-dir, or -f with the pipeline spec to use its default data directory")
				}
				pipe, err := spec.ParseFile(specPath)
				if err != nil {
					return err
				}
				if dir, err = store.DefaultDataDir(pipe.Name); err != nil {
					return err
				}
			}
			return host.Inspect(cmd.OutOrStdout(), dir, keys)
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "the data directory")
	cmd.Flags().StringVarP(&specPath, "file", "f", "", "pipeline spec whose default data directory to inspect")
	cmd.Flags().BoolVar(&keys, "keys", false, "list every key's state size")
	return cmd
}

func newPlugin() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Short: "Work with plugin directories"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate DIR...",
		Short: "Check manifests, checksums, exports, ABI version and imports",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			bad := 0
			for _, dir := range dirs {
				p, errs := host.ValidatePlugin(dir)
				if len(errs) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "ok  %s (%s %s, kinds %v)\n", dir, p.Manifest.Name, p.Manifest.Version, p.Manifest.Kinds)
					continue
				}
				bad++
				for _, err := range errs {
					fmt.Fprintf(cmd.OutOrStdout(), "bad %s: %v\n", dir, err)
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d plugin directories are invalid", bad, len(dirs))
			}
			return nil
		},
	})
	return cmd
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the ABI version and the Go version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			goVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "flowhost %s (abi v%d, %s)\n", version, abi.Version, goVersion)
		},
	}
}
