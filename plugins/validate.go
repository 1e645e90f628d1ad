package plugins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Validate checks everything about p that needs no WebAssembly engine and
// returns every problem found, or nil: the manifest's rules (again, for a
// Plugin built in code), the module file as ReadWasm checks it (inside the
// plugin directory, size, header and section framing, checksum) and that
// each read-only directory exists inside the plugin directory. The host
// adds the check of the module's exports and imports against package abi.
func Validate(p *Plugin) []error {
	if p == nil || p.Manifest == nil {
		return []error{errors.New("plugin has no manifest")}
	}
	errs := p.Manifest.problems(p.ManifestPath())
	if len(errs) > 0 {
		// The paths below come from the manifest; checking files named by a
		// broken manifest would only repeat its errors.
		return errs
	}
	if _, err := p.ReadWasm(); err != nil {
		errs = append(errs, err)
	}
	_, dirErrs := p.readOnlyDirs()
	return append(errs, dirErrs...)
}

// ReadOnlyDirs returns the host paths of the manifest's read-only
// directories, with symbolic links resolved, after checking that each one
// is a directory inside the plugin directory. The host mounts these paths,
// not the manifest's, so that a link swapped in later cannot widen the
// mount beyond what was checked here.
func (p *Plugin) ReadOnlyDirs() ([]string, error) {
	paths, errs := p.readOnlyDirs()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return paths, nil
}

func (p *Plugin) readOnlyDirs() ([]string, []error) {
	var paths []string
	var errs []error
	for _, d := range p.Manifest.Capabilities.ReadOnlyDirs {
		dir := filepath.Join(p.Dir, filepath.FromSlash(d))
		resolved, err := p.readOnlyDir(dir)
		if err != nil {
			errs = append(errs, &explainedError{
				msg: fmt.Sprintf("%s: capabilities.read_only_dirs: %s", p.ManifestPath(), err), err: err})
			continue
		}
		paths = append(paths, resolved)
	}
	return paths, errs
}

func (p *Plugin) readOnlyDir(dir string) (string, error) {
	if err := p.checkInside(dir); err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return resolved, nil
}
