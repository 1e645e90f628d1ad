package spec

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Tenant defaults, filled in by Parse for a tenant that leaves them out.
// They are sized for untrusted code on a shared machine: generous for a
// well-behaved computation, small enough that one tenant's bug cannot
// take the machine's memory or a worker for long.
const (
	// DefaultTenantWeight is a tenant's share of the workers under
	// contention, relative to the other tenants' weights.
	DefaultTenantWeight = 1
	// DefaultTenantMemoryPages caps an instance's linear memory: 1024
	// pages of 64 KiB, 64 MiB.
	DefaultTenantMemoryPages = 1024
	// DefaultTenantCPUPerBatch caps the time a guest may spend on one batch.
	DefaultTenantCPUPerBatch = 5 * time.Second
	// DefaultTenantMaxOutputBytes caps the encoded response of one batch.
	DefaultTenantMaxOutputBytes int64 = 64 << 20
	// DefaultTenantMaxStateBytesPerKey caps the state of one key.
	DefaultTenantMaxStateBytesPerKey int64 = 1 << 20
	// DefaultTenantMaxTimersPerKey caps the pending timers of one key.
	DefaultTenantMaxTimersPerKey = 10000
	// DefaultTenantMaxModuleBytes caps the size of a tenant's .wasm file.
	DefaultTenantMaxModuleBytes int64 = 64 << 20
	// MinTenantCPULimit is the smallest cpu_limit other than 0: a tenant
	// limited further would wait longer for its next batch than the
	// scheduler can count.
	MinTenantCPULimit = 0.001
	// MaxTenantIngestRate is the largest ingest_rate: a token bucket holds
	// one second's worth of records, counted in an int.
	MaxTenantIngestRate = 1e9
)

// AnyTenant in a stream's SharedWith shares it with every tenant.
const AnyTenant = "*"

// Capability names a WASI capability a manifest can grant its guest.
type Capability string

// The capabilities a tenant's policy can forbid.
const (
	// CapabilityClock is the real wall and monotonic clocks.
	CapabilityClock Capability = "clock"
	// CapabilityReadOnlyDirs is read-only directories of the plugin.
	CapabilityReadOnlyDirs Capability = "read_only_dirs"
)

func (Capability) values() []string { return []string{"clock", "read_only_dirs"} }

// TenantEngine names the engine a tenant's plugins run on when their
// manifest names none.
type TenantEngine string

// The tenant engines.
const (
	TenantEngineDefault  TenantEngine = ""
	TenantEngineWazero   TenantEngine = "wazero"
	TenantEngineWasmtime TenantEngine = "wasmtime"
)

func (TenantEngine) values() []string { return []string{"", "wazero", "wasmtime"} }

// Tenant is a party whose computations run beside others' on one host: a
// named set of plugin directories, the quotas every instance of its
// plugins runs under, the capabilities it may not grant, and its weight in
// the fair share of the workers.
//
// Isolation: a computation or source that names a tenant belongs to it,
// and so do the streams it writes. A tenant's computation may read only
// its own tenant's streams, streams written by no tenant (the operator's:
// a source or computation without a tenant), and streams whose
// declaration in streams shares them with it (SharedWith). State and
// timers belong to a computation and only its own guest ever sees them.
// A tenant's plugins are looked up in its PluginDirs only, so two tenants
// may each have a plugin of the same name.
type Tenant struct {
	// Name names the tenant. Required, unique among tenants.
	Name string `yaml:"name"`
	// PluginDirs are the tenant's plugin directories, or folders of them,
	// relative to the spec's directory. At least one.
	PluginDirs []string `yaml:"plugin_dirs,omitempty"`
	// Weight is the tenant's share of the workers when tenants contend
	// for them, relative to the others' (computations without a tenant
	// count as one tenant of weight 1). 1..1000; default 1.
	Weight int `yaml:"weight"`
	// Engine runs the tenant's plugins whose manifest names no engine:
	// wazero or wasmtime. Default: the manifest's (wazero when it names
	// none).
	Engine TenantEngine `yaml:"engine"`
	// Quotas bound every instance of the tenant's plugins.
	Quotas Quotas `yaml:"quotas"`
	// Forbid lists capabilities the tenant's manifests may not grant
	// (clock, read_only_dirs): a plugin whose manifest grants one is
	// refused at load.
	Forbid []Capability `yaml:"forbid,omitempty"`
}

func (t *Tenant) setDefaults() {
	t.Weight = DefaultTenantWeight
	t.Quotas.setDefaults()
}

// Forbids reports whether the tenant's policy forbids capability c.
func (t *Tenant) Forbids(c Capability) bool { return slices.Contains(t.Forbid, c) }

// Quotas bound what a tenant's guests may use. A plugin's manifest may ask
// for less (its limits); it never gets more. What exceeds a quota fails
// where it happens, names the tenant, the plugin and the quota, and loses
// nothing: the batch or key goes by the computation's failure policy or
// to its dead-letter route, and the state or timers it would have
// changed stay as they were.
type Quotas struct {
	// MemoryPages caps the linear memory of one instance, in 64 KiB
	// pages; a guest growing past it traps. 1..65536; default 1024
	// (64 MiB).
	MemoryPages int `yaml:"memory_pages"`
	// CPUPerBatch caps the time a guest may run on one batch; a guest
	// still running is interrupted and the batch fails (and is retried
	// on a fresh instance). Above 0; default 5s.
	CPUPerBatch time.Duration `yaml:"cpu_per_batch"`
	// CPULimit caps the tenant's batches' time on the workers per second
	// of wall time, in cores (0.5: half a core), like a container's CPU
	// limit: a tenant over it waits for its next batch even when workers
	// are free, so that its guests burning CPU cannot slow the others
	// down on a machine with few cores. It holds over every 100ms, as a
	// Linux cgroup's CPU limit does: a tenant may run ahead of it by at
	// most one such period's worth. 0 means no cap; default 0.
	CPULimit float64 `yaml:"cpu_limit"`
	// ConcurrentInstances caps how many of the tenant's instances run a
	// batch at the same time, whatever its computations' partitions. 0
	// means no cap beyond the workers; default 0.
	ConcurrentInstances int `yaml:"concurrent_instances"`
	// MaxOutputBytes caps the encoded response of one batch (emitted
	// messages, state, timers); a larger one fails the batch. Default
	// 64MiB.
	MaxOutputBytes int64 `yaml:"max_output_bytes" spec:"size"`
	// MaxStateBytesPerKey caps the state of one key; a key whose new
	// state is larger fails (its inputs are dead-lettered, its state is
	// left as it was). Default 1MiB.
	MaxStateBytesPerKey int64 `yaml:"max_state_bytes_per_key" spec:"size"`
	// MaxTimersPerKey caps the pending timers of one key; a key that
	// would have more fails like one over its state quota. Default 10000.
	MaxTimersPerKey int `yaml:"max_timers_per_key"`
	// IngestRate caps the records per second the tenant's sources accept
	// (a token bucket holding one second's worth): a source over it
	// waits, and an HTTP client waits for its answer, so nothing is
	// refused or lost. 0 means no cap; default 0.
	IngestRate float64 `yaml:"ingest_rate"`
	// MaxModuleBytes caps the size of a plugin's .wasm file; a larger one
	// is refused at load before it is read. Default 64MiB.
	MaxModuleBytes int64 `yaml:"max_module_bytes" spec:"size"`
}

func (q *Quotas) setDefaults() {
	q.MemoryPages = DefaultTenantMemoryPages
	q.CPUPerBatch = DefaultTenantCPUPerBatch
	q.MaxOutputBytes = DefaultTenantMaxOutputBytes
	q.MaxStateBytesPerKey = DefaultTenantMaxStateBytesPerKey
	q.MaxTimersPerKey = DefaultTenantMaxTimersPerKey
	q.MaxModuleBytes = DefaultTenantMaxModuleBytes
}

// Tenant returns the tenant named name, or nil.
func (p *Pipeline) Tenant(name string) *Tenant {
	for i := range p.Tenants {
		if p.Tenants[i].Name == name {
			return &p.Tenants[i]
		}
	}
	return nil
}

// StreamTenant returns the tenant that owns stream s: the tenant of its
// writer, "" for the operator's (a writer without a tenant, or none).
func (p *Pipeline) StreamTenant(s string) string {
	for i := range p.Sources {
		if p.Sources[i].Stream == s {
			return p.Sources[i].Tenant
		}
	}
	for i := range p.Computations {
		c := &p.Computations[i]
		if slices.Contains(c.OutputStreams, s) || c.DeadLetter != nil && c.DeadLetter.Stream == s {
			return c.Tenant
		}
	}
	return ""
}

// MayRead reports whether tenant t may read stream s: its own, the
// operator's, or shared with it. The operator ("") reads everything.
func (p *Pipeline) MayRead(t, s string) bool {
	owner := p.StreamTenant(s)
	if t == "" || owner == "" || owner == t {
		return true
	}
	for _, d := range p.Streams {
		if d.Name == s && (slices.Contains(d.SharedWith, t) || slices.Contains(d.SharedWith, AnyTenant)) {
			return true
		}
	}
	return false
}

func (v *validator) tenants() {
	first := map[string]string{}
	for i := range v.p.Tenants {
		t := &v.p.Tenants[i]
		path := indexPath("tenants", i)
		if v.requiredName(fieldPath(path, "name"), t.Name) {
			v.unique(first, fieldPath(path, "name"), "tenant", t.Name)
		}
		if len(t.PluginDirs) == 0 {
			v.errorf(fieldPath(path, "plugin_dirs"), "a tenant needs at least one plugin directory")
		}
		for j, d := range t.PluginDirs {
			if d == "" {
				v.errorf(indexPath(fieldPath(path, "plugin_dirs"), j), "expected a directory; got an empty string")
			}
		}
		if t.Weight < 1 || t.Weight > 1000 {
			v.errorf(fieldPath(path, "weight"), "expected 1..1000; got %d", t.Weight)
		}
		q := &t.Quotas
		qp := fieldPath(path, "quotas")
		if q.MemoryPages < 1 || q.MemoryPages > 65536 {
			v.errorf(fieldPath(qp, "memory_pages"), "expected 1..65536 pages of 64 KiB; got %d", q.MemoryPages)
		}
		if q.CPUPerBatch <= 0 {
			v.errorf(fieldPath(qp, "cpu_per_batch"), "expected a duration above 0; got %v", q.CPUPerBatch)
		}
		if !(q.CPULimit == 0 || q.CPULimit >= MinTenantCPULimit && !math.IsInf(q.CPULimit, 0)) { // also NaN
			v.errorf(fieldPath(qp, "cpu_limit"), "expected 0 (no cap) or a finite number of cores, at least %v; got %v", MinTenantCPULimit, q.CPULimit)
		}
		v.atLeast(fieldPath(qp, "concurrent_instances"), int64(q.ConcurrentInstances), 0)
		v.atLeast(fieldPath(qp, "max_output_bytes"), q.MaxOutputBytes, 1)
		if q.MaxOutputBytes > 1<<32 {
			v.errorf(fieldPath(qp, "max_output_bytes"), "expected at most 4GiB (a response is returned as a 32-bit length); got %d", q.MaxOutputBytes)
		}
		v.atLeast(fieldPath(qp, "max_state_bytes_per_key"), q.MaxStateBytesPerKey, 1)
		v.atLeast(fieldPath(qp, "max_timers_per_key"), int64(q.MaxTimersPerKey), 1)
		if !(q.IngestRate >= 0 && q.IngestRate <= MaxTenantIngestRate) { // also NaN
			v.errorf(fieldPath(qp, "ingest_rate"), "expected records per second, 0 (no cap) to %v; got %v", MaxTenantIngestRate, q.IngestRate)
		}
		v.atLeast(fieldPath(qp, "max_module_bytes"), q.MaxModuleBytes, 8)
		seen := map[Capability]bool{}
		for j, c := range t.Forbid {
			if seen[c] {
				v.errorf(indexPath(fieldPath(path, "forbid"), j), "capability %q is listed twice", c)
			}
			seen[c] = true
		}
	}
	tenantRef := func(path, name string) {
		if name != "" && v.p.Tenant(name) == nil {
			names := make([]string, len(v.p.Tenants))
			for i := range v.p.Tenants {
				names[i] = v.p.Tenants[i].Name
			}
			v.errorf(path, "unknown tenant %q; expected one of tenants (%s)%s", name, v.tenantNames(), didYouMean(name, names))
		}
	}
	for i := range v.p.Sources {
		tenantRef(fieldPath(indexPath("sources", i), "tenant"), v.p.Sources[i].Tenant)
	}
	for i := range v.p.Computations {
		c := &v.p.Computations[i]
		path := indexPath("computations", i)
		tenantRef(fieldPath(path, "tenant"), c.Tenant)
		if c.Tenant == "" || v.p.Tenant(c.Tenant) == nil {
			continue
		}
		for j, s := range c.InputStreams {
			if !v.p.MayRead(c.Tenant, s) {
				v.errorf(indexPath(fieldPath(path, "input_streams"), j),
					"stream %q belongs to tenant %q; tenant %q may read it only if its declaration shares it: streams: [{name: %s, shared_with: [%s]}]",
					s, v.p.StreamTenant(s), c.Tenant, s, c.Tenant)
			}
		}
	}
	for i, s := range v.p.Streams {
		for j, t := range s.SharedWith {
			if t != AnyTenant {
				tenantRef(indexPath(fieldPath(indexPath("streams", i), "shared_with"), j), t)
			}
		}
	}
}

func (v *validator) tenantNames() string {
	if len(v.p.Tenants) == 0 {
		return "none declared"
	}
	names := make([]string, len(v.p.Tenants))
	for i := range v.p.Tenants {
		names[i] = v.p.Tenants[i].Name
	}
	return strings.Join(names, ", ")
}
