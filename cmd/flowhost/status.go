package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/opview"
)

// viewFlags are the flags of the commands that read a running pipeline's
// API.
type viewFlags struct {
	addr, tokenFile, caFile string
}

func (f *viewFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", "127.0.0.1:9464", "metrics address of the running pipeline (its --metrics-addr): HOST:PORT or an http(s):// URL")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token the pipeline requires (its --metrics-token-file)")
	cmd.Flags().StringVar(&f.caFile, "ca-file", "", "PEM certificate the pipeline's https certificate must be signed by")
}

func (f *viewFlags) client() (*opview.Client, error) {
	token := ""
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return opview.NewClient(f.addr, token, f.caFile)
}

func newStatus() *cobra.Command {
	var vf viewFlags
	var watch bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "status [--addr HOST:PORT] [--watch]",
		Short: "Show a running pipeline: graph, streams, partitions, tenants, quarantines, dead letters",
		Long: `Status reads the operator's API of a running pipeline (flowhost run serves it
on its --metrics-addr, with the web page at /) and prints what the page shows:
the graph, each stream's rates, buffers, bias, watermarks and lag, where
event time is held back, each computation partition's owner host, epoch,
queue, last batch, timers and state size, the progress (done, total, rate,
ETA) of replays, Kafka backlogs and savepoints, each tenant's CPU share
against its weight, the quarantines and the dead letters. --watch prints it again every
--interval until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := vf.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for {
				snap, err := c.Snapshot(cmd.Context())
				if err != nil {
					return err
				}
				if watch {
					fmt.Fprint(out, "\x1b[H\x1b[2J") // clear the terminal
				}
				if err := opview.Format(out, snap); err != nil || !watch {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	vf.add(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh until interrupted")
	cmd.Flags().DurationVar(&every, "interval", 2*time.Second, "with --watch: time between refreshes")
	return cmd
}

func newState() *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Read a running pipeline's state (read-only)"}
	var vf viewFlags
	get := &cobra.Command{
		Use:   "get [--addr HOST:PORT] COMPUTATION KEY",
		Short: "Print a key's committed state in a running pipeline",
		Long: `Get prints the committed state of KEY in COMPUTATION of a running pipeline, as
JSON: {computation, key, partition, found, value} (value in base64). KEY is
the key as the computation sees it: the JSON array of its group_by fields,
such as '["u1"]'. The run must have been started with --enable-state-lookup
(state may hold personal data) and a data directory; it exits with status 1
when the key has no state.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := vf.client()
			if err != nil {
				return err
			}
			v, err := c.State(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			if !v.Found {
				return fmt.Errorf("computation %q has no state for key %s (partition %d)", v.Computation, v.Key, v.Partition)
			}
			return nil
		},
	}
	vf.add(get)
	cmd.AddCommand(get)
	return cmd
}

func newTrace() *cobra.Command {
	var vf viewFlags
	cmd := &cobra.Command{
		Use:   "trace [--addr HOST:PORT] COMPUTATION PARTITION",
		Short: "Print a running partition's last deliveries, as --trace lines",
		Long: `Trace prints the last deliveries of partition PARTITION of COMPUTATION in a
running pipeline, oldest first, one JSON line each with the fields of a
--trace line (message id, parents, timestamps, bias, delay, priority). The
run must keep them: flowhost run --live-trace N.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			part, err := strconv.Atoi(args[1])
			if err != nil {
				return fmt.Errorf("PARTITION %q: not a number", args[1])
			}
			c, err := vf.client()
			if err != nil {
				return err
			}
			recs, err := c.Trace(cmd.Context(), args[0], part)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for i := range recs {
				if err := enc.Encode(&recs[i]); err != nil {
					return err
				}
			}
			return nil
		},
	}
	vf.add(cmd)
	return cmd
}
