// The Kafka crash tests: exactly-once from Kafka to Kafka through the real
// binary, across kill -9 of flowhost and across a restart of the broker.
//
// The broker is `flowhost kafka serve` with a data directory, in a process
// of its own, or the cluster FLOWHOST_KAFKA_BROKERS names (then the broker
// restart test is skipped: the cluster is not the test's to restart). The
// pipeline is crash-tally (examples/plugins/crash-tally: keyed state and
// event-time timers) from a kafka source of 4 partitions to a kafka sink;
// its output is read read_committed and compared with the model of
// examples/internal/crashload and with an uncrashed run on the same input.
//
// FLOWHOST_CRASH_KILLS=N kills N times instead of 20 and
// FLOWHOST_CRASH_SEED=S repeats a seed the test logged, as in
// examples/crash_test.go.

package examples_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/examples/internal/crashload"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/ordering"
)

// kafkaCrashPartitions is the input topic's partition count.
const kafkaCrashPartitions = 4

// kafkaOutPartitions is the output topic's partition count.
const kafkaOutPartitions = 2

// kafkaWorkload is a crashload workload laid out on a Kafka topic: both
// streams' records merged in event order, record i on partition i mod 4
// (so event times never decrease within a partition), and then one flush
// record per partition an hour of event time later, which moves every
// partition's watermark past the workload's last window, so that every
// window is emitted although a Kafka source never ends.
type kafkaWorkload struct {
	w        *crashload.Workload
	records  []crashload.Record
	expected map[crashload.Output]int
}

func newKafkaWorkload(messages int, seed uint64) *kafkaWorkload {
	w := crashload.Generate(crashload.Config{Messages: messages, Keys: 500, Seed: seed})
	k := &kafkaWorkload{w: w, expected: w.Expected()}
	k.records = append(slices.Clone(w.Records[0]), w.Records[1]...)
	slices.SortStableFunc(k.records, func(a, b crashload.Record) int { return cmp.Compare(a.Event, b.Event) })
	flushAt := w.Config.Start.Add(w.Config.Span + time.Hour).UnixNano()
	for p := range kafkaCrashPartitions {
		r := crashload.Record{Event: flushAt, Write: flushAt,
			Payload: crashload.Payload{Key: fmt.Sprintf("flush-%d", p), Seq: int64(p + 1), Stream: "flush"}}
		k.records = append(k.records, r)
		// The flush records' own windows stay open: only their msg
		// records come out.
		k.expected[crashload.Output{Kind: "msg", Stream: "flush", Seq: r.Payload.Seq, Key: r.Payload.Key}]++
	}
	return k
}

// outputs is the number of records the pipeline must produce.
func (k *kafkaWorkload) outputs() int {
	n := 0
	for _, c := range k.expected {
		n += c
	}
	return n
}

// produce writes the workload to topic: the value is the payload with the
// event time added as ts (nanoseconds), the Kafka timestamp the event time.
func (k *kafkaWorkload) produce(t *testing.T, brokers []string, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	type value struct {
		crashload.Payload
		TS int64 `json:"ts"`
	}
	recs := make([]*kgo.Record, len(k.records))
	for i, r := range k.records {
		v, err := json.Marshal(value{r.Payload, r.Event})
		require.NoError(t, err)
		p := int32(i % kafkaCrashPartitions)
		if r.Payload.Stream == "flush" {
			p = int32(r.Payload.Seq - 1)
		}
		recs[i] = &kgo.Record{Partition: p, Value: v, Timestamp: time.Unix(0, r.Event)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitDeadline)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// kafkaRun is one pipeline run: a spec, a data directory and an output
// topic, run by lives (starts of the binary) on them.
type kafkaRun struct {
	name    string
	dir     string
	spec    string
	dataDir string
	brokers []string
	out     string
	watch   *outputWatch
	lives   int
	// storeArgs, when not nil, replace --data-dir: --cluster kafka, or
	// none for a spec with a cluster block.
	storeArgs []string
}

// newKafkaRun writes the pipeline of a run from topic in to a new topic of
// its own. delivery is the sink's delivery field, or "" for the default.
func newKafkaRun(t *testing.T, work, name string, brokers []string, in, delivery string) *kafkaRun {
	t.Helper()
	dir := filepath.Join(work, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	r := &kafkaRun{name: name, dir: dir, spec: filepath.Join(dir, "pipeline.yaml"), dataDir: filepath.Join(dir, "data"),
		brokers: brokers, out: in + "-" + name}
	createKafkaTopic(t, brokers, r.out, kafkaOutPartitions)
	var deliveryField string
	if delivery != "" {
		deliveryField = ", delivery: " + delivery
	}
	quoted, err := json.Marshal(brokers)
	require.NoError(t, err)
	spec := fmt.Sprintf(`# The Kafka crash test's pipeline (examples/cli_kafka_crash_test.go).
name: kafka-crash-%[1]s
sources:
  - name: in
    type: kafka
    stream: a
    partitions: %[2]d
    kafka: {brokers: %[3]s, topic: %[4]s, event_time: {field: ts, format: unix_ns}}
    # max_ratio 0: no partition is left out of the watermark as idle, which
    # could make records late (package crashload's documentation).
    watermark: {out_of_orderness_bound: %[5]s, idle_partitions: {max_ratio: 0}}
computations:
  - name: tally
    plugin: crash-tally
    kind: transform
    partitions: 2
    group_by: [key]
    input_streams: [a]
    output_streams: [tally]
    parameters: {window: 10s}
sinks:
  - {name: out, type: kafka, streams: [tally], format: payload, kafka: {brokers: %[3]s, topic: %[6]s%[7]s}}
dead_letter: {type: file, file: {path: dead-letter.jsonl}}
`, name, kafkaCrashPartitions, quoted, in, crashload.OutOfOrdernessBound, r.out, deliveryField)
	require.NoError(t, os.WriteFile(r.spec, []byte(spec), 0o644))
	r.watch = watchOutput(t, brokers, r.out)
	return r
}

// start starts a life; extra flags come last, so they win over the
// run's own (such as --metrics-addr "").
func (r *kafkaRun) start(t *testing.T, extra ...string) *liveRun {
	t.Helper()
	r.lives++
	store := []string{"--data-dir", r.dataDir}
	if r.storeArgs != nil {
		store = r.storeArgs
	}
	args := append(append([]string{"run", "-f", r.spec, "--plugins", env.plugins}, store...), "--metrics-addr", "", "--cache-dir", env.cache)
	return startFlowhost(t, append(args, extra...)...)
}

// complete starts a life, waits until the output holds want records and
// stops it with SIGTERM: it must exit 0. It returns how long the outputs
// took and how long until the first one came.
func (r *kafkaRun) complete(t *testing.T, want int) (duration, firstOutput time.Duration) {
	t.Helper()
	before := r.watch.count()
	l := r.start(t)
	started := time.Now()
	defer dumpIfStuck(l)()
	l.waitFor(t, fmt.Sprintf("%s: %d records in the output (life %d)", r.name, want, r.lives), func() bool {
		n := r.watch.count()
		if firstOutput == 0 && n > before {
			firstOutput = time.Since(started)
		}
		return n >= want
	})
	duration = time.Since(started)
	// When the lives before it finished the outputs, this one is signalled
	// as soon as it starts: it must have begun running (and handling
	// signals) to be asked to stop, not be killed by SIGTERM's default.
	l.waitFor(t, fmt.Sprintf("%s: life %d running", r.name, r.lives), func() bool {
		return strings.Contains(l.log(), "pipeline running")
	})
	require.NoError(t, l.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, l.waitExit(t), "%s: life %d; stderr:\n%s", r.name, r.lives, l.log())
	requireNoPanicIn(t, r.name, l)
	dead, err := os.ReadFile(filepath.Join(r.dir, "dead-letter.jsonl"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
		require.Empty(t, string(dead), "%s: records reached the dead letter", r.name)
	}
	return duration, firstOutput
}

// kafkaKill is when to kill a life: delay after its start when early,
// otherwise delay after the output, grown by the life, holds outputs
// records.
type kafkaKill struct {
	early   bool
	outputs int
	delay   time.Duration
}

func (m kafkaKill) String() string {
	if m.early {
		return fmt.Sprintf("early, %v after start", m.delay.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v after %d outputs", m.delay.Round(time.Millisecond), m.outputs)
}

// drawKafkaKill draws kill number kill (from 1) of kills as
// calibration.draw does for the file crash test: one in five early (while
// the plugin loads and the store recovers), the others at output counts
// stratified over the first 90% of the reference's outputs, each a random
// delay after the count is reached.
func drawKafkaKill(rng *rand.Rand, kill, kills, outputs int, duration, firstOutput time.Duration) kafkaKill {
	if rng.IntN(5) == 0 {
		return kafkaKill{early: true, delay: randomDuration(rng, firstOutput)}
	}
	share := (float64(kill-1) + rng.Float64()) / float64(kills)
	return kafkaKill{outputs: int(0.9 * share * float64(outputs)), delay: randomDuration(rng, duration/time.Duration(2*kills))}
}

// killOnce starts a life and kills it with SIGKILL at moment m. A life
// that starts with all total outputs out (the early kills before it let
// the run finish) has nothing to grow: it is killed delay after its start.
func (r *kafkaRun) killOnce(t *testing.T, m kafkaKill, kill, kills, total int) {
	t.Helper()
	before := r.watch.count()
	l := r.start(t)
	started := time.Now()
	if !m.early && before < total {
		defer dumpIfStuck(l)()
		l.waitFor(t, fmt.Sprintf("%s: life %d grown the output to %d records", r.name, r.lives, m.outputs), func() bool {
			n := r.watch.count()
			return n > before && n >= m.outputs
		})
	}
	select {
	case <-l.exited:
		t.Fatalf("%s: life %d exited before kill %d/%d (%v): %v\nstderr:\n%s", r.name, r.lives, kill, kills, m, l.err, l.log())
	case <-time.After(m.delay):
	}
	require.NoError(t, l.cmd.Process.Kill())
	<-l.exited
	requireNoPanicIn(t, r.name, l)
	t.Logf("kill %d/%d (%v): %v after start, %d outputs", kill, kills, m, time.Since(started).Round(time.Millisecond), r.watch.count())
}

// dumpIfStuck sends SIGQUIT to a life that is still waited for shortly
// before waitFor's deadline, so that the failure shows its goroutines
// (on stderr) and not only that it stalled. The returned function stops it.
func dumpIfStuck(l *liveRun) (stop func()) {
	timer := time.AfterFunc(exitDeadline-10*time.Second, func() { _ = l.cmd.Process.Signal(syscall.SIGQUIT) })
	return func() { timer.Stop() }
}

func requireNoPanicIn(t *testing.T, name string, l *liveRun) {
	t.Helper()
	if strings.Contains(l.log(), "panic") {
		t.Fatalf("%s: stderr mentions a panic:\n%s", name, l.log())
	}
}

// outputWatch counts, while a run goes on, the records a read_committed
// consumer sees in an output topic: the kill moments and the end of a
// life are measured on it.
type outputWatch struct {
	mu sync.Mutex
	n  int
}

func (w *outputWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func watchOutput(t *testing.T, brokers []string, topic string) *outputWatch {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &outputWatch{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n := 0
			cl.PollFetches(ctx).EachRecord(func(*kgo.Record) { n++ })
			w.mu.Lock()
			w.n += n
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return w
}

// sentinelHeader marks the record readKafkaOutput appends to each
// partition of an output topic once the run is stopped.
const sentinelHeader = "flowhost-test-sentinel"

// readKafkaOutput reads the whole of an output topic read_committed, once
// every run writing it has stopped: it appends a sentinel record to each
// partition and reads until it has seen every sentinel, so that nothing
// committed before is left unread, whatever transaction markers lie in
// between. Every record must be a crash-tally output; message ids are
// collected from the flowhost-message-id headers.
func readKafkaOutput(t *testing.T, brokers []string, topic string) sinkOutputs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), exitDeadline)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer producer.Close()
	for p := range kafkaOutPartitions {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Partition: int32(p),
			Headers: []kgo.RecordHeader{{Key: sentinelHeader, Value: []byte("1")}}}).FirstErr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	out := sinkOutputs{outputs: map[crashload.Output]int{}, sharedIDs: map[string][]int{}}
	lineOf := map[string]int{}
	sentinels := map[int32]bool{}
	line := 0
	for len(sentinels) < kafkaOutPartitions {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading %s: %d of %d sentinels seen", topic, len(sentinels), kafkaOutPartitions)
		fetches.EachError(func(tp string, p int32, err error) { t.Logf("reading %s/%d: %v", tp, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			var id string
			for _, h := range r.Headers {
				switch h.Key {
				case sentinelHeader:
					sentinels[r.Partition] = true
					return
				case "flowhost-message-id":
					id = string(h.Value)
				}
			}
			o, err := crashload.ParseOutput(r.Value)
			require.NoError(t, err, "%s/%d@%d", r.Topic, r.Partition, r.Offset)
			out.outputs[o]++
			line++
			out.noteID(lineOf, id, line)
		})
	}
	return out
}

// TestCLIKafkaCrashIsExactlyOnce runs crash-tally from a kafka source of 4
// partitions (100,000 records) to a kafka sink, once without a crash, as
// the reference, and once killed with SIGKILL 20 times at random moments
// (while the plugin loads and the store recovers, and at output counts
// spread over the run) and restarted on the same data directory until it
// completes. The broker runs in a process of its own throughout. Then the
// crash run's output, read read_committed, must hold exactly the model's
// outputs and the reference run's: no msg record missing or doubled (an
// input lost or processed twice, or a transaction replayed), the same
// window records (state and timers neither lost nor applied twice), and
// every record a message id of its own.
func TestCLIKafkaCrashIsExactlyOnce(t *testing.T) {
	kills := envInt(t, "FLOWHOST_CRASH_KILLS", defaultCrashKills)
	seed := uint64(envInt(t, "FLOWHOST_CRASH_SEED", 1+rand.IntN(1e9)))
	t.Logf("seed %d (FLOWHOST_CRASH_SEED=%d repeats it), %d kills (FLOWHOST_CRASH_KILLS)", seed, seed, kills)
	work := t.TempDir()
	brokers, _ := kafkaCluster(t, filepath.Join(work, "broker"))
	in := fmt.Sprintf("flowhost-crash-%d", time.Now().UnixNano())
	createKafkaTopic(t, brokers, in, kafkaCrashPartitions)
	w := newKafkaWorkload(100_000, seed)
	w.produce(t, brokers, in)
	total := w.outputs()

	ref := newKafkaRun(t, work, "reference", brokers, in, "")
	duration, firstOutput := ref.complete(t, total)
	refOut := readKafkaOutput(t, brokers, ref.out)
	if !checkOutputs(t, "reference run against the model", w.expected, refOut) || !checkOwnIDs(t, "reference run", refOut) {
		t.FailNow()
	}
	t.Logf("reference run: %v, first output after %v, %d outputs", duration.Round(time.Millisecond), firstOutput.Round(time.Millisecond), total)

	// The same crashes with the store in a data directory, and with the
	// store on Kafka (--cluster kafka), restored from its topic by every
	// life: half as many kills there, which still kill in every phase.
	for _, arm := range []struct {
		name    string
		onKafka bool
		kills   int
	}{{"crash", false, kills}, {"crash-on-kafka", true, max(kills/2, 1)}} {
		name := arm.name
		if arm.onKafka {
			// The store topic is named by the pipeline, and a cluster of
			// FLOWHOST_KAFKA_BROKERS outlives the test.
			name = fmt.Sprintf("%s-%d", arm.name, time.Now().UnixNano())
		}
		crash := newKafkaRun(t, work, name, brokers, in, "")
		if arm.onKafka {
			// A static id: each restart takes the pipeline back at once,
			// rather than after the killed life's session timed out.
			crash.storeArgs = []string{"--cluster", "kafka", "--brokers", strings.Join(brokers, ","), "--host-id", "crash-host"}
		}
		crashStart := time.Now()
		rng := rand.New(rand.NewPCG(seed, 0x6b61666b))
		for kill := 1; kill <= arm.kills; kill++ {
			crash.killOnce(t, drawKafkaKill(rng, kill, arm.kills, total, duration, firstOutput), kill, arm.kills, total)
		}
		crash.complete(t, total)
		t.Logf("%s run: %d kills, %d lives, %v", arm.name, arm.kills, crash.lives, time.Since(crashStart).Round(time.Millisecond))
		crashOut := readKafkaOutput(t, brokers, crash.out)
		checkOutputs(t, arm.name+" run against the model", w.expected, crashOut)
		checkOutputs(t, arm.name+" run against the reference run", refOut.outputs, crashOut)
		checkOwnIDs(t, arm.name+" run", crashOut)
	}
}

// TestCLIStoreOnKafkaFailsOver runs crash-tally with its store on Kafka
// (a cluster block, session timeout 6 s) on three hosts with static ids:
// one runs the pipeline, two stand by (the first standby's /status and
// /metrics must say so). The running host is then killed with SIGKILL 10
// times, at output counts spread over the run (FLOWHOST_CRASH_SEED draws
// them):
//   - after an odd kill it is restarted at once with its --host-id, which
//     replaces its dead membership (static membership): a host owns the
//     pipeline again after a rebalance, not after the session timeout;
//   - after an even kill it stays dead until a standby owns the pipeline,
//     and then rejoins as a standby.
//
// The times until a host owned the pipeline again are logged.
//
// A fourth host joins after the fifth kill. No standby may own the
// pipeline while its owner runs. The output, read read_committed, must
// hold exactly the model's outputs: nothing lost or doubled. Every life's
// --trace must keep each key's records of a source partition in offset
// order.
func TestCLIStoreOnKafkaFailsOver(t *testing.T) {
	seed := uint64(envInt(t, "FLOWHOST_CRASH_SEED", 1+rand.IntN(1e9)))
	t.Logf("seed %d (FLOWHOST_CRASH_SEED=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x686f737473))
	work := t.TempDir()
	brokers, _ := kafkaCluster(t, filepath.Join(work, "broker"))
	in := fmt.Sprintf("flowhost-failover-%d", time.Now().UnixNano())
	createKafkaTopic(t, brokers, in, kafkaCrashPartitions)
	w := newKafkaWorkload(100_000, 7)
	w.produce(t, brokers, in)
	total := w.outputs()

	r := newKafkaRun(t, work, fmt.Sprintf("failover-%d", time.Now().UnixNano()), brokers, in, "")
	quoted, err := json.Marshal(brokers)
	require.NoError(t, err)
	f, err := os.OpenFile(r.spec, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "cluster: {kafka: {brokers: %s, session_timeout: 6s}}\n", quoted)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r.storeArgs = []string{}

	const ownsLine = "this host owns the pipeline"
	hosts := map[string]*liveRun{}
	var traces []string
	start := func(id string) *liveRun {
		trace := filepath.Join(r.dir, fmt.Sprintf("trace-%02d-%s.jsonl", len(traces)+1, id))
		traces = append(traces, trace)
		hosts[id] = r.start(t, "--host-id", id, "--metrics-addr", "127.0.0.1:0", "--trace", trace)
		return hosts[id]
	}
	owner := "h1"
	start(owner).waitFor(t, "h1 owns the pipeline", func() bool { return strings.Contains(hosts["h1"].log(), ownsLine) })
	standby := start("h2")
	addr := standby.waitStderr(t, standingBy)
	require.Contains(t, httpBody(t, "http://"+addr+"/status"), `"role":"standby"`)
	require.Contains(t, httpBody(t, "http://"+addr+"/metrics"), `flowhost_cluster_owner{host_id="h2",pipeline="`+r.pipelineName()+`"} 0`)
	start("h3")

	const kills = 10
	var failovers, restarts []string
	for kill := 1; kill <= kills; kill++ {
		at := int(0.9 * (float64(kill-1) + rng.Float64()) / kills * float64(total))
		live := hosts[owner]
		live.waitFor(t, fmt.Sprintf("kill %d: %d outputs", kill, at), func() bool { return r.watch.count() >= at })
		require.NoError(t, live.cmd.Process.Kill())
		killed := time.Now()
		<-live.exited
		requireNoPanicIn(t, r.name, live)
		// After an odd kill the host restarts at once with its id,
		// which ends its dead life's membership: the group rebalances
		// without waiting for the session timeout. After an even kill
		// it stays dead until a standby took over.
		if kill%2 == 1 {
			start(owner)
		}
		var next string
		waitOn := hosts[standbyOf(hosts, owner)] // a host that runs: the killed one has exited
		if kill%2 == 1 {
			waitOn = hosts[owner]
		}
		waitOn.waitFor(t, fmt.Sprintf("kill %d: a host owns the pipeline", kill), func() bool {
			for id, h := range hosts {
				if (id != owner || kill%2 == 1) && strings.Contains(h.log(), ownsLine) {
					next = id
					return true
				}
			}
			return false
		})
		took := time.Since(killed).Round(time.Millisecond)
		if kill%2 == 1 {
			restarts = append(restarts, took.String())
			t.Logf("kill %d of %s at %d outputs, restarted with its id: %s owned the pipeline %v after the kill", kill, owner, at, next, took)
		} else {
			failovers = append(failovers, took.String())
			t.Logf("kill %d of %s at %d outputs, not restarted: %s owned the pipeline %v after the kill", kill, owner, at, next, took)
			start(owner) // back, as a standby
		}
		if next != owner || kill%2 == 0 {
			addr := hosts[next].waitStderr(t, metricsAddrLine)
			require.Contains(t, httpBody(t, "http://"+addr+"/metrics"), `flowhost_cluster_owner{host_id="`+next+`",pipeline="`+r.pipelineName()+`"} 1`)
		}
		owner = next
		if kill == kills/2 {
			start("h4") // a host added during the run
		}
	}
	t.Logf("owned again after a restart with the same id: %s", strings.Join(restarts, ", "))
	t.Logf("owned by a standby after a kill without restart (session timeout 6s): %s", strings.Join(failovers, ", "))
	hosts[owner].waitFor(t, "every output", func() bool { return r.watch.count() >= total })
	for id, h := range hosts {
		require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, h.waitExit(t), "%s's stderr:\n%s", id, h.log())
	}
	out := readKafkaOutput(t, brokers, r.out)
	checkOutputs(t, "the run of hosts that came and went, against the model", w.expected, out)
	checkOwnIDs(t, "the run of hosts that came and went", out)
	delivered := 0
	for _, trace := range traces {
		delivered += requireLaneOrder(t, trace)
	}
	// Not every record is in a trace: a life killed with SIGKILL loses
	// the trace lines it still buffered, of committed epochs too.
	require.Positive(t, delivered, "the lives' traces hold no deliveries to check")
}

// requireLaneOrder checks the derived-message guarantee on one life's
// --trace and returns its message deliveries: per computation partition,
// key and source partition, the records reach the computation in the
// order of their offsets. A life killed with SIGKILL may have left its
// last line half written: that line is not read.
func requireLaneOrder(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := bytes.Split(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		lines = lines[:len(lines)-1]
	}
	type lane struct {
		part      int
		key, root string
	}
	last := map[lane]uint64{}
	n := 0
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var r runtime.TraceRecord
		require.NoError(t, json.Unmarshal(line, &r), "%s:%d", path, i+1)
		if r.Kind != runtime.TraceMessage {
			continue
		}
		n++
		id, err := ordering.ParseMessageID(r.MessageID)
		require.NoError(t, err, "%s:%d", path, i+1)
		root := id.Root()
		l := lane{r.Partition, r.Key, fmt.Sprintf("%s/p%d", root.Name, root.Partition)}
		if prev, ok := last[l]; ok {
			require.Greater(t, root.Seq, prev, "%s:%d: %s after offset %d of the same key and source partition", path, i+1, r.MessageID, prev)
		}
		last[l] = root.Seq
	}
	return n
}

// pipelineName is the name of the run's pipeline (see newKafkaRun).
func (r *kafkaRun) pipelineName() string { return "kafka-crash-" + r.name }

// standbyOf is a host of hosts other than owner (one of the standbys).
func standbyOf(hosts map[string]*liveRun, owner string) string {
	for _, id := range slices.Sorted(maps.Keys(hosts)) {
		if id != owner {
			return id
		}
	}
	return ""
}

var standingBy = regexp.MustCompile(`"standing by: serving metrics and status" addr=http://([0-9.:]+)/metrics`)

// httpBody is the body of a GET of url, which must answer 200.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}

// TestCLIKafkaBrokerRestart stops the broker process in the middle of a
// run, once a third of the outputs are out, and starts it again on its
// data directory and ports: flowhost retries meanwhile, and the run
// completes with every output exactly once.
func TestCLIKafkaBrokerRestart(t *testing.T) {
	if os.Getenv("FLOWHOST_KAFKA_BROKERS") != "" {
		t.Skip("FLOWHOST_KAFKA_BROKERS is set: the broker restart test restarts a broker it started itself, and the cluster named there is not the test's to restart")
	}
	seed := uint64(envInt(t, "FLOWHOST_CRASH_SEED", 1+rand.IntN(1e9)))
	t.Logf("seed %d (FLOWHOST_CRASH_SEED=%d repeats it)", seed, seed)
	work := t.TempDir()
	brokers, broker := kafkaCluster(t, filepath.Join(work, "broker"))
	in := fmt.Sprintf("flowhost-restart-%d", time.Now().UnixNano())
	createKafkaTopic(t, brokers, in, kafkaCrashPartitions)
	w := newKafkaWorkload(50_000, seed)
	w.produce(t, brokers, in)
	total := w.outputs()

	r := newKafkaRun(t, work, "restart", brokers, in, "")
	l := r.start(t)
	l.waitFor(t, "a third of the outputs before the broker restart", func() bool { return r.watch.count() >= total/3 })
	stopped := time.Now()
	broker.restart(t)
	restarted, atRestart := time.Now(), r.watch.count()
	t.Logf("broker stopped after %d of %d outputs, serving again %v later", atRestart, total, restarted.Sub(stopped).Round(time.Millisecond))
	l.waitFor(t, "outputs after the broker restart", func() bool { return r.watch.count() > atRestart })
	t.Logf("outputs again %v after the broker came back", time.Since(restarted).Round(time.Millisecond))
	l.waitFor(t, fmt.Sprintf("%d outputs after the broker restart", total), func() bool { return r.watch.count() >= total })
	require.NoError(t, l.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, l.waitExit(t), "stderr:\n%s", l.log())
	requireNoPanicIn(t, r.name, l)
	out := readKafkaOutput(t, brokers, r.out)
	checkOutputs(t, "run across a broker restart against the model", w.expected, out)
	checkOwnIDs(t, "run across a broker restart", out)
}
