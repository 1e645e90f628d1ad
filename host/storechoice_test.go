package host_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host"
	"github.com/flowhost/flowhost/host/spec"
)

// TestRunRefusesAStoreChoiceThatDoesNotHold: a run whose store is on Kafka
// (the spec's cluster block, or --cluster) refuses the flags of another
// store with a sentence saying why, and a --cluster block that does not
// validate is reported as the flags' error, before any plugin is loaded
// or broker contacted.
func TestRunRefusesAStoreChoiceThatDoesNotHold(t *testing.T) {
	dir := t.TempDir()
	pipeline := `
name: choice
sources:
  - {name: in, type: generator, stream: in, generator: {count: 1}}
sinks:
  - {name: out, type: stdout, streams: [in]}
`
	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte(pipeline), 0o644))
	clustered := filepath.Join(dir, "cluster.yaml")
	require.NoError(t, os.WriteFile(clustered, []byte(pipeline+"cluster: {kafka: {brokers: [\"127.0.0.1:9\"]}}\n"), 0o644))
	flagCluster := &spec.Cluster{Kafka: &spec.ClusterKafka{Brokers: []string{"127.0.0.1:9"}}}
	for _, tc := range []struct {
		name string
		cfg  host.RunConfig
		want string
	}{
		{"in memory", host.RunConfig{SpecPath: clustered, InMemory: true},
			"--in-memory runs without a store, and the spec's cluster block (or --cluster) puts the store on Kafka: choose one"},
		{"data directory", host.RunConfig{SpecPath: clustered, DataDir: dir},
			"--data-dir: with a cluster block (or --cluster) the store is on Kafka, not in a data directory; drop one of them"},
		{"savepoint", host.RunConfig{SpecPath: plain, Cluster: flagCluster, FromSavepoint: dir},
			"--from-savepoint restores a data directory; a store on Kafka is restored from its topic"},
		{"flag block", host.RunConfig{SpecPath: plain, Cluster: &spec.Cluster{Kafka: &spec.ClusterKafka{}}},
			`--cluster, --brokers: cluster.kafka.brokers: required; expected a list of host:port such as ["127.0.0.1:9092"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			tc.cfg.PluginDirs = []string{filepath.Join(dir, "no-plugins")}
			err := host.Run(context.Background(), tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
