// Command build-plugins builds the example plugins (examples/plugins/*)
// into plugin directories that `flowhost run --plugins` loads:
//
//	go run ./examples/build-plugins -o .work/plugins
//
// Each plugin gets OUT/<name>/ with <name>.wasm and a plugin.yaml whose
// sha256 matches it. Arguments, when given, are plugin source directories
// to build instead of the examples.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/flowhost/flowhost/examples/internal/build"
)

func main() {
	out := flag.String("o", filepath.Join(".work", "plugins"), "directory to build the plugin directories into")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "build-plugins:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, srcs []string) error {
	if len(srcs) == 0 {
		root, err := build.ModuleRoot(ctx)
		if err != nil {
			return err
		}
		if srcs, err = build.ExamplePlugins(root); err != nil {
			return err
		}
	}
	fmt.Printf("building %d plugins into %s\n", len(srcs), out)
	_, err := build.Plugins(ctx, os.Stdout, out, srcs...)
	return err
}
