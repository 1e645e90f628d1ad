package examples_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// devBroker is a `flowhost kafka serve` process the test started.
type devBroker struct {
	run     *liveRun
	addrs   []string
	dataDir string
}

var brokersLine = regexp.MustCompile(`(?m)^FLOWHOST_KAFKA_BROKERS=(\S+)$`)

// startDevBroker starts `flowhost kafka serve` with a free metrics port
// and args, and waits for the line that names its brokers. It is stopped
// (SIGKILL) at the end of the test if it still runs.
func startDevBroker(t *testing.T, dataDir string, args ...string) *devBroker {
	t.Helper()
	full := append([]string{"kafka", "serve", "--metrics-addr", "127.0.0.1:0"}, args...)
	if dataDir != "" {
		full = append(full, "--data-dir", dataDir)
	}
	r := startFlowhost(t, full...)
	var line []string
	r.waitFor(t, "the broker addresses on stdout", func() bool {
		line = brokersLine.FindStringSubmatch(r.stdout.String())
		return line != nil
	})
	return &devBroker{run: r, addrs: strings.Split(line[1], ","), dataDir: dataDir}
}

// stop sends SIGTERM and requires a clean exit: kfake writes its data
// directory on the way out.
func (b *devBroker) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, b.run.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, b.run.waitExit(t), "kafka serve exit; stderr:\n%s", b.run.log())
}

// restart stops the broker and starts it again on its data directory
// and ports, so that clients reconnect to the addresses they know.
func (b *devBroker) restart(t *testing.T) {
	t.Helper()
	b.stop(t)
	var ports []string
	for _, a := range b.addrs {
		ports = append(ports, a[strings.LastIndexByte(a, ':')+1:])
	}
	next := startDevBroker(t, b.dataDir, "--ports", strings.Join(ports, ","))
	require.Equal(t, b.addrs, next.addrs)
	*b = *next
}

// TestCLIKafkaServe starts a development broker of two brokers with a
// seeded topic and a data directory, produces to it, reads its metrics,
// stops it with SIGTERM and starts it again on the directory: the topic
// and its records are still there.
func TestCLIKafkaServe(t *testing.T) {
	dir := t.TempDir()
	b := startDevBroker(t, dir, "--brokers", "2", "--ports", "0,0", "--topic", "orders:4")
	require.Len(t, b.addrs, 2)
	for _, a := range b.addrs {
		require.True(t, strings.HasPrefix(a, "127.0.0.1:"), "broker %s", a)
	}

	metrics := scrape(t, b.run.waitStderr(t, metricsAddrLine))
	require.Contains(t, metrics, "flowhost_devbroker_brokers 2\n")
	for _, a := range b.addrs {
		require.Contains(t, metrics, fmt.Sprintf("flowhost_devbroker_broker_up{broker=%q} 1\n", a))
	}
	require.Contains(t, metrics, `flowhost_devbroker_topic_partitions{topic="orders"} 4`+"\n")
	require.Regexp(t, `(?m)^flowhost_devbroker_topics [1-9]`, metrics)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	const n = 40
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 4), Value: fmt.Appendf(nil, "r%d", i)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	cl.Close()

	b.restart(t)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), exitDeadline)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < n && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := range n {
		require.Equal(t, 1, seen[fmt.Sprintf("r%d", i)], "record r%d after the restart", i)
	}
	b.stop(t)
}

// TestCLIKafkaServeRefusesANetworkAddress: without --insecure-listen, a
// listen host that is not loopback is refused, naming the flag.
func TestCLIKafkaServeRefusesANetworkAddress(t *testing.T) {
	_, stderr, err := flowhostRun(t, "kafka", "serve", "--listen-host", "0.0.0.0", "--ports", "0", "--metrics-addr", "")
	require.Error(t, err)
	require.Contains(t, stderr, "not a loopback address")
	require.Contains(t, stderr, "--insecure-listen")
	_, stderr, err = flowhostRun(t, "kafka", "serve", "--topic", "orders:zero", "--metrics-addr", "")
	require.Error(t, err)
	require.Contains(t, stderr, `--topic "orders:zero"`)
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
