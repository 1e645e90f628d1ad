package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host"
)

// replayHelp is the part of `flowhost run --help` about replays and
// savepoints, and what they do to sinks.
const replayHelp = `

Replays and savepoints:
  --from SOURCE=POSITION reads the source's records again from an offset or a
  write time, as far as retention.sources kept them (counted from when they
  were ingested). The computations keep their state: counts go on from the
  last run's. With --reset-state, every computation downstream of a replayed
  source (reading its stream, or the outputs of such a computation) starts
  from empty state, timers and output numbering, as on a first run, and the
  replayed source's watermarks start again; the queued messages the replay
  derives again are dropped. Computations that nothing replayed reaches keep
  everything. A reset computation that also reads a source that is not
  replayed has forgotten what it had from that source: replay it too.

  --from-savepoint DIR copies a savepoint (flowhost savepoint create) into the
  data directory, which must be new or empty (--replace-data-dir deletes what
  it holds), and resumes from it as after a stop at the moment it was taken.

  Sinks are not rolled back by a replay: a file sink appends the replayed
  outputs after what it holds (the first run's outputs are then in it twice,
  with the same message ids under --reset-state), an http sink numbers them
  on, stdout prints them again. A savepoint restore does roll file sinks
  back: a file sink's file is cut to the length it had committed when the
  savepoint was taken and the rest is written again, so it ends as an
  uninterrupted run's (a file shorter than that is refused); an http sink's
  numbering and log go back to the savepoint's, so a subscriber past that
  point sees the numbers again; sources resume from the savepoint's
  positions (a file is read again from there; HTTP records accepted after
  it are not in it).`

// addReplayFlags adds run's flags of replays and savepoints to cmd.
func addReplayFlags(cmd *cobra.Command, cfg *host.RunConfig) {
	cmd.Long += replayHelp
	f := cmd.Flags()
	f.BoolVar(&cfg.ResetState, "reset-state", false, "with --from: start the computations downstream of the replayed sources from empty state and timers")
	f.StringVar(&cfg.FromSavepoint, "from-savepoint", "", "start from this savepoint (flowhost savepoint create), copied into the new or empty data directory")
	f.BoolVar(&cfg.ReplaceDataDir, "replace-data-dir", false, "with --from-savepoint: delete what the data directory holds first")
	cmd.MarkFlagsMutuallyExclusive("in-memory", "reset-state")
	cmd.MarkFlagsMutuallyExclusive("in-memory", "from-savepoint")
}

func newSavepoint() *cobra.Command {
	cmd := &cobra.Command{Use: "savepoint", Short: "Take consistent snapshots of a pipeline's data directory"}
	var dataDir, specPath, addr, tokenFile, caFile string
	create := &cobra.Command{
		Use:   "create DIR (--addr HOST:PORT | --data-dir DATA | -f PIPELINE.yaml)",
		Short: "Write a consistent snapshot of a running or stopped pipeline into DIR",
		Long: `Create writes a savepoint into DIR (new or empty): a consistent copy of the
pipeline's store (queues, state, timers, positions, watermarks, sink
positions) holding exactly the commits made before it was taken. It is
cheap: the store's table files are hard-linked when DIR is on the same file
system.

A running pipeline holds its data directory: reach it through its metrics
server with --addr (its --metrics-addr, 127.0.0.1:9464 by default); it keeps
running. A stopped one is read from --data-dir, or from the default data
directory of -f PIPELINE.yaml.

flowhost run --from-savepoint DIR starts a run from it (see flowhost run
--help for what that does to sources and sinks).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sp host.Savepoint
			var err error
			switch {
			case addr != "" && (dataDir != "" || specPath != ""):
				return errors.New("give --addr for a running pipeline or --data-dir / -f for a stopped one, not both")
			case addr != "":
				vf := viewFlags{addr: addr, tokenFile: tokenFile, caFile: caFile}
				c, cerr := vf.client()
				if cerr != nil {
					return cerr
				}
				// A large savepoint outlasts the status client's timeout;
				// RequestSavepoint bounds the request itself.
				hc := *c.HTTP
				hc.Timeout = 0
				sp, err = host.RequestSavepoint(cmd.Context(), addr, args[0],
					host.WithSavepointToken(c.Token), host.WithSavepointHTTPClient(&hc))
			default:
				dir, rerr := host.ResolveDataDir(dataDir, specPath)
				if rerr != nil {
					return rerr
				}
				sp, err = host.CreateSavepoint(dir, args[0])
			}
			if err != nil {
				return err
			}
			b, err := json.Marshal(sp)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	create.Flags().StringVar(&addr, "addr", "", "metrics address of the running pipeline (its --metrics-addr)")
	create.Flags().StringVar(&tokenFile, "token-file", "", "with --addr: file holding the bearer token the pipeline requires (its --metrics-token-file)")
	create.Flags().StringVar(&caFile, "ca-file", "", "with --addr: PEM certificate the pipeline's https certificate must be signed by")
	create.Flags().StringVar(&dataDir, "data-dir", "", "data directory of the stopped pipeline")
	create.Flags().StringVarP(&specPath, "file", "f", "", "pipeline spec whose default data directory to read")
	cmd.AddCommand(create)
	return cmd
}
