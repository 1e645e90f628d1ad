package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/devbroker"
)

func newKafka() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kafka",
		Short: "Kafka tools for development (a broker to try pipelines with nothing installed)",
	}
	cmd.AddCommand(newKafkaServe())
	return cmd
}

func newKafkaServe() *cobra.Command {
	var cfg devbroker.Config
	var topics []string
	cmd := &cobra.Command{
		Use:   "serve [--brokers N] [--ports 9092,...] [--data-dir DIR] [--topic NAME:PARTITIONS]...",
		Short: "Run a Kafka-protocol development broker on 127.0.0.1 (for development, not production)",
		Long: `Serve runs a Kafka-protocol cluster in this process (franz-go's kfake) so that
a pipeline with kafka sources and sinks can be tried with nothing installed.
It is a tool for development and tests, NOT for production: one replica of
everything, every partition held in memory, no TLS, no authentication.

It listens on 127.0.0.1 (--listen-host; another address than loopback needs
--insecure-listen), one broker on port 9092 unless told otherwise, and
prints the brokers on stdout as one line:

  FLOWHOST_KAFKA_BROKERS=127.0.0.1:9092

then serves until SIGINT or SIGTERM. With --data-dir the cluster's topics,
records, group offsets and transactions are written there when it stops,
and a later serve on the same directory starts from them (--sync-writes
fsyncs every write, so that records survive a kill of the broker too).
--topic creates topics when the directory holds none. Prometheus metrics
(brokers up, topics, partitions) are served on --metrics-addr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range topics {
				t, err := devbroker.ParseTopic(s)
				if err != nil {
					return err
				}
				cfg.Topics = append(cfg.Topics, t)
			}
			if !cmd.Flags().Changed("ports") && !cmd.Flags().Changed("brokers") {
				cfg.Ports = []int{9092}
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			signals := make(chan os.Signal, 1)
			signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(signals)
			b, err := devbroker.Start(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "FLOWHOST_KAFKA_BROKERS=%s\n", strings.Join(b.Addrs(), ","))
			sig := <-signals
			cfg.Logger.Info("stopping", "signal", sig.String())
			b.Close()
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Brokers, "brokers", 0, "number of brokers (default 1, or one per --ports)")
	f.IntSliceVar(&cfg.Ports, "ports", nil, "the brokers' ports, one per broker; 0 is a free port (default 9092)")
	f.StringVar(&cfg.ListenHost, "listen-host", "127.0.0.1", "host to listen on")
	f.BoolVar(&cfg.InsecureListen, "insecure-listen", false, "let --listen-host be an address that is not loopback (no TLS, no authentication: the network can read and write)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "persist the cluster in this directory across restarts (default: in memory only)")
	f.BoolVar(&cfg.SyncWrites, "sync-writes", false, "fsync every write to --data-dir, so that records survive a kill of the broker")
	f.StringArrayVar(&topics, "topic", nil, "create topic NAME:PARTITIONS at the first start (repeatable)")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:0", "serve Prometheus /metrics here (port 0: a free one, logged; empty: off)")
	return cmd
}
