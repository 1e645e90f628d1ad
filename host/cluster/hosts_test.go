package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/spec"
)

func joinHosts(t *testing.T, cfg cluster.HostsConfig) *cluster.Hosts {
	t.Helper()
	h, err := cluster.JoinHosts(context.Background(), cfg)
	require.NoError(t, err)
	return h
}

func requireClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("not within a minute: %s", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitStableGroup waits until the hosts group is stable with members
// members: a rebalance that a join started has ended.
func waitStableGroup(t *testing.T, adm *kadm.Client, group string, members int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		groups, err := adm.DescribeGroups(context.Background(), group)
		require.NoError(t, err)
		g := groups[group]
		if g.State == "Stable" && len(g.Members) == members {
			return
		}
		require.True(t, time.Now().Before(deadline), "group %s: state %s with %d members, waiting for Stable with %d", group, g.State, len(g.Members), members)
		time.Sleep(20 * time.Millisecond) // polling the broker's view; not a synchronisation by time
	}
}

// TestOneHostOwnsThePipeline: of two hosts in the group one owns the
// pipeline and the other stands by, also once the group is stable with
// both (the standby's join did not move the pipeline). When the owner
// goes (a static member, as a killed host: it does not leave the group),
// the standby owns the pipeline once the session timeout passed.
func TestOneHostOwnsThePipeline(t *testing.T) {
	adm, brokers := testCluster(t)
	p := &spec.Pipeline{Name: uniqueName(t)}
	cfg := func(id string) cluster.HostsConfig {
		return cluster.HostsConfig{Pipeline: p, Replication: -1, InstanceID: id, SessionTimeout: 6 * time.Second,
			Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}}
	}
	first := joinHosts(t, cfg("host-a"))
	requireClosed(t, "the first host owns the pipeline", first.Owned())
	second := joinHosts(t, cfg("host-b"))
	defer second.Close()
	waitStableGroup(t, adm, cluster.HostsGroup(p.Name), 2)
	require.False(t, isClosed(second.Owned()), "the standby took the pipeline while its owner runs")
	require.False(t, isClosed(first.Lost()), "the owner lost the pipeline to a standby's join")

	gone := time.Now()
	first.Close()
	requireClosed(t, "the standby owns the pipeline after the owner went", second.Owned())
	t.Logf("failover after the owner went: %v (session timeout 6s)", time.Since(gone).Round(time.Millisecond))
}
