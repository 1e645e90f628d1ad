package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func names(c *Catalog) []string {
	var out []string
	for _, p := range c.All() {
		out = append(out, p.Manifest.Name)
	}
	return out
}

func TestDiscoverLayouts(t *testing.T) {
	tests := []struct {
		name string
		// setup creates the layout under root and returns the --plugins dirs.
		setup func(t *testing.T, root string) []string
		want  []string
	}{
		{
			name: "single plugin directory",
			setup: func(t *testing.T, root string) []string {
				return []string{writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, "")}
			},
			want: []string{"join"},
		},
		{
			name: "folder of plugin directories",
			setup: func(t *testing.T, root string) []string {
				writePlugin(t, filepath.Join(root, "all", "b"), "zeta", emptyModule, "")
				writePlugin(t, filepath.Join(root, "all", "a"), "alpha", emptyModule, "")
				// Hidden directories and plain files are not plugins.
				require.NoError(t, os.MkdirAll(filepath.Join(root, "all", ".git", "objects"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "all", "README.md"), []byte("hi"), 0o644))
				return []string{filepath.Join(root, "all")}
			},
			want: []string{"alpha", "zeta"},
		},
		{
			name: "several directories of both kinds",
			setup: func(t *testing.T, root string) []string {
				writePlugin(t, filepath.Join(root, "team1", "join"), "join", emptyModule, "")
				writePlugin(t, filepath.Join(root, "team1", "split"), "split", emptyModule, "")
				single := writePlugin(t, filepath.Join(root, "enrich"), "enrich", emptyModule, "")
				return []string{filepath.Join(root, "team1"), single}
			},
			want: []string{"enrich", "join", "split"},
		},
		{
			name: "a plugin directory with subdirectories is one plugin",
			setup: func(t *testing.T, root string) []string {
				dir := writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, "")
				require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
				return []string{dir}
			},
			want: []string{"join"},
		},
		{
			name: "the same directory twice, spelled differently",
			setup: func(t *testing.T, root string) []string {
				dir := writePlugin(t, filepath.Join(root, "p", "join"), "join", emptyModule, "")
				return []string{filepath.Join(root, "p"), dir + "/", filepath.Join(root, "p", ".", "join")}
			},
			want: []string{"join"},
		},
		{
			name: "symbolic link to a plugin directory",
			setup: func(t *testing.T, root string) []string {
				dir := writePlugin(t, filepath.Join(root, "store", "join"), "join", emptyModule, "")
				require.NoError(t, os.MkdirAll(filepath.Join(root, "active"), 0o755))
				require.NoError(t, os.Symlink(dir, filepath.Join(root, "active", "join")))
				return []string{filepath.Join(root, "active")}
			},
			want: []string{"join"},
		},
		{
			name:  "no directories",
			setup: func(t *testing.T, root string) []string { return nil },
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Discover(tt.setup(t, t.TempDir()))
			require.NoError(t, err)
			require.Equal(t, tt.want, names(c))
			for _, p := range c.All() {
				require.Equal(t, filepath.Join(p.Dir, p.Manifest.Name+".wasm"), p.WasmPath)
				_, err := p.ReadWasm()
				require.NoError(t, err)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		name string
		// setup returns the --plugins dirs and the expected error lines.
		setup func(t *testing.T, root string) ([]string, []string)
	}{
		{
			name: "duplicate names across directories",
			setup: func(t *testing.T, root string) ([]string, []string) {
				a := writePlugin(t, filepath.Join(root, "a", "join"), "join", emptyModule, "")
				b := writePlugin(t, filepath.Join(root, "b", "join2"), "join", emptyModule, "")
				return []string{filepath.Join(root, "a"), b}, []string{
					`duplicate plugin name "join": ` + filepath.Join(a, "plugin.yaml") + " and " + filepath.Join(b, "plugin.yaml"),
				}
			},
		},
		{
			name: "missing directory",
			setup: func(t *testing.T, root string) ([]string, []string) {
				missing := filepath.Join(root, "nope")
				return []string{missing}, []string{"plugin directory " + missing + " does not exist"}
			},
		},
		{
			name: "a file instead of a directory",
			setup: func(t *testing.T, root string) ([]string, []string) {
				file := filepath.Join(writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, ""), "plugin.yaml")
				return []string{file}, []string{file + " is not a directory; give a plugin directory or a folder of plugin directories"}
			},
		},
		{
			name: "subdirectory without a manifest",
			setup: func(t *testing.T, root string) ([]string, []string) {
				writePlugin(t, filepath.Join(root, "all", "join"), "join", emptyModule, "")
				stray := filepath.Join(root, "all", "notes")
				require.NoError(t, os.MkdirAll(stray, 0o755))
				return []string{filepath.Join(root, "all")}, []string{
					filepath.Join(stray, "plugin.yaml") + ": no manifest: " + stray + " is not a plugin directory",
				}
			},
		},
		{
			name: "folder with nothing in it",
			setup: func(t *testing.T, root string) ([]string, []string) {
				empty := filepath.Join(root, "empty")
				require.NoError(t, os.MkdirAll(empty, 0o755))
				return []string{empty}, []string{empty + ": no plugin.yaml and no plugin subdirectories"}
			},
		},
		{
			name: "manifest errors keep their positions, and every problem is reported",
			setup: func(t *testing.T, root string) ([]string, []string) {
				dir := writePlugin(t, filepath.Join(root, "all", "a"), "a", emptyModule, "engine: v8\n")
				missing := filepath.Join(root, "gone")
				return []string{filepath.Join(root, "all"), missing}, []string{
					filepath.Join(dir, "plugin.yaml") + `:7:9: engine: unknown engine "v8"; use wazero or wasmtime`,
					"plugin directory " + missing + " does not exist",
				}
			},
		},
		{
			name: "oversized manifest",
			setup: func(t *testing.T, root string) ([]string, []string) {
				dir := writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, "description: "+strings.Repeat("x", 1<<20)+"\n")
				return []string{dir}, []string{filepath.Join(dir, "plugin.yaml") + ": manifest larger than 1048576 bytes"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs, want := tt.setup(t, t.TempDir())
			c, err := Discover(dirs)
			require.Nil(t, c)
			require.Error(t, err)
			require.Equal(t, strings.Join(want, "\n"), err.Error())
		})
	}
}

func TestDiscoverManifestErrorIsTyped(t *testing.T) {
	dir := writePlugin(t, t.TempDir(), "join", emptyModule, "abi: 3\n")
	_, err := Discover([]string{dir})
	// writePlugin already wrote abi: 1, so the parser reports the duplicate.
	var me *ManifestError
	require.ErrorAs(t, err, &me)
	require.Equal(t, filepath.Join(dir, "plugin.yaml"), me.File)
	require.Equal(t, 7, me.Line)
}

func TestLookup(t *testing.T) {
	root := t.TempDir()
	writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, "")
	writePlugin(t, filepath.Join(root, "enrich"), "enrich", emptyModule, "")
	c, err := Discover([]string{root})
	require.NoError(t, err)

	p, err := c.Lookup("join")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "join"), p.Dir)

	_, err = c.Lookup("jion")
	require.ErrorIs(t, err, ErrUnknownPlugin)
	require.EqualError(t, err, `unknown plugin "jion" (did you mean "join"?); known plugins: enrich, join`)
	_, err = c.Lookup("window")
	require.EqualError(t, err, `unknown plugin "window"; known plugins: enrich, join`, "no hint for a name close to none")

	empty, err := Discover(nil)
	require.NoError(t, err)
	_, err = empty.Lookup("join")
	require.ErrorIs(t, err, ErrUnknownPlugin)
	require.EqualError(t, err, `unknown plugin "join": no plugins were discovered`)
}

func TestAllReturnsACopy(t *testing.T) {
	root := t.TempDir()
	writePlugin(t, filepath.Join(root, "b"), "b", emptyModule, "")
	writePlugin(t, filepath.Join(root, "a"), "a", emptyModule, "")
	c, err := Discover([]string{root})
	require.NoError(t, err)
	all := c.All()
	all[0], all[1] = all[1], all[0]
	require.Equal(t, []string{"a", "b"}, names(c))
}

func TestLoad(t *testing.T) {
	dir := writePlugin(t, t.TempDir(), "join", emptyModule, "")
	p, err := Load(dir + "/./")
	require.NoError(t, err)
	require.Equal(t, dir, p.Dir)
	require.Equal(t, filepath.Join(dir, "plugin.yaml"), p.ManifestPath())

	parent := filepath.Dir(dir)
	_, err = Load(parent)
	require.EqualError(t, err, filepath.Join(parent, "plugin.yaml")+": no manifest: "+parent+" is not a plugin directory")
}

// TestDiscoverPartialKeepsWhatLoaded: one broken manifest and a name two
// plugins claim refuse only those; the rest is in the catalog, and the
// lookups of what is not say why.
func TestDiscoverPartialKeepsWhatLoaded(t *testing.T) {
	root := t.TempDir()
	writePlugin(t, filepath.Join(root, "good"), "good", emptyModule, "")
	a := writePlugin(t, filepath.Join(root, "twin-a"), "twin", emptyModule, "")
	b := writePlugin(t, filepath.Join(root, "twin-b"), "twin", emptyModule, "")
	broken := filepath.Join(root, "broken")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "plugin.yaml"), []byte("name: broken\nversion: one\n"), 0o644))

	_, err := Discover([]string{root})
	require.Error(t, err, "Discover refuses it all")

	c, err := DiscoverPartial([]string{root})
	require.Error(t, err)
	require.Contains(t, err.Error(), filepath.Join(broken, "plugin.yaml"))
	require.Equal(t, []string{"good"}, names(c))
	p, err := c.Lookup("good")
	require.NoError(t, err)
	require.Equal(t, "good", p.Manifest.Name)
	_, err = c.Lookup("twin")
	require.EqualError(t, err, `duplicate plugin name "twin": `+filepath.Join(a, "plugin.yaml")+" and "+filepath.Join(b, "plugin.yaml"))
	_, err = c.Lookup("broken")
	require.ErrorIs(t, err, ErrUnknownPlugin)
	require.Contains(t, err.Error(), "known plugins: good; the plugin directories also had problems: ")
	require.Contains(t, err.Error(), filepath.Join(broken, "plugin.yaml"))
	require.NotContains(t, err.Error(), "\n", "one line")
}
