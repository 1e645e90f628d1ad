package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/devbroker"
	"github.com/flowhost/flowhost/host/spec"
)

const twoStage = `name: %s
sources:
  - {name: in, type: generator, stream: orders, partitions: 2, generator: {count: 1}}
computations:
  - name: enrich
    plugin: p
    kind: map
    partitions: 3
    group_by: [user]
    input_streams: [orders]
    output_streams: [enriched]
  - name: count
    plugin: p
    kind: transform
    partitions: 4
    group_by: [region]
    input_streams: [orders, enriched]
    output_streams: [counts]
sinks:
  - {name: out, type: stdout, streams: [counts]}
`

func pipeline(t *testing.T, name string) *spec.Pipeline {
	t.Helper()
	p, err := spec.Parse(filepath.Join(t.TempDir(), "pipeline.yaml"), fmt.Appendf(nil, twoStage, name))
	require.NoError(t, err)
	return p
}

// admin returns an admin client of the test cluster: FLOWHOST_KAFKA_BROKERS
// when it is set, otherwise a development broker (kfake) on 127.0.0.1 that
// the test starts and stops.
func admin(t *testing.T) *kadm.Client {
	adm, _ := testCluster(t)
	return adm
}

// testCluster is admin with the cluster's seed brokers.
func testCluster(t testing.TB) (*kadm.Client, []string) {
	adm, brokers, _ := testClusterWithCompact(t)
	return adm, brokers
}

// testClusterWithCompact is testCluster with a function that compacts
// the development broker's compacted topics now; it is nil on a cluster
// of FLOWHOST_KAFKA_BROKERS, whose brokers compact in the background, on
// their own schedule.
func testClusterWithCompact(t testing.TB) (*kadm.Client, []string, func()) {
	t.Helper()
	var brokers []string
	var compact func()
	if env := os.Getenv("FLOWHOST_KAFKA_BROKERS"); env != "" {
		brokers = strings.Split(env, ",")
	} else {
		b, err := devbroker.Start(devbroker.Config{})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		brokers, compact = b.Addrs(), b.Compact
	}
	// Metadata answers are cached for MetadataMinAge (5 s by default):
	// short here, so that topics just created show at once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), brokers, compact
}

// uniqueName keeps runs against a shared cluster apart.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("t%d", time.Now().UnixNano())
}

func TestTopicsOfAPipeline(t *testing.T) {
	p := pipeline(t, "shop")
	topics, err := cluster.Topics(p)
	require.NoError(t, err)
	var got []string
	for _, tp := range topics {
		got = append(got, fmt.Sprintf("%s %d compacted=%v", tp.Name, tp.Partitions, tp.Compacted))
	}
	require.Equal(t, []string{
		"flowhost.shop.orders.enrich 3 compacted=false",
		"flowhost.shop.enrich.changelog 3 compacted=true",
		"flowhost.shop.orders.count 4 compacted=false",
		"flowhost.shop.enriched.count 4 compacted=false",
		"flowhost.shop.count.changelog 4 compacted=true",
	}, got, "a stream read by two computations has a topic per reader, partitioned as the reader is")
}

func TestTopicNameTooLongIsRefusedAtTheSpec(t *testing.T) {
	p := pipeline(t, strings.Repeat("p", 128))
	long := strings.Repeat("s", 128)
	p.Computations[0].InputStreams = []string{long}
	_, err := cluster.Topics(p)
	require.ErrorContains(t, err, "computations[0]")
	require.ErrorContains(t, err, "Kafka allows 249")
}

// TestEnsureCreatesThenAcceptsItsOwnLayout: a first Ensure creates every
// topic with its partitions and policy; a second (another host starting)
// finds them and changes nothing.
func TestEnsureCreatesThenAcceptsItsOwnLayout(t *testing.T) {
	adm := admin(t)
	ctx := context.Background()
	p := pipeline(t, uniqueName(t))
	topics, err := cluster.Topics(p)
	require.NoError(t, err)
	require.NoError(t, cluster.Ensure(ctx, adm, p, topics, 1))
	details, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	for _, tp := range topics {
		require.Len(t, details[tp.Name].Partitions, int(tp.Partitions), tp.Name)
	}
	require.NoError(t, cluster.Ensure(ctx, adm, p, topics, 1), "a second host finds the layout it needs")
	require.NoError(t, cluster.Check(ctx, adm, p, topics))
}

// TestEnsureRefusesAnotherLayout: topics that exist with other partition
// counts or cleanup policies are refused, each by name, with what it has,
// what the pipeline needs and where the spec says so; nothing is changed.
func TestEnsureRefusesAnotherLayout(t *testing.T) {
	adm := admin(t)
	ctx := context.Background()
	p := pipeline(t, uniqueName(t))
	topics, err := cluster.Topics(p)
	require.NoError(t, err)
	compact := "compact"
	del := "delete"
	for _, tt := range []struct {
		topic      string
		partitions int32
		policy     *string
	}{
		{topics[0].Name, 5, nil},      // a stream topic of 5 partitions, the reader has 3
		{topics[1].Name, 3, &del},     // a changelog not compacted
		{topics[2].Name, 4, &compact}, // a stream topic compacted
	} {
		resp, err := adm.CreateTopic(ctx, tt.partitions, 1, map[string]*string{"cleanup.policy": tt.policy}, tt.topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}
	err = cluster.Ensure(ctx, adm, p, topics, 1)
	require.ErrorIs(t, err, cluster.ErrLayout)
	msg := err.Error()
	require.Contains(t, msg, topics[0].Name+` (stream "orders" as computation "enrich" reads it) has 5 partitions, and the pipeline needs 3`)
	require.Contains(t, msg, "computations[0].partitions")
	require.Contains(t, msg, topics[1].Name+` (the changelog of computation "enrich") has cleanup.policy=delete`)
	require.Contains(t, msg, topics[2].Name+` (stream "orders" as computation "count" reads it) has cleanup.policy=compact`)
	details, err := adm.ListTopics(ctx, topics[0].Name)
	require.NoError(t, err)
	require.Len(t, details[topics[0].Name].Partitions, 5, "a refused topic is left as it was")
	// The topics that did not exist were created all the same.
	require.NoError(t, cluster.Check(ctx, adm, p, topics[3:]))
}

// TestBalancerCoPartitions starts three consumers of the pipeline's topics
// in one group with the cluster's balancer (static membership ids, as
// hosts have), then a fourth, and requires of each settled assignment
// that every topic partition has exactly one owner and that partition i of
// a computation's inputs and changelog has the same owner.
func TestBalancerCoPartitions(t *testing.T) {
	adm, addrs := testCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := pipeline(t, uniqueName(t))
	topics, err := cluster.Topics(p)
	require.NoError(t, err)
	require.NoError(t, cluster.Ensure(ctx, adm, p, topics, 1))
	var names []string
	for _, tp := range topics {
		names = append(names, tp.Name)
	}
	group := "flowhost." + p.Name
	type event struct {
		member   string
		assigned map[string][]int32
	}
	events := make(chan event, 64)
	start := func(member string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(names...),
			kgo.Balancers(cluster.Balancer()), kgo.InstanceID(member), kgo.MetadataMinAge(10*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				events <- event{member, a}
			}))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		go func() {
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
	}
	owners := map[string]map[string][]int32{} // the latest assignment of each member
	settled := func(members int) map[string]map[int32]string {
		for {
			select {
			case <-ctx.Done():
				t.Fatalf("the group did not settle with %d members: %v", members, owners)
			case e := <-events:
				owners[e.member] = e.assigned
			}
			if len(owners) < members {
				continue
			}
			owner := map[string]map[int32]string{} // topic -> partition -> member
			complete := true
			for m, a := range owners {
				for tp, parts := range a {
					if owner[tp] == nil {
						owner[tp] = map[int32]string{}
					}
					for _, part := range parts {
						if _, taken := owner[tp][part]; taken {
							complete = false // a stale assignment of an earlier generation
						}
						owner[tp][part] = m
					}
				}
			}
			for _, tp := range topics {
				complete = complete && len(owner[tp.Name]) == int(tp.Partitions)
			}
			if complete {
				return owner
			}
		}
	}
	check := func(owner map[string]map[int32]string) {
		for _, c := range p.Computations {
			changelog := fmt.Sprintf("flowhost.%s.%s.changelog", p.Name, c.Name)
			for part := range int32(c.Partitions) {
				want := owner[changelog][part]
				for _, s := range c.InputStreams {
					in := fmt.Sprintf("flowhost.%s.%s.%s", p.Name, s, c.Name)
					require.Equal(t, want, owner[in][part], "computation %s partition %d: %s and its changelog have different owners", c.Name, part, in)
				}
			}
		}
	}
	for _, m := range []string{"host-0", "host-1", "host-2"} {
		start(m)
	}
	three := settled(3)
	check(three)
	members := map[string]bool{}
	for _, parts := range three {
		for _, m := range parts {
			members[m] = true
		}
	}
	require.Len(t, members, 3, "every host has a share")
	clear(owners)
	start("host-3")
	check(settled(4))
}
