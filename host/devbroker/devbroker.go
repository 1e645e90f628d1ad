// Package devbroker runs a Kafka-protocol development broker: a kfake
// cluster (github.com/twmb/franz-go/pkg/kfake) in this process, on
// loopback addresses by default, optionally persisted in a data
// directory, with Prometheus metrics. It is what `flowhost kafka serve`
// runs, so that a Kafka pipeline can be tried with nothing installed, and
// what the binary tests run as a broker in a process of its own.
//
// It is a tool for development and tests, not for production: kfake
// keeps one replica of everything, holds every partition in memory, and
// is only as durable as its data directory (see Config.SyncWrites).
package devbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topic is a topic to create when the cluster starts without persisted
// state.
type Topic struct {
	Name       string
	Partitions int32
}

// ParseTopic reads NAME:PARTITIONS (or NAME alone, for one partition), the
// form of `flowhost kafka serve --topic`.
func ParseTopic(s string) (Topic, error) {
	name, parts, hasParts := strings.Cut(s, ":")
	if name == "" {
		return Topic{}, fmt.Errorf("--topic %q: want NAME:PARTITIONS, such as orders:4", s)
	}
	t := Topic{Name: name, Partitions: 1}
	if hasParts {
		n, err := strconv.ParseInt(parts, 10, 32)
		if err != nil || n < 1 {
			return Topic{}, fmt.Errorf("--topic %q: partitions %q is not a positive integer; want NAME:PARTITIONS, such as orders:4", s, parts)
		}
		t.Partitions = int32(n)
	}
	return t, nil
}

// Config configures a development broker.
type Config struct {
	// Brokers is the number of brokers; 0 means one, or one per port.
	Brokers int
	// Ports are the brokers' ports, one per broker; empty means free
	// ports. A port of 0 is a free one.
	Ports []int
	// ListenHost is the host the brokers listen on; empty means
	// 127.0.0.1. A host that is not loopback is refused unless
	// InsecureListen is set: the brokers have no TLS and no
	// authentication, so anyone on the network could read and write.
	ListenHost     string
	InsecureListen bool
	// DataDir, when set, persists the cluster there: a new cluster on the
	// same directory starts with the topics, records, offsets and
	// transactions the last one had when it was closed.
	DataDir string
	// SyncWrites fsyncs every write, so that records survive a kill of
	// the broker too; without it they survive a Close.
	SyncWrites bool
	// Topics are created when the cluster starts without persisted state.
	Topics []Topic
	// MetricsAddr, when set, serves Prometheus /metrics there.
	MetricsAddr string
	// Logger receives the broker's lifecycle; nil discards it.
	Logger *slog.Logger
}

// Broker is a running development cluster.
type Broker struct {
	cluster     *kfake.Cluster
	addrs       []string
	metricsAddr string
	stopMetrics func()
	admin       *kgo.Client
	log         *slog.Logger
}

// Start starts the cluster and, when cfg.MetricsAddr is set, its metrics
// server. The brokers accept connections when it returns.
func Start(cfg Config) (*Broker, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host := cfg.ListenHost
	if host == "" {
		host = "127.0.0.1"
	}
	if !isLoopback(host) && !cfg.InsecureListen {
		return nil, fmt.Errorf("--listen-host %s is not a loopback address, and the development broker has neither TLS nor authentication: "+
			"anyone on the network could read and write its topics; listen on 127.0.0.1, or give --insecure-listen to allow it", host)
	}
	n := cfg.Brokers
	switch {
	case n == 0 && len(cfg.Ports) > 0:
		n = len(cfg.Ports)
	case n == 0:
		n = 1
	case n < 0:
		return nil, fmt.Errorf("--brokers %d: want at least 1", n)
	case len(cfg.Ports) > 0 && len(cfg.Ports) != n:
		return nil, fmt.Errorf("--brokers %d with %d --ports: give one port per broker", n, len(cfg.Ports))
	}
	ports := cfg.Ports
	if len(ports) == 0 {
		ports = make([]int, n) // free ports
	}
	for _, p := range ports {
		if p < 0 || p > 65535 {
			return nil, fmt.Errorf("--ports: %d is not a port", p)
		}
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(n),
		kfake.Ports(ports...),
		// kfake asks for 127.0.0.1:PORT; the host is swapped for the one
		// chosen, and the advertised address is the listener's.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, port))
		}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	for _, t := range cfg.Topics {
		opts = append(opts, kfake.SeedTopics(t.Partitions, t.Name))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka serve: %w", err)
	}
	b := &Broker{cluster: c, addrs: c.ListenAddrs(), log: log}
	b.admin, err = kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("kafka serve: admin client: %w", err)
	}
	log.Info("kafka development broker started (not for production)", "brokers", strings.Join(b.addrs, ","),
		"data_dir", cfg.DataDir, "sync_writes", cfg.SyncWrites)
	if cfg.MetricsAddr != "" {
		if err := b.serveMetrics(cfg.MetricsAddr); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// Addrs are the brokers' host:port addresses, in broker order.
func (b *Broker) Addrs() []string { return b.addrs }

// MetricsAddr is the host:port the metrics are served on; empty when
// they are not.
func (b *Broker) MetricsAddr() string { return b.metricsAddr }

// Compact runs log compaction on every compacted topic now, as a broker
// does in the background: each key keeps its latest record, and aborted
// transactions and old tombstones go. Tests use it to see what a
// compacted changelog restores to.
func (b *Broker) Compact() { b.cluster.Compact() }

// Close stops the metrics server and the cluster; with a data directory,
// the cluster's state is written there before Close returns.
func (b *Broker) Close() {
	if b.stopMetrics != nil {
		b.stopMetrics()
	}
	b.admin.Close()
	b.cluster.Close()
	b.log.Info("kafka development broker stopped")
}

// isLoopback reports whether host names loopback interfaces only: any
// name other than localhost may resolve to a public address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var (
	brokersDesc = prometheus.NewDesc("flowhost_devbroker_brokers",
		"Brokers of the development cluster.", nil, nil)
	brokerUpDesc = prometheus.NewDesc("flowhost_devbroker_broker_up",
		"1 when the broker accepts connections, 0 otherwise.", []string{"broker"}, nil)
	topicsDesc = prometheus.NewDesc("flowhost_devbroker_topics",
		"Topics in the cluster (internal ones included); absent when the cluster does not answer.", nil, nil)
	partitionsDesc = prometheus.NewDesc("flowhost_devbroker_topic_partitions",
		"Partitions of each topic.", []string{"topic"}, nil)
)

// collector reads the cluster's state at each scrape, so the figures are
// never stale.
type collector struct{ b *Broker }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- brokersDesc
	ch <- brokerUpDesc
	ch <- topicsDesc
	ch <- partitionsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(brokersDesc, prometheus.GaugeValue, float64(len(c.b.addrs)))
	for _, a := range c.b.addrs {
		up := 0.0
		if conn, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			conn.Close()
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(brokerUpDesc, prometheus.GaugeValue, up, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(c.b.admin).ListTopicsWithInternal(ctx)
	if err != nil {
		c.b.log.Warn("metrics: listing topics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(topicsDesc, prometheus.GaugeValue, float64(len(topics)))
	for name, t := range topics {
		ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(len(t.Partitions)), name)
	}
}

func (b *Broker) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w; give another, or --metrics-addr '' to turn metrics off", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{b})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("metrics server", "err", err)
		}
	}()
	b.metricsAddr = ln.Addr().String()
	b.log.Info("serving metrics", "addr", "http://"+b.metricsAddr+"/metrics")
	b.stopMetrics = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return nil
}
