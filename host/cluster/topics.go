// Package cluster lays a pipeline out on Kafka for cluster mode, where
// several flowhost processes run one pipeline and share its partitions.
//
// What it holds:
//
//   - the topic layout: which topics a pipeline needs, with how many
//     partitions and which cleanup policy ([Topics]), and [Ensure], which
//     creates the missing ones and refuses those that exist with another
//     layout;
//   - [Balancer], the group balancer whose assignment keeps a
//     computation's inputs co-partitioned;
//   - the changelog record format ([Change]: keyed state, timers and a
//     partition's metadata, one record key each, deletes as tombstones, so
//     that compaction keeps exactly the committed image) and
//     [Committer.Restore], which reads a partition's changelog back,
//     read_committed, when a host is assigned the partition;
//   - [Committer], which commits a computation partition's epoch in one
//     Kafka transaction (outputs, changelog records, consumed offsets) and
//     fences the partition's previous owner;
//   - the stream topics' record format: a message with its sender and
//     TaskId ([MessageRecord]) and a sender's in-band watermarks
//     ([WatermarkRecord]), written in the epoch's transaction after the
//     messages they cover, and [InputWatermark], a reader's minimum over
//     the senders of a topic partition.
//
// What the runtime uses today (flowhost run --cluster kafka, or a spec's
// cluster block):
//
//   - [OpenStore]: a pipeline's whole store on Kafka, a cache in memory of
//     the compacted topic [StoreTopic], each commit one transaction, the
//     previous host fenced when it opens;
//   - [JoinHosts]: the pipeline's hosts group, in which one host owns the
//     pipeline and the others stand by until it dies.
//
// The parts above them (per-partition changelogs and commits, stream
// topics, the co-partitioning balancer) are the parts of a cluster mode
// in which hosts share one pipeline's partitions. They stand on their
// own, each tested against a Kafka-protocol broker (kfake on 127.0.0.1, or
// the cluster in FLOWHOST_KAFKA_BROKERS), and the runtime does not use
// them yet: one host runs a pipeline at a time.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/host/spec"
)

// Topic is one Kafka topic a pipeline runs on in cluster mode.
type Topic struct {
	// Name is the topic's name (see [Topics] for the scheme).
	Name string
	// Partitions is the number of partitions; partition i of every input
	// topic of a computation is read by the host that owns the
	// computation's partition i (co-partitioning).
	Partitions int32
	// Compacted topics (cleanup.policy=compact) hold the latest record per
	// key: changelogs. Other topics must not be compacted, since that would
	// delete records of a stream.
	Compacted bool
	// For says what the topic carries, for messages.
	For string
	// Path is the spec node its partition count comes from, such as
	// "computations[1].partitions", for errors located in the spec.
	Path string
}

// MaxTopicName is the longest topic name Kafka accepts.
const MaxTopicName = 249

// Topics returns the topics pipeline p needs in cluster mode, in a stable
// order:
//
//   - flowhost.PIPELINE.STREAM.COMPUTATION for every input stream of every
//     computation: the stream partitioned by that computation's key with
//     flowhost's partition function, one topic partition per computation
//     partition. A stream read by two computations has a topic for each,
//     since each reads it partitioned by its own key;
//   - flowhost.PIPELINE.COMPUTATION.changelog for every computation:
//     compacted, one partition per computation partition, holding its
//     keyed state, timers and each partition's metadata.
//
// A name longer than [MaxTopicName] is an error located at the
// computation in the spec.
func Topics(p *spec.Pipeline) ([]Topic, error) {
	var out []Topic
	for i := range p.Computations {
		c := &p.Computations[i]
		path := fmt.Sprintf("computations[%d]", i)
		for _, s := range c.InputStreams {
			out = append(out, Topic{
				Name:       StreamTopic(p.Name, s, c.Name),
				Partitions: int32(c.Partitions),
				For:        fmt.Sprintf("stream %q as computation %q reads it", s, c.Name),
				Path:       path + ".partitions",
			})
		}
		out = append(out, Topic{
			Name:       ChangelogTopic(p.Name, c.Name),
			Partitions: int32(c.Partitions),
			Compacted:  true,
			For:        fmt.Sprintf("the changelog of computation %q", c.Name),
			Path:       path + ".partitions",
		})
	}
	for _, t := range out {
		if len(t.Name) > MaxTopicName {
			return nil, p.ErrorAt(strings.TrimSuffix(t.Path, ".partitions")+".name",
				"cluster mode: topic %s (%s) is %d characters, and Kafka allows %d: shorten the pipeline, stream or computation name",
				t.Name, t.For, len(t.Name), MaxTopicName)
		}
	}
	return out, nil
}

// StreamTopic is the topic of stream as computation reads it (see
// [Topics]).
func StreamTopic(pipeline, stream, computation string) string {
	return fmt.Sprintf("flowhost.%s.%s.%s", pipeline, stream, computation)
}

// ChangelogTopic is a computation's changelog topic (see [Topics]).
func ChangelogTopic(pipeline, computation string) string {
	return fmt.Sprintf("flowhost.%s.%s.changelog", pipeline, computation)
}

// ErrLayout is wrapped by the error of a topic that exists with another
// layout than the pipeline needs.
var ErrLayout = errors.New("cluster: a topic exists with another layout")

// Ensure creates the topics that do not exist, with replication factor
// replication (-1: the brokers' default), and checks those that do: their
// partition counts, and that changelogs are compacted and streams are
// not. A topic with another layout is refused with an error naming it, its
// layout, what the pipeline needs and where in the spec that comes from
// (wrapping [ErrLayout]); nothing is ever changed or deleted on one, since
// a topic's partitions decide which host reads which key. Ensure may run
// on several hosts at once: a topic another host created meanwhile is
// checked like one that existed.
func Ensure(ctx context.Context, adm *kadm.Client, p *spec.Pipeline, topics []Topic, replication int16) error {
	names := topicNames(topics)
	existing, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("cluster: listing the pipeline's topics: %w", err)
	}
	for _, t := range topics {
		if d, ok := existing[t.Name]; ok && d.Err == nil {
			continue
		}
		configs := map[string]*string{}
		if t.Compacted {
			compact := "compact"
			configs["cleanup.policy"] = &compact
		}
		resp, err := adm.CreateTopic(ctx, t.Partitions, replication, configs, t.Name)
		if err != nil {
			return fmt.Errorf("cluster: creating topic %s (%s): %w", t.Name, t.For, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("cluster: creating topic %s (%s): %w", t.Name, t.For, resp.Err)
		}
	}
	return Check(ctx, adm, p, topics)
}

// Check verifies that every topic exists with the layout the pipeline
// needs (see [Ensure]) and creates nothing.
func Check(ctx context.Context, adm *kadm.Client, p *spec.Pipeline, topics []Topic) error {
	names := topicNames(topics)
	details, err := listTopics(ctx, adm, names)
	if err != nil {
		return err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return fmt.Errorf("cluster: describing the pipeline's topics: %w", err)
	}
	var errs []error
	for _, t := range topics {
		d, ok := details[t.Name]
		if !ok || d.Err != nil {
			errs = append(errs, fmt.Errorf("cluster: topic %s (%s) does not exist: %v", t.Name, t.For, d.Err))
			continue
		}
		if n := int32(len(d.Partitions)); n != t.Partitions {
			errs = append(errs, fmt.Errorf("%w: %w", ErrLayout, p.ErrorAt(t.Path,
				"topic %s (%s) has %d partitions, and the pipeline needs %d: a topic's partitions decide which host reads which key, so flowhost never changes them; delete the topic (its data is lost) or run the pipeline under another name",
				t.Name, t.For, n, t.Partitions)))
		}
		policy, err := cleanupPolicy(configs, t.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster: topic %s: %w", t.Name, err))
			continue
		}
		compacted := slices.Contains(strings.Split(policy, ","), "compact")
		switch {
		case t.Compacted && !compacted:
			errs = append(errs, fmt.Errorf("%w: topic %s (%s) has cleanup.policy=%s: a changelog must be compacted (cleanup.policy=compact), or it grows without bound and restores slowly; alter its policy or delete it",
				ErrLayout, t.Name, t.For, policy))
		case !t.Compacted && compacted:
			errs = append(errs, fmt.Errorf("%w: topic %s (%s) has cleanup.policy=%s: compaction would delete records of the stream; set cleanup.policy=delete or delete the topic",
				ErrLayout, t.Name, t.For, policy))
		}
	}
	return errors.Join(errs...)
}

func topicNames(topics []Topic) []string {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	return names
}

// Propagation bounds how long [Check] waits for topics it does not see
// yet: Kafka creates topics asynchronously, so a topic just created may be
// missing from metadata for a moment (and a client answers metadata
// requests from a cache for kgo.MetadataMinAge, 5 s by default).
const Propagation = 15 * time.Second

// listTopics lists names, waiting up to Propagation for those not known
// yet.
func listTopics(ctx context.Context, adm *kadm.Client, names []string) (kadm.TopicDetails, error) {
	deadline := time.Now().Add(Propagation)
	wait := 20 * time.Millisecond
	for {
		details, err := adm.ListTopics(ctx, names...)
		if err != nil {
			return nil, fmt.Errorf("cluster: listing the pipeline's topics: %w", err)
		}
		missing := slices.ContainsFunc(names, func(n string) bool { d, ok := details[n]; return !ok || d.Err != nil })
		if !missing || time.Now().After(deadline) {
			return details, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// cleanupPolicy returns a topic's cleanup.policy ("delete" when unset,
// Kafka's default).
func cleanupPolicy(configs kadm.ResourceConfigs, topic string) (string, error) {
	rc, err := configs.On(topic, nil)
	if err != nil {
		return "", err
	}
	if rc.Err != nil {
		return "", rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue(), nil
		}
	}
	return "delete", nil
}

// Balancer is the group balancer that splits a pipeline's partitions
// between hosts: Kafka's range assignor. Every host subscribes to every
// topic of [Topics]; range assigns each topic's partitions in contiguous
// ranges over the members sorted the same way, so partition i of topics
// with the same partition count (all the inputs of one computation, and
// its changelog) goes to the same host, which is what co-partitioning
// needs. The sticky and cooperative balancers do not keep that property.
func Balancer() kgo.GroupBalancer { return kgo.RangeBalancer() }
