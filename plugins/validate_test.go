package plugins

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func errorStrings(errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		// setup builds a plugin directory in root and returns the plugin
		// and the expected error lines.
		setup func(t *testing.T, root string) (*Plugin, []string)
	}{
		{
			name: "valid with read-only directories",
			setup: func(t *testing.T, root string) (*Plugin, []string) {
				dir := writePlugin(t, root, "join", typeModule, "capabilities:\n  read_only_dirs: [data, .]\n")
				require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
				return loadPlugin(t, dir), nil
			},
		},
		{
			name: "every file problem at once",
			setup: func(t *testing.T, root string) (*Plugin, []string) {
				dir := writePlugin(t, root, "join", typeModule, "capabilities:\n  read_only_dirs: [data, ref, join.wasm]\n")
				require.NoError(t, os.WriteFile(filepath.Join(dir, "join.wasm"), typeModule[:10], 0o644))
				require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(dir, "ref")))
				wasm, manifest := filepath.Join(dir, "join.wasm"), filepath.Join(dir, "plugin.yaml")
				prefix := manifest + ": capabilities.read_only_dirs: "
				return loadPlugin(t, dir), []string{
					wasm + ": truncated WebAssembly binary: section 1 (type) at offset 8 declares 4 bytes, only 0 remain",
					prefix + filepath.Join(dir, "data") + " does not exist",
					prefix + filepath.Join(dir, "ref") + ": path leads outside the plugin directory " + dir +
						" (it resolves to " + mustEvalSymlinks(t, filepath.Join(dir, "ref")) + ")",
					prefix + wasm + " is not a directory",
				}
			},
		},
		{
			name: "checksum",
			setup: func(t *testing.T, root string) (*Plugin, []string) {
				dir := writePlugin(t, root, "join", typeModule, "")
				require.NoError(t, os.WriteFile(filepath.Join(dir, "join.wasm"), emptyModule, 0o644))
				return loadPlugin(t, dir), []string{(&ChecksumError{
					File: filepath.Join(dir, "join.wasm"), Manifest: filepath.Join(dir, "plugin.yaml"),
					Want: sha256Hex(typeModule), Got: sha256Hex(emptyModule),
				}).Error()}
			},
		},
		{
			name: "manifest built in code",
			setup: func(t *testing.T, root string) (*Plugin, []string) {
				p := &Plugin{Dir: root, WasmPath: filepath.Join(root, "x.wasm"), Manifest: &Manifest{
					Name: "x", Version: "1.0.0", ABI: 1, Wasm: "../x.wasm", SHA256: abcSHA256,
				}}
				manifest := filepath.Join(root, "plugin.yaml")
				// The files are not checked: the manifest naming them is wrong.
				return p, []string{
					manifest + `: wasm: "../x.wasm" escapes the plugin directory`,
					manifest + `: kinds: at least one kind is required: transform or map`,
				}
			},
		},
		{
			name: "no manifest",
			setup: func(t *testing.T, root string) (*Plugin, []string) {
				return &Plugin{Dir: root}, []string{"plugin has no manifest"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, want := tt.setup(t, t.TempDir())
			require.Equal(t, want, errorStrings(Validate(p)))
		})
	}
}

func TestReadOnlyDirsResolvesLinks(t *testing.T) {
	dir := writePlugin(t, t.TempDir(), "join", emptyModule, "capabilities:\n  read_only_dirs: [current]\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "v2"), 0o755))
	require.NoError(t, os.Symlink("v2", filepath.Join(dir, "current")))
	got, err := loadPlugin(t, dir).ReadOnlyDirs()
	require.NoError(t, err)
	require.Equal(t, []string{mustEvalSymlinks(t, filepath.Join(dir, "v2"))}, got)
}

func mustEvalSymlinks(t *testing.T, path string) string {
	t.Helper()
	resolved, err := filepath.EvalSymlinks(path)
	require.NoError(t, err)
	return resolved
}
