// Command demo shows flowhost's cross-stream ordering on a join. It
//
//  1. builds the example plugins (examples/plugins) into a work directory;
//  2. generates a deterministic data set: orders written to their queue as
//     they happen, and their payments, made seconds after the order but
//     written to the payments queue 2-6 minutes later;
//  3. runs examples/pipelines/join.yaml on it twice through host.Run with a
//     trace: (a) as written, input_ordering time_type event (bias on) with
//     its stream_delays, and (b) with time_type alignment (raw
//     AlignmentTimestamp, no bias, no delays);
//  4. prints the first joined records and, computed from the two trace
//     files, how often and how far the event time of the join's input went
//     back from one message to the next.
//
// Run it from anywhere in the repository with `make demo` or
// `go run ./examples/demo`; -h lists the flags, which change the data set
// and the join's settings for exploring.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/flowhost/flowhost/examples/internal/build"
	"github.com/flowhost/flowhost/examples/internal/orders"
)

func main() {
	cfg := config{lag: [2]time.Duration{2 * time.Minute, 6 * time.Minute}}
	flag.StringVar(&cfg.work, "work", "", "work directory (default: .work/demo under the repository)")
	flag.IntVar(&cfg.orders, "orders", 2000, "orders to generate (over 30 minutes of event time)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the data set")
	flag.DurationVar(&cfg.lag[0], "lag-min", cfg.lag[0], "shortest time from a payment to its write to the payments queue")
	flag.DurationVar(&cfg.lag[1], "lag-max", cfg.lag[1], "longest time from a payment to its write to the payments queue")
	flag.IntVar(&cfg.maxRows, "max-rows", 1, "the join's batch.max_rows in both runs (0: as join.yaml says)")
	flag.DurationVar(&cfg.delay, "delay", -1, "stream_delays of payments in run (a) (-1: as join.yaml says)")
	flag.IntVar(&cfg.rows, "rows", 15, "joined records to show")
	flag.BoolVar(&cfg.verbose, "v", false, "show the host's logs and progress")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type config struct {
	work    string
	orders  int
	seed    uint64
	lag     [2]time.Duration
	maxRows int
	delay   time.Duration
	rows    int
	verbose bool
}

func run(ctx context.Context, out io.Writer, cfg config) error {
	if cfg.lag[1] < cfg.lag[0] {
		return fmt.Errorf("-lag-max %s is below -lag-min %s", cfg.lag[1], cfg.lag[0])
	}
	root, err := build.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	if cfg.work == "" {
		cfg.work = filepath.Join(root, ".work", "demo")
	}
	if cfg.work, err = filepath.Abs(cfg.work); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(cfg.work, "data"), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "flowhost demo: orders joined with their payments, two streams merged in event-time order\n")
	fmt.Fprintf(out, "work directory: %s\n\n", cfg.work)

	srcs, err := build.ExamplePlugins(root)
	if err != nil {
		return err
	}
	pluginsDir := filepath.Join(cfg.work, "plugins")
	fmt.Fprintf(out, "1. Building %d plugins (Go -> WebAssembly) into %s\n", len(srcs), pluginsDir)
	if _, err := build.Plugins(ctx, out, pluginsDir, srcs...); err != nil {
		return err
	}

	// The upper bound of the lag is exclusive; a constant lag (-lag-min
	// equal to -lag-max) is allowed.
	dcfg := orders.Config{Orders: cfg.orders, Seed: cfg.seed, UnpaidEvery: 100, Lag: [2]time.Duration{cfg.lag[0], max(cfg.lag[1], cfg.lag[0]+1)}}
	data := orders.Generate(dcfg)
	ordersPath := filepath.Join(cfg.work, "data", "orders.jsonl")
	paymentsPath := filepath.Join(cfg.work, "data", "payments.jsonl")
	if err := data.WriteFiles(ordersPath, paymentsPath); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n2. Generated %s orders over 30 minutes of event time and %s payments (seed %d):\n",
		thousands(len(data.Orders)), thousands(len(data.Payments)), cfg.seed)
	fmt.Fprintf(out, "   an order is written to the orders queue within 0.5s of being placed; a payment is made\n")
	fmt.Fprintf(out, "   5-90s after its order and written to the payments queue %s-%s after that; every\n", human(cfg.lag[0]), human(cfg.lag[1]))
	fmt.Fprintf(out, "   100th order is never paid.\n")
	fmt.Fprintf(out, "   %s\n   %s\n", ordersPath, paymentsPath)

	logLevel := slog.LevelWarn
	if cfg.verbose {
		logLevel = slog.LevelInfo
	}
	runner := &runner{
		root: root, work: cfg.work, plugins: pluginsDir,
		ordersPath: ordersPath, paymentsPath: paymentsPath,
		maxRows: cfg.maxRows, delay: cfg.delay, quiet: !cfg.verbose,
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})),
	}
	fmt.Fprintf(out, "\n3. Running examples/pipelines/join.yaml twice through the host, with a trace:\n")
	var results [2]*result
	for i, mode := range []mode{eventMode, alignmentMode} {
		start := time.Now()
		res, err := runner.run(ctx, mode)
		if err != nil {
			return fmt.Errorf("run %s: %w", mode.name, err)
		}
		results[i] = res
		fmt.Fprintf(out, "   %s %s\n", mode.label, res.describe())
		fmt.Fprintf(out, "       %s joined, %s unmatched, %d dead letters, in %.1fs\n",
			thousands(len(res.joined)), thousands(len(res.unmatched)), res.deadLetters, time.Since(start).Seconds())
		fmt.Fprintf(out, "       spec  %s\n       trace %s\n", res.specPath, res.tracePath)
	}
	if err := checkJoins(data, results[:]); err != nil {
		return err
	}
	fmt.Fprintf(out, "   Both runs joined each of the %s paid orders with its payment exactly once and sent\n", thousands(len(data.Payments)))
	fmt.Fprintf(out, "   the %s unpaid orders to unmatched when their 30m expiry timers fired.\n", thousands(len(data.Orders)-len(data.Payments)))

	fmt.Fprintf(out, "\n4. The first %d joined records of run %s, in output order:\n\n", cfg.rows, eventMode.label)
	printJoined(out, results[0].joined, cfg.rows)

	fmt.Fprintf(out, "\n5. Event-time inversions at the join's input, counted in the trace files:\n\n")
	printFigure(out, results[0], results[1], cfg.lag)
	return nil
}
