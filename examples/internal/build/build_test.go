package build_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/build"
	"github.com/flowhost/flowhost/plugins"
)

// source writes a plugin source directory: a template and a main.go.
func source(t *testing.T, template, main string) string {
	t.Helper()
	dir := t.TempDir()
	if template != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, build.TemplateFile), []byte(template), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/p\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644))
	return dir
}

const (
	emptyMain = "package main\n\nfunc main() {}\n"
	template  = "name: tiny\nversion: 0.1.0\nabi: 1\nkinds: [map]\nparameters:\n  x: 1\n"
)

// TestPluginWritesAManifestThatMatchesTheModule builds a module (with no
// flowhost exports: this package checks what needs no engine) and checks
// the plugin directory it makes.
func TestPluginWritesAManifestThatMatchesTheModule(t *testing.T) {
	src := source(t, template, emptyMain)
	out := t.TempDir()
	dir, err := build.Plugin(context.Background(), src, out)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(out, "tiny"), dir)
	p, err := plugins.Load(dir)
	require.NoError(t, err)
	sum, err := plugins.Checksum(filepath.Join(dir, "tiny.wasm"))
	require.NoError(t, err)
	require.Equal(t, sum, p.Manifest.SHA256)
	require.Equal(t, "tiny.wasm", p.Manifest.Wasm)
	require.Equal(t, []plugins.Kind{plugins.KindMap}, p.Manifest.Kinds)
	require.EqualValues(t, 1, p.Manifest.Parameters["x"])
	require.Empty(t, plugins.Validate(p))
	leftovers, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	require.Empty(t, leftovers)

	// Rebuilding replaces the directory's contents and keeps them valid.
	again, err := build.Plugin(context.Background(), src, out)
	require.NoError(t, err)
	p, err = plugins.Load(again)
	require.NoError(t, err)
	require.Empty(t, plugins.Validate(p))
}

// TestPluginRelativeOutDir builds into a directory given relative to the
// current one, as `go run ./examples/build-plugins -o .work/plugins` does.
func TestPluginRelativeOutDir(t *testing.T) {
	src := source(t, template, emptyMain)
	t.Chdir(t.TempDir())
	dir, err := build.Plugin(context.Background(), src, "out")
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(dir), dir)
	require.FileExists(t, filepath.Join("out", "tiny", "tiny.wasm"))
	require.NoFileExists(t, filepath.Join(src, "out", "tiny", "tiny.wasm.tmp"))
}

func TestPluginErrors(t *testing.T) {
	for _, tc := range []struct {
		name, template, main string
		want                 []string
	}{
		{"no template", "", emptyMain, []string{build.TemplateFile}},
		{"name leaves the directory", "name: ../evil\n", emptyMain, []string{`name "../evil" is not a plugin name`}},
		{"no name", "version: 1.0.0\n", emptyMain, []string{`name "" is not a plugin name`}},
		{"does not compile", template, "package main\n\nfunc main() { undefined() }\n", []string{"go build", "main.go", "undefined"}},
		{"template sets the checksum", template + "sha256: 00\n", emptyMain, []string{"invalid manifest", "sha256"}},
		{"template lacks kinds", "name: tiny\nversion: 0.1.0\nabi: 1\n", emptyMain, []string{"invalid manifest", "kinds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := source(t, tc.template, tc.main)
			_, err := build.Plugin(context.Background(), src, t.TempDir())
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.ErrorContains(t, err, src, "the error names the source directory")
		})
	}
}

func TestPluginsReportsEachPlugin(t *testing.T) {
	good := source(t, template, emptyMain)
	bad := source(t, "", emptyMain)
	var progress bytes.Buffer
	_, err := build.Plugins(context.Background(), &progress, t.TempDir(), good, bad)
	require.ErrorContains(t, err, bad)
	require.Contains(t, progress.String(), "built   tiny")
	require.Contains(t, progress.String(), "FAILED  "+bad)
}

func TestExamplePlugins(t *testing.T) {
	root, err := build.ModuleRoot(context.Background())
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	dirs, err := build.ExamplePlugins(root)
	require.NoError(t, err)
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(d))
	}
	require.Equal(t, []string{"crash-tally", "enrich", "minute-ticker", "order-join", "restamp", "window-count"}, names)

	_, err = build.ExamplePlugins(t.TempDir())
	require.ErrorContains(t, err, "no plugin sources")
}
