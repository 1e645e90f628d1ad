package spec_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/spec"
)

const tenantsSpec = `name: shared-host
tenants:
  - name: acme
    plugin_dirs: [tenants/acme]
    weight: 3
    engine: wasmtime
    quotas: {memory_pages: 64, cpu_per_batch: 250ms, concurrent_instances: 2, max_output_bytes: 1MiB,
             max_state_bytes_per_key: 4KiB, max_timers_per_key: 10, ingest_rate: 500, max_module_bytes: 8MiB}
    forbid: [clock, read_only_dirs]
  - name: globex
    plugin_dirs: [/srv/globex]
streams:
  - {name: acme-out, shared_with: [globex]}
sources:
  - {name: feed, type: generator, stream: feed}
  - {name: acme-in, type: generator, stream: acme-in, tenant: acme}
computations:
  - {name: a, plugin: p, tenant: acme, input_streams: [feed, acme-in], output_streams: [acme-out, acme-private]}
  - {name: g, plugin: p, tenant: globex, input_streams: [feed, acme-out], output_streams: [g-out]}
  - {name: op, plugin: p, input_streams: [acme-private, g-out]}
`

func TestTenantsParseWithDefaultsAndOwnership(t *testing.T) {
	p, err := spec.Parse("/etc/flowhost/pipeline.yaml", []byte(tenantsSpec))
	require.NoError(t, err)
	acme, globex := p.Tenant("acme"), p.Tenant("globex")
	require.NotNil(t, acme)
	require.Equal(t, []string{filepath.FromSlash("/etc/flowhost/tenants/acme")}, acme.PluginDirs, "relative to the spec's directory")
	require.Equal(t, spec.Quotas{MemoryPages: 64, CPUPerBatch: 250 * time.Millisecond, ConcurrentInstances: 2, MaxOutputBytes: 1 << 20,
		MaxStateBytesPerKey: 4 << 10, MaxTimersPerKey: 10, IngestRate: 500, MaxModuleBytes: 8 << 20}, acme.Quotas)
	require.Equal(t, 3, acme.Weight)
	require.Equal(t, spec.TenantEngineWasmtime, acme.Engine)
	require.True(t, acme.Forbids(spec.CapabilityClock))
	require.Equal(t, spec.Quotas{MemoryPages: spec.DefaultTenantMemoryPages, CPUPerBatch: spec.DefaultTenantCPUPerBatch,
		MaxOutputBytes: spec.DefaultTenantMaxOutputBytes, MaxStateBytesPerKey: spec.DefaultTenantMaxStateBytesPerKey,
		MaxTimersPerKey: spec.DefaultTenantMaxTimersPerKey, MaxModuleBytes: spec.DefaultTenantMaxModuleBytes}, globex.Quotas)
	require.Equal(t, spec.DefaultTenantWeight, globex.Weight)
	require.False(t, globex.Forbids(spec.CapabilityClock))
	require.Nil(t, p.Tenant("initech"))

	for _, c := range []struct {
		tenant, stream string
		may            bool
	}{
		{"acme", "feed", true},       // the operator's
		{"acme", "acme-in", true},    // its own source's
		{"globex", "acme-out", true}, // shared with it
		{"globex", "acme-private", false},
		{"globex", "acme-in", false},
		{"", "acme-private", true}, // the operator reads everything
	} {
		require.Equal(t, c.may, p.MayRead(c.tenant, c.stream), "%s reads %s", c.tenant, c.stream)
	}
	require.Equal(t, "acme", p.StreamTenant("acme-private"))
	require.Equal(t, "", p.StreamTenant("feed"))
}

func TestTenantErrorsNameTheField(t *testing.T) {
	base := func(tenants, streams, comps string) string {
		return "name: x\n" + tenants + streams +
			"sources:\n  - {name: s, type: generator, stream: in, tenant: a}\n" + comps
	}
	const tenantA = "tenants:\n  - {name: a, plugin_dirs: [d]}\n"
	cases := []struct {
		name, spec, want string
	}{
		{"no plugin dirs", base("tenants:\n  - {name: a}\n", "", ""), "x.yaml:3:5: tenants[0].plugin_dirs: a tenant needs at least one plugin directory"},
		{"weight", base("tenants:\n  - {name: a, plugin_dirs: [d], weight: 0}\n", "", ""), "tenants[0].weight: expected 1..1000; got 0"},
		{"memory", base("tenants:\n  - {name: a, plugin_dirs: [d], quotas: {memory_pages: 70000}}\n", "", ""), "tenants[0].quotas.memory_pages: expected 1..65536"},
		{"cpu", base("tenants:\n  - {name: a, plugin_dirs: [d], quotas: {cpu_per_batch: 0s}}\n", "", ""), "tenants[0].quotas.cpu_per_batch: expected a duration above 0"},
		{"rate", base("tenants:\n  - {name: a, plugin_dirs: [d], quotas: {ingest_rate: -1}}\n", "", ""), "tenants[0].quotas.ingest_rate: expected records per second"},
		{"output", base("tenants:\n  - {name: a, plugin_dirs: [d], quotas: {max_output_bytes: 8GiB}}\n", "", ""), "tenants[0].quotas.max_output_bytes: expected at most 4GiB"},
		{"capability", base("tenants:\n  - {name: a, plugin_dirs: [d], forbid: [network]}\n", "", ""), `tenants[0].forbid[0]: expected one of clock, read_only_dirs; got "network"`},
		{"duplicate", base("tenants:\n  - {name: a, plugin_dirs: [d]}\n  - {name: a, plugin_dirs: [e]}\n", "", ""), `tenants[1].name: duplicate tenant name "a"; first defined at 3:12`},
		{"unknown tenant", base(tenantA, "", "computations:\n  - {name: c, plugin: p, tenant: b, input_streams: [in]}\n"),
			`computations[0].tenant: unknown tenant "b"; expected one of tenants (a)`},
		{"misspelled tenant", base("tenants:\n  - {name: acme, plugin_dirs: [d]}\n", "", "computations:\n  - {name: c, plugin: p, tenant: acne, input_streams: [in]}\n"),
			`computations[0].tenant: unknown tenant "acne"; expected one of tenants (acme); did you mean "acme"?` + "\n"},
		{"unknown source tenant", "name: x\nsources:\n  - {name: s, type: generator, stream: in, tenant: z}\n",
			`sources[0].tenant: unknown tenant "z"; expected one of tenants (none declared)`},
		{"unknown share", base(tenantA, "streams:\n  - {name: in, shared_with: [b]}\n", ""), `streams[0].shared_with[0]: unknown tenant "b"`},
		{"foreign stream", base(tenantA+"  - {name: b, plugin_dirs: [e]}\n", "", "computations:\n  - {name: c, plugin: p, tenant: b, input_streams: [in]}\n"),
			`computations[0].input_streams[0]: stream "in" belongs to tenant "a"; tenant "b" may read it only if its declaration shares it: streams: [{name: in, shared_with: [b]}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse("x.yaml", []byte(c.spec))
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error()+"\n", c.want), "got:\n%v\nwant a line containing:\n%s", err, c.want)
		})
	}
	for _, shared := range []string{"[b]", `["*"]`} {
		ok := base(tenantA+"  - {name: b, plugin_dirs: [e]}\n", "streams:\n  - {name: in, shared_with: "+shared+"}\n",
			"computations:\n  - {name: c, plugin: p, tenant: b, input_streams: [in]}\n")
		_, err := spec.Parse("x.yaml", []byte(ok))
		require.NoError(t, err, "shared_with: %s", shared)
	}
}
