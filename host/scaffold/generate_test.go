package scaffold_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/scaffold"
	"github.com/flowhost/flowhost/host/spec"
)

func ExampleLanguages() {
	fmt.Println(scaffold.Languages())
	// Output: [go rust c assemblyscript]
}

// TestGenerateErrors checks that every refusal says precisely what is
// wrong and leaves nothing behind.
func TestGenerateErrors(t *testing.T) {
	root := moduleRoot(t)
	base := t.TempDir()
	nonEmpty := filepath.Join(base, "full")
	require.NoError(t, os.MkdirAll(nonEmpty, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(nonEmpty, "notes.txt"), []byte("mine"), 0o644))
	aFile := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(aFile, nil, 0o644))
	notCheckout := t.TempDir()

	for _, tc := range []struct {
		name string
		cfg  scaffold.Config
		want string
	}{
		{"unknown language", scaffold.Config{Lang: "java", Name: "ok"},
			`unknown language "java"; use go, rust, c or assemblyscript`},
		{"empty language", scaffold.Config{Lang: "", Name: "ok"},
			`unknown language ""; use go, rust, c or assemblyscript`},
		{"language case", scaffold.Config{Lang: "Go", Name: "ok"},
			`unknown language "Go"; use go, rust, c or assemblyscript`},
		{"empty name", scaffold.Config{Lang: "c", Name: ""},
			`project name "" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"uppercase name", scaffold.Config{Lang: "c", Name: "Counter"},
			`project name "Counter" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"name starts with a digit", scaffold.Config{Lang: "c", Name: "1st"},
			`project name "1st" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"path as name", scaffold.Config{Lang: "c", Name: "../x"},
			`project name "../x" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"dotted name", scaffold.Config{Lang: "rust", Name: "a.b"},
			`project name "a.b" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"name too long", scaffold.Config{Lang: "c", Name: "a" + strings.Repeat("b", 64)},
			`project name "a` + strings.Repeat("b", 64) + `" is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"non-empty directory", scaffold.Config{Lang: "c", Name: "ok", Dir: nonEmpty},
			"directory " + nonEmpty + " already exists and is not empty (it holds notes.txt)"},
		{"file as directory", scaffold.Config{Lang: "go", Name: "ok", Dir: aFile, FlowhostRoot: root},
			aFile + " exists and is not a directory"},
		{"not a checkout", scaffold.Config{Lang: "go", Name: "ok", Dir: filepath.Join(base, "new1"), FlowhostRoot: notCheckout},
			notCheckout + " is not a flowhost checkout (no go.mod of module github.com/flowhost/flowhost there); pass the checkout's directory with --flowhost"},
		{"unwritable checkout path", scaffold.Config{Lang: "rust", Name: "ok", Dir: filepath.Join(base, "new2"), FlowhostRoot: "/tmp/it's"},
			`flowhost checkout "/tmp/it's": the path may not contain quotes, backslashes, '$', '` + "`" + `' or control characters, since the project's files record it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := entries(t, base)
			err := scaffold.Generate(tc.cfg)
			require.EqualError(t, err, tc.want)
			require.Equal(t, before, entries(t, base), "a refused project must leave nothing behind")
			require.Equal(t, []string{"notes.txt"}, entries(t, nonEmpty))
		})
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestGenerateLayout checks what every language's project holds: the
// common files, its own, executable scripts, a pipeline flowhost accepts
// and the plugin name everywhere.
func TestGenerateLayout(t *testing.T) {
	root := moduleRoot(t)
	common := []string{".gitignore", "README.md", "build.sh", "expected.jsonl", "pipeline.yaml", "plugin.template.yaml", "sample.jsonl", "test.sh"}
	own := map[string][]string{
		"go":             {"go.mod", "go.sum", "main.go"},
		"rust":           {"Cargo.toml", "src/lib.rs"},
		"c":              {"main.c", "sdk/cbor.c", "sdk/cbor.h", "sdk/flowhost.c", "sdk/flowhost.h", "sdk/typed_state.c", "sdk/typed_state.h"},
		"assemblyscript": {"index.ts"},
	}
	require.ElementsMatch(t, scaffold.Languages(), keys(own))
	for _, lang := range scaffold.Languages() {
		t.Run(lang, func(t *testing.T) {
			// An existing empty directory is fine.
			dir := t.TempDir()
			require.NoError(t, scaffold.Generate(scaffold.Config{Lang: lang, Name: "my_counter", Dir: dir, FlowhostRoot: root}))
			var files []string
			require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				files = append(files, filepath.ToSlash(rel))
				info, err := d.Info()
				require.NoError(t, err)
				if strings.HasSuffix(p, ".sh") {
					require.Equal(t, os.FileMode(0o755), info.Mode().Perm(), rel)
				}
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NotContains(t, string(b), "@@", rel)
				return nil
			}))
			require.ElementsMatch(t, append(append([]string{}, common...), own[lang]...), files)

			p, err := spec.ParseFile(filepath.Join(dir, "pipeline.yaml"))
			require.NoError(t, err)
			require.Len(t, p.Computations, 1)
			require.Equal(t, "my_counter", p.Computations[0].Plugin)

			tmpl, err := os.ReadFile(filepath.Join(dir, "plugin.template.yaml"))
			require.NoError(t, err)
			require.Contains(t, string(tmpl), "\nname: my_counter\n")
			build, err := os.ReadFile(filepath.Join(dir, "build.sh"))
			require.NoError(t, err)
			require.Contains(t, string(build), "out=plugin/my_counter.wasm")
		})
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestFindRoot finds this checkout from inside it.
func TestFindRoot(t *testing.T) {
	got, err := scaffold.FindRoot()
	require.NoError(t, err)
	require.Equal(t, moduleRoot(t), got)
}

// TestRustOffline: a Rust project takes crates from Debian's directory
// source only when asked (RustOffline writes .cargo/config.toml, which
// build.sh follows); every Rust project states the SDK's minimum Rust.
func TestRustOffline(t *testing.T) {
	root := moduleRoot(t)
	sdkToml, err := os.ReadFile(filepath.Join(root, "sdk", "rust", "Cargo.toml"))
	require.NoError(t, err)
	var msrv string
	for _, l := range strings.Split(string(sdkToml), "\n") {
		if v, ok := strings.CutPrefix(l, "rust-version = "); ok {
			msrv = v
		}
	}
	require.NotEmpty(t, msrv, "sdk/rust/Cargo.toml sets no rust-version")
	for _, offline := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, scaffold.Generate(scaffold.Config{Lang: "rust", Name: "c", Dir: dir, FlowhostRoot: root, RustOffline: offline}))
		cfg, err := os.ReadFile(filepath.Join(dir, ".cargo", "config.toml"))
		if offline {
			require.NoError(t, err)
			require.Contains(t, string(cfg), `directory = "/usr/share/cargo/registry"`)
		} else {
			require.ErrorIs(t, err, fs.ErrNotExist)
		}
		toml, err := os.ReadFile(filepath.Join(dir, "Cargo.toml"))
		require.NoError(t, err)
		require.Contains(t, string(toml), "\nrust-version = "+msrv+"\n")
		build, err := os.ReadFile(filepath.Join(dir, "build.sh"))
		require.NoError(t, err)
		require.Contains(t, string(build), "if [ -f .cargo/config.toml ]; then")
	}
}
