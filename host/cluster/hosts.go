package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/spec"
)

// HostsTopic is the topic whose one partition the hosts of a pipeline
// compete for in the consumer group [HostsGroup]: the member assigned it
// runs the pipeline, the others stand by. Nothing is written to it.
func HostsTopic(pipeline string) string { return fmt.Sprintf("flowhost.%s.hosts", pipeline) }

// HostsGroup is the consumer group of a pipeline's hosts (see
// [HostsTopic]).
func HostsGroup(pipeline string) string { return fmt.Sprintf("flowhost.%s.hosts", pipeline) }

// ErrLostOwnership is wrapped by the error of a host that stopped being
// the pipeline's owner in the hosts' group (its session expired, or it
// was removed): another host is taking the pipeline over.
var ErrLostOwnership = errors.New("cluster: this host is no longer the pipeline's owner in its hosts' group")

// DefaultSessionTimeout is how long the group waits for a host that
// stopped heartbeating (killed, hung, cut off) before a standby takes
// the pipeline over.
const DefaultSessionTimeout = 10 * time.Second

// HostsConfig configures [JoinHosts].
type HostsConfig struct {
	Pipeline *spec.Pipeline
	// Opts are the connection's options: seed brokers, TLS, SASL.
	Opts []kgo.Opt
	// Replication is the hosts topic's replication factor when it is
	// created; -1 is the brokers' default.
	Replication int16
	// InstanceID, when set, makes the host a static member of the group:
	// a host restarted with the same id within the session timeout
	// replaces its old membership as it joins, so the group need not wait
	// for the old one's session to time out. The rebalance that follows
	// may give the pipeline to the restarted host or to a standby (the
	// restarted one reports no ownership the sticky balancer could keep);
	// a standby's restart moves nothing. Two running hosts must never
	// share an id.
	InstanceID string
	// SessionTimeout is [DefaultSessionTimeout] when 0.
	SessionTimeout time.Duration
}

// Hosts is a host's membership in its pipeline's hosts group.
type Hosts struct {
	cl       *kgo.Client
	owned    chan struct{} // closed when the host is assigned the pipeline
	lost     chan struct{} // closed when it loses it
	once     [2]sync.Once
	stopPoll context.CancelFunc
	polled   chan struct{}
}

// JoinHosts joins the pipeline's hosts group, creating its topic if
// missing. The host owns the pipeline once [Hosts.Owned] is closed, and
// must stop running it when [Hosts.Lost] is closed. The group's balancer
// is cooperative-sticky, so a host joining or leaving as a standby never
// moves the pipeline from its owner.
func JoinHosts(ctx context.Context, cfg HostsConfig) (*Hosts, error) {
	topic := HostsTopic(cfg.Pipeline.Name)
	timeout := cfg.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	h := &Hosts{owned: make(chan struct{}), lost: make(chan struct{}), polled: make(chan struct{})}
	lose := func(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
		if slices.Contains(gone[topic], 0) {
			h.lose()
		}
	}
	opts := clientOpts(cfg.Opts,
		kgo.ConsumerGroup(HostsGroup(cfg.Pipeline.Name)), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(timeout), kgo.HeartbeatInterval(timeout/5),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			if slices.Contains(assigned[topic], 0) {
				h.once[0].Do(func() { close(h.owned) })
			}
		}),
		kgo.OnPartitionsRevoked(lose), kgo.OnPartitionsLost(lose),
	)
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	var err error
	if h.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, err
	}
	// The group waits for the topic's metadata, so the client that
	// joins it can create the topic too.
	if err := Ensure(ctx, kadm.NewClient(h.cl), cfg.Pipeline, []Topic{{Name: topic, Partitions: 1,
		For: fmt.Sprintf("the hosts of pipeline %q", cfg.Pipeline.Name), Path: "name"}}, cfg.Replication); err != nil {
		h.cl.Close()
		return nil, err
	}
	// Polling drives the group: joins, heartbeats and rebalances.
	pollCtx, cancel := context.WithCancel(context.Background())
	h.stopPoll = cancel
	go func() {
		defer close(h.polled)
		for pollCtx.Err() == nil {
			h.cl.PollFetches(pollCtx)
		}
	}()
	return h, nil
}

func (h *Hosts) lose() {
	select {
	case <-h.owned:
		h.once[1].Do(func() { close(h.lost) })
	default:
	}
}

// Owned is closed when this host is assigned the pipeline.
func (h *Hosts) Owned() <-chan struct{} { return h.owned }

// Lost is closed when this host, having owned the pipeline, loses it.
func (h *Hosts) Lost() <-chan struct{} { return h.lost }

// Close leaves the group (a static member stays in it until its session
// times out, or its restart replaces it).
func (h *Hosts) Close() {
	h.stopPoll()
	<-h.polled
	h.cl.Close()
}
