package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/host/internal/watch"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/plugins"
)

// errUnchanged: the plugin directory changed but its manifest's checksum
// did not (a module written before its manifest, an editor's backup
// file), so there is nothing to reload.
var errUnchanged = errors.New("the manifest's checksum is unchanged")

// watchPlugins reloads, while the run lasts, every computation whose
// plugin directory changes: when the directory has been quiet for a
// moment and its manifest names a new checksum, the new version is read,
// verified and compiled under the same tenant quotas and policy as at
// load, and handed to the runtime, which switches each partition at its
// next epoch boundary (runtime.Runtime.Reload). A version that fails any
// of that is refused with its reason and the running one keeps running.
// onReload, if set, hears of every attempt (a nil error: swapped).
func (l *Loaded) watchPlugins(ctx context.Context, rt *runtime.Runtime, onReload func(computation string, err error)) (stop func(), err error) {
	byDir := map[string][]string{}
	for name, p := range l.Origins {
		byDir[p.Dir] = append(byDir[p.Dir], name)
	}
	if len(byDir) == 0 {
		return func() {}, nil
	}
	w, err := watch.New(slices.Collect(maps.Keys(byDir)))
	if err != nil {
		return nil, fmt.Errorf("watching plugin directories for reloads: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case dir, ok := <-w.Changes():
				if !ok {
					return
				}
				for _, name := range byDir[dir] {
					err := l.reload(ctx, rt, name)
					if errors.Is(err, errUnchanged) {
						l.log.Debug("plugin directory changed, checksum did not: nothing to reload", "computation", name, "dir", dir)
						continue
					}
					if onReload != nil {
						onReload(name, err)
					}
				}
			case err, ok := <-w.Errors():
				if !ok {
					return
				}
				l.log.Error("watching plugin directories: reloads may be missed", "err", err)
			}
		}
	}()
	l.log.Info("watching plugin directories: a plugin whose manifest gets a new checksum is reloaded", "dirs", len(byDir))
	return func() { _ = w.Close(); <-done }, nil
}

// reload loads computation name's plugin directory again and, if its
// checksum changed, hands the new version to the runtime.
func (l *Loaded) reload(ctx context.Context, rt *runtime.Runtime, name string) error {
	f, p, err := l.prepareReload(ctx, name)
	if errors.Is(err, errUnchanged) {
		return err
	}
	if err != nil {
		rt.RefuseReload(name, err)
		return err
	}
	old := l.Origins[name]
	label := fmt.Sprintf("%s %s (sha256 %.12s)", p.Manifest.Name, p.Manifest.Version, p.Manifest.SHA256)
	if err := rt.Reload(ctx, name, f, label); err != nil {
		l.log.Error("reload refused: the running version keeps running", "computation", name, "err", err)
		return err
	}
	l.log.Info("plugin reloaded", "computation", name, "plugin", p.Manifest.Name,
		"from", old.Manifest.Version+" (sha256 "+old.Manifest.SHA256[:12]+")", "to", label)
	l.Origins[name] = p
	l.Factories[name] = f
	return nil
}

// prepareReload reads, verifies and compiles the version now in the
// plugin directory of computation name.
func (l *Loaded) prepareReload(ctx context.Context, name string) (compute.Factory, *plugins.Plugin, error) {
	old := l.Origins[name]
	c := l.pipe.Computation(name)
	p, err := plugins.Load(old.Dir)
	if err != nil {
		return nil, nil, err
	}
	_, refused := l.Factories[name].(*compute.Refused)
	if p.Manifest.SHA256 == old.Manifest.SHA256 && !refused {
		return nil, nil, errUnchanged
	}
	if p.Manifest.Name != old.Manifest.Name {
		return nil, nil, fmt.Errorf("%s now names plugin %q; computation %q runs plugin %q", p.ManifestPath(), p.Manifest.Name, name, old.Manifest.Name)
	}
	if !p.Manifest.Serves(plugins.Kind(c.Kind)) {
		return nil, nil, fmt.Errorf("plugin %q (%s) now serves %v, not %s", p.Manifest.Name, p.ManifestPath(), p.Manifest.Kinds, c.Kind)
	}
	f, eng, err := l.compile(ctx, p, l.pipe.Tenant(c.Tenant))
	if err != nil {
		if eng != nil {
			l.drop(ctx, eng)
		}
		return nil, nil, err
	}
	// The new manifest's default parameters apply to the new version.
	return &reloadedVersion{wasm: f, params: p.Manifest.MergeParameters(l.specParams[name]), eng: eng, loaded: l}, p, nil
}

// reloadedVersion is the factory of a version a reload compiled for one
// computation: it instantiates with the new manifest's default
// parameters, and owns its engine, which it closes when the runtime
// retires it (no partition runs it any more), so that reloads do not
// accumulate compiled modules.
type reloadedVersion struct {
	wasm   *compute.WASM
	params map[string]any
	eng    engine.Engine
	loaded *Loaded
}

// Instantiate instantiates the module with the version's parameters.
func (v *reloadedVersion) Instantiate(ctx context.Context, init *abi.Init) (compute.Computation, error) {
	init.Parameters = maps.Clone(v.params)
	return v.wasm.Instantiate(ctx, init)
}

// Retire closes the version's engine.
func (v *reloadedVersion) Retire(ctx context.Context) { v.loaded.drop(ctx, v.eng) }
