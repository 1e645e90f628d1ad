package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowhost/flowhost/host/scaffold"
)

func newNew() *cobra.Command {
	var cfg scaffold.Config
	cmd := &cobra.Command{
		Use:   "new --lang " + strings.Join(scaffold.Languages(), "|") + " NAME [--dir DIR] [--flowhost CHECKOUT]",
		Short: "Create a computation project: source, build script, manifest, sample pipeline and test",
		Long: `New creates a project for a computation written with one of flowhost's
guest SDKs: a keyed transform that counts the messages of each key and
emits {"key":...,"count":N} for every message. The project holds the
source, build.sh (builds the module into plugin/ with its plugin.yaml),
plugin.template.yaml, sample.jsonl, pipeline.yaml, expected.jsonl, a
README.md and test.sh, which builds, runs the pipeline through flowhost
($FLOWHOST or flowhost on PATH) and compares out.jsonl with expected.jsonl.

NAME is the project's and the plugin's name: lowercase letters, digits,
'-' and '_', starting with a letter. The project is created in DIR
(default: ./NAME), which must not exist or be empty.

The go, rust and assemblyscript projects take their SDK from a flowhost
checkout and record its absolute path (go.mod's replace directive,
Cargo.toml's path dependency, build.sh's FLOWHOST_ROOT). --flowhost names
it; by default it is the checkout at or above the current directory, else
the one this flowhost binary was built from. A c project gets a copy of
the C SDK's sources and needs no checkout.

A rust project builds with your own cargo (rustup's or Debian's) and
crates.io. --rust-offline (or FLOWHOST_RUST_OFFLINE=1) gives it a
.cargo/config.toml that takes crates only from Debian's packaged sources,
and build.sh then runs Debian's /usr/bin/cargo offline.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Name = args[0]
			if cfg.Dir == "" {
				cfg.Dir = cfg.Name
			}
			if err := scaffold.Generate(cfg); err != nil {
				return err
			}
			dir, err := filepath.Abs(cfg.Dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s project %s in %s\nnext: cd %s && ./test.sh\n",
				cfg.Lang, cfg.Name, dir, cfg.Dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Lang, "lang", "", "the computation's language: "+strings.Join(scaffold.Languages(), ", "))
	f.StringVar(&cfg.Dir, "dir", "", "directory to create the project in (default ./NAME)")
	f.StringVar(&cfg.FlowhostRoot, "flowhost", "", "flowhost checkout whose SDK the project uses (default: found, see above)")
	f.BoolVar(&cfg.RustOffline, "rust-offline", os.Getenv("FLOWHOST_RUST_OFFLINE") == "1",
		"rust: build with Debian's cargo offline, crates from /usr/share/cargo/registry (.cargo/config.toml); default $FLOWHOST_RUST_OFFLINE=1")
	_ = cmd.MarkFlagRequired("lang")
	return cmd
}
