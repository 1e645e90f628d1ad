package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxManifestBytes bounds a manifest file; real ones are a few hundred bytes.
const maxManifestBytes = 1 << 20

// ErrUnknownPlugin is wrapped by the error Lookup returns for a name no
// plugin has.
var ErrUnknownPlugin = errors.New("unknown plugin")

// Catalog is the set of plugins found by Discover, keyed by name. It is
// immutable and safe for concurrent use.
type Catalog struct {
	byName map[string]*Plugin
	sorted []*Plugin
	// problems are what DiscoverPartial could not load, and ambiguous the
	// names two plugins claimed; Lookup reports them.
	problems  error
	ambiguous map[string]error
}

// Load reads the plugin directory dir: it parses dir/plugin.yaml and
// resolves the module path. It does not open the module; Validate and
// Plugin.ReadWasm do.
func Load(dir string) (*Plugin, error) {
	dir = filepath.Clean(dir)
	manifestPath := filepath.Join(dir, ManifestFile)
	data, err := readBounded(manifestPath, maxManifestBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no manifest: %s is not a plugin directory", manifestPath, dir)
		}
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("%s: manifest larger than %d bytes", manifestPath, maxManifestBytes)
		}
		return nil, err
	}
	m, err := ParseManifest(manifestPath, data)
	if err != nil {
		return nil, err
	}
	return &Plugin{Manifest: m, Dir: dir, WasmPath: filepath.Join(dir, filepath.FromSlash(m.Wasm))}, nil
}

// Discover builds a catalog from the directories given on the command
// line. Each one is either a plugin directory (it holds plugin.yaml) or a
// folder whose direct subdirectories are all plugin directories;
// subdirectories whose names start with '.' are skipped and plain files
// ignored. The same directory reached twice counts once.
//
// Discover reports every problem it finds, joined: a missing directory, a
// subdirectory without a manifest, each manifest error, and two plugins
// with the same name (naming both manifests). On any problem it returns no
// catalog. No directories give an empty catalog.
func Discover(dirs []string) (*Catalog, error) {
	c, err := DiscoverPartial(dirs)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DiscoverPartial is Discover for directories that belong to someone who
// must not be able to stop others with a typo, such as a tenant: it
// returns the catalog of the plugins that loaded, always, and every
// problem it found, joined (nil when there was none). A name two plugins
// claim is in neither: Lookup of it reports both manifests; Lookup of a
// name it does not know also reports the problems, since one of them may
// be the plugin asked for.
func DiscoverPartial(dirs []string) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Plugin{}, ambiguous: map[string]error{}}
	var errs []error
	seenDirs := map[string]bool{}
	for _, given := range dirs {
		pluginDirs, err := DirsIn(given)
		if err != nil {
			errs = append(errs, err)
		}
		for _, dir := range pluginDirs {
			key := canonicalDir(dir)
			if seenDirs[key] {
				continue
			}
			seenDirs[key] = true
			p, err := Load(dir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if other, dup := c.byName[p.Manifest.Name]; dup {
				err := fmt.Errorf("duplicate plugin name %q: %s and %s",
					p.Manifest.Name, other.ManifestPath(), p.ManifestPath())
				errs = append(errs, err)
				c.ambiguous[p.Manifest.Name] = err
				continue
			}
			c.byName[p.Manifest.Name] = p
		}
	}
	for name := range c.ambiguous {
		delete(c.byName, name)
	}
	for _, p := range c.byName {
		c.sorted = append(c.sorted, p)
	}
	slices.SortFunc(c.sorted, func(a, b *Plugin) int { return strings.Compare(a.Manifest.Name, b.Manifest.Name) })
	c.problems = errors.Join(errs...)
	return c, c.problems
}

// DirsIn returns the plugin directories a command-line directory stands
// for, as Discover reads it: given itself when it holds plugin.yaml,
// otherwise its direct subdirectories (but those whose names start with
// '.'), and an error for what is wrong with it (missing, not a directory,
// an empty folder). Subdirectories without a manifest are returned too,
// so that Load reports them by path.
func DirsIn(given string) ([]string, error) {
	dir := filepath.Clean(given)
	info, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plugin directory %s does not exist", dir)
		}
		return nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory; give a plugin directory or a folder of plugin directories", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return []string{dir}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	var subdirs []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		// Stat, not the entry's type, so that symbolic links to plugin
		// directories count.
		if info, err := os.Stat(sub); err == nil && info.IsDir() {
			subdirs = append(subdirs, sub)
		}
	}
	if len(subdirs) == 0 {
		return nil, fmt.Errorf("%s: no %s and no plugin subdirectories", dir, ManifestFile)
	}
	return subdirs, nil
}

// canonicalDir identifies a directory however it was spelled.
func canonicalDir(dir string) string {
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// Lookup returns the plugin called name. The error for an unknown name
// wraps ErrUnknownPlugin and lists the known names.
func (c *Catalog) Lookup(name string) (*Plugin, error) {
	if p, ok := c.byName[name]; ok {
		return p, nil
	}
	if err, ok := c.ambiguous[name]; ok {
		return nil, err
	}
	also := ""
	if c.problems != nil {
		also = "; the plugin directories also had problems: " + strings.ReplaceAll(c.problems.Error(), "\n", "; ")
	}
	if len(c.sorted) == 0 {
		return nil, fmt.Errorf("%w %q: no plugins were discovered%s", ErrUnknownPlugin, name, also)
	}
	names := make([]string, len(c.sorted))
	for i, p := range c.sorted {
		names[i] = p.Manifest.Name
	}
	return nil, fmt.Errorf("%w %q%s; known plugins: %s%s", ErrUnknownPlugin, name, didYouMean(name, names), strings.Join(names, ", "), also)
}

// All returns the plugins sorted by name, in a new slice.
func (c *Catalog) All() []*Plugin {
	return slices.Clone(c.sorted)
}
