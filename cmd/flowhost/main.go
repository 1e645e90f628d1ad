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
	"github.com/flowhost/flowhost/host/progress"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// version is set with -ldflags "-X main.version=..." by release builds.
var version = "dev"

func main() {
	if err := newRoot().Execute(); err != nil {
		// A spec error is shown with its lines of the spec and a caret.
		fmt.Fprintln(os.Stderr, "flowhost:", spec.FormatError(err, progress.IsTerminal(os.Stderr)))
		os.Exit(host.ExitCode(err))
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "flowhost",
		Short:         "Run stream-processing pipelines of WebAssembly computations in a guaranteed order",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRun(), newInspect(), newPlugin(), newVersion(), newNew(), newSavepoint(), newStatus(), newState(), newTrace(), newDeadLetters(), newKafka(), newTest())
	return root
}

func newRun() *cobra.Command {
	var cfg host.RunConfig
	var verbose bool
	var from []string
	var workers int
	var clusterKind string
	var brokers []string
	cmd := &cobra.Command{
		Use:   "run -f PIPELINE.yaml --plugins DIR...",
		Short: "Run a pipeline until its sources end or until interrupted",
		Long: `Run reads the pipeline spec, loads and checks every plugin it names from the
plugin directories, and runs the pipeline. File sources end the run when they
are read; otherwise it runs until SIGINT or SIGTERM, then stops taking input
and delivers everything already accepted before exiting. If that takes
longer than --stop-grace (a guest in an infinite loop, say), the running
batches are interrupted and not committed (the next run on the data
directory processes them again) and it exits with status 4. A second
signal exits at once with status 128+signal (130 for SIGINT, 143 for
SIGTERM), like a kill: nothing half-done is committed either.

Every run that started ends with a summary on stderr (--summary-json
writes it as JSON too): records in and out per source, computation and sink, dead letters
per computation with the most common cause, quarantined partitions, timers
left pending and the data directory. Exit status: 0 when everything
accepted was delivered, 1 on an error (a source, sink or computation that
failed), 3 when a partition was quarantined, 4 when the stop was
interrupted.

The guest of an operator's plugin (a computation without a tenant) may
run at most --cpu-per-batch on one batch, a tenant's its
quotas.cpu_per_batch; past it the batch fails and goes by the
computation's on_failure. A manifest's limits.batch_timeout may ask for
less. --cpu-per-batch 0 sets no limit: guests are then not interruptible,
about 3x faster on wazero, but one in an infinite loop holds its partition
and a stop until a second signal.

The run is exactly-once: records, the queues between computations, state,
timers and positions are committed to the data directory (--data-dir, by
default ~/.local/state/flowhost/PIPELINE-NAME). Killed at any moment and
started again on the same directory, it resumes from its last commits:
nothing is lost and nothing is processed twice. A file source that was read
to its end is not read again; --from reprocesses a source from an offset or
a write time, as far as retention kept its records. --in-memory keeps
nothing.

--cluster kafka --brokers HOST:PORT (or the spec's cluster block, which
also takes tls and sasl) keeps the store on a Kafka cluster instead: every
commit is one transaction on the compacted topic flowhost.PIPELINE.store,
and the run starts by restoring from it. Hosts started on the same spec,
on any machines, form the pipeline's hosts group: one runs the pipeline,
the others stand by, and when the one running it dies a standby takes over
within the session timeout, resuming where the last commit left. See
docs/cluster.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			// The default metrics port may be another pipeline's: then a
			// free one is used; an address the user chose is kept or fails.
			cfg.MetricsFallback = !cmd.Flags().Changed("metrics-addr")
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			signals := make(chan os.Signal, 2)
			signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(signals)
			finished := make(chan struct{})
			defer close(finished)
			go func() {
				// The first signal drains, for at most the stop's grace
				// period; a second one exits at once, as a kill would:
				// nothing half-done is committed, and the next run
				// resumes from the last commits.
				select {
				case sig := <-signals:
					stop()
					cfg.Logger.Info("stopping: delivering what was accepted (interrupt again to quit at once)",
						"signal", sig.String(), "stop_grace", cfg.StopGrace)
				case <-finished:
					return
				}
				select {
				case sig := <-signals:
					fmt.Fprintf(os.Stderr, "flowhost: %s again: exiting at once\n", sig)
					os.Exit(128 + int(sig.(syscall.Signal)))
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
			if clusterKind != "" || len(brokers) > 0 {
				if clusterKind != "kafka" {
					return fmt.Errorf("--cluster takes kafka (the only cluster there is), with --brokers; got %q", clusterKind)
				}
				if len(brokers) == 0 {
					return errors.New("--cluster kafka needs --brokers HOST:PORT[,HOST:PORT...]")
				}
				cfg.Cluster = &spec.Cluster{Kafka: &spec.ClusterKafka{Brokers: brokers}}
			}
			if workers > 0 {
				cfg.Options = append(cfg.Options, runtime.WithWorkers(workers))
			}
			if cfg.CPUPerBatch < 0 {
				return fmt.Errorf("--cpu-per-batch takes a duration such as 5s, or 0 for no limit; got %v", cfg.CPUPerBatch)
			}
			if cfg.StopGrace <= 0 {
				return fmt.Errorf("--stop-grace takes a duration above 0, such as 10s; got %v", cfg.StopGrace)
			}
			if cfg.CPUPerBatch == 0 {
				cfg.CPUPerBatch = -1 // host.RunConfig's "none"; its 0 is the default
			}
			cfg.Summary = os.Stderr
			err := host.Run(ctx, cfg)
			if host.ExitCode(err) == host.ExitOK {
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
	f.BoolVar(&cfg.InsecureListen, "insecure-listen", false, "let HTTP sources and sinks without tls listen on addresses that are not loopback (plain HTTP from the network)")
	f.DurationVar(&cfg.CPUPerBatch, "cpu-per-batch", host.DefaultCPUPerBatch, "time the guest of an operator's plugin may run on one batch before the batch fails (a manifest's limits.batch_timeout may ask for less); 0: no limit, faster on wazero, but a looping guest then holds a stop until a second signal")
	f.DurationVar(&cfg.StopGrace, "stop-grace", host.DefaultStopGrace, "after SIGINT or SIGTERM, how long to deliver what was accepted before interrupting the running batches (exit status 4)")
	f.StringVar(&cfg.SummaryJSON, "summary-json", "", "also write the run's summary to this file as JSON")
	f.StringVar(&cfg.MetricsSecurity.CertFile, "metrics-tls-cert", "", "serve the metrics address (metrics, operator page and API) over HTTPS with this certificate (PEM)")
	f.StringVar(&cfg.MetricsSecurity.KeyFile, "metrics-tls-key", "", "the key of --metrics-tls-cert (PEM)")
	f.StringVar(&cfg.MetricsSecurity.TokenFile, "metrics-token-file", "", "require this file's bearer token on every request to the metrics address")
	f.BoolVar(&cfg.MetricsSecurity.Insecure, "insecure", false, "let --metrics-addr be a non-loopback address without TLS and a bearer token")
	f.IntVar(&cfg.LiveTrace, "live-trace", 0, "keep the last N deliveries of every computation partition for flowhost trace (/api/v1/trace); 0: none")
	f.BoolVar(&cfg.EnableStateLookup, "enable-state-lookup", false, "let the operator's API read a key's committed state (/api/v1/state); state may hold personal data")
	f.StringVar(&clusterKind, "cluster", "", "keep the store on a cluster instead of a data directory: kafka (with --brokers); replaces the spec's cluster block")
	f.StringSliceVar(&brokers, "brokers", nil, "the Kafka brokers of --cluster kafka, HOST:PORT (repeatable or comma-separated)")
	f.StringVar(&cfg.HostID, "host-id", "", "with a cluster: this host's static id in the pipeline's hosts group (a restart with the same id replaces its old membership at once, so the pipeline goes on without waiting for the session timeout); unique per host")
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
not be running: it holds its data directory. Inspect only reads: a directory
that does not exist or holds no store (with -f: a pipeline that never ran) is
refused, and nothing is created.`,
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
		Long: `Validate checks each plugin directory given, or each plugin directory in a
folder of them (as run --plugins reads it), and prints one line per plugin:
"ok  DIR (...)" or "bad DIR: problem". It exits non-zero if any is bad.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			checks := host.ValidatePlugins(dirs)
			bad := 0
			for _, c := range checks {
				if len(c.Errs) == 0 {
					m := c.Plugin.Manifest
					fmt.Fprintf(cmd.OutOrStdout(), "ok  %s (%s %s, kinds %v)\n", c.Dir, m.Name, m.Version, m.Kinds)
					continue
				}
				bad++
				for _, err := range c.Errs {
					fmt.Fprintf(cmd.OutOrStdout(), "bad %s: %v\n", c.Dir, err)
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d plugin directories are invalid", bad, len(checks))
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
