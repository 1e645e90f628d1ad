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
	root.AddCommand(newRun(), newPlugin(), newVersion(), newNew())
	return root
}

func newRun() *cobra.Command {
	var cfg host.RunConfig
	var verbose bool
	cmd := &cobra.Command{
		Use:   "run -f PIPELINE.yaml --plugins DIR...",
		Short: "Run a pipeline until its sources end or until interrupted",
		Long: `Run reads the pipeline spec, loads and checks every plugin it names from the
plugin directories, and runs the pipeline. File sources end the run when they
are read; otherwise it runs until SIGINT or SIGTERM, then stops taking input
and delivers everything already accepted before exiting.`,
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
	f.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	_ = cmd.MarkFlagRequired("file")
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
