package connect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaMetrics are the Prometheus series of flowhost's Kafka clients,
// shared by every kafka source and sink of a run. A nil *KafkaMetrics
// records nothing, so that connectors built without a runtime work too.
type KafkaMetrics struct {
	// Lag is flowhost_kafka_consumer_lag{source,topic,partition}: the
	// partition's high watermark at its last fetch minus the next offset
	// the source reads.
	Lag *prometheus.GaugeVec
	// RecordsIn is flowhost_kafka_records_in_total{source,topic}: the
	// records read from Kafka, dead letters included.
	RecordsIn *prometheus.CounterVec
	// BrokerErrors is flowhost_kafka_broker_errors_total{client,broker,cause}.
	BrokerErrors *prometheus.CounterVec
	// GroupCommits is flowhost_kafka_group_commits_total{source,result}:
	// the commits of stored offsets to the consumer group (result ok or
	// error).
	GroupCommits *prometheus.CounterVec
}

// NewKafkaMetrics makes the series and registers them in reg.
func NewKafkaMetrics(reg prometheus.Registerer) *KafkaMetrics {
	m := &KafkaMetrics{
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_kafka_consumer_lag",
			Help: "Records of a Kafka partition not read yet by a kafka source: the high watermark of its last fetch minus the next offset to read.",
		}, []string{"source", "topic", "partition"}),
		RecordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_kafka_records_in_total",
			Help: "Records a kafka source read from a topic, dead letters included.",
		}, []string{"source", "topic"}),
		BrokerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_kafka_broker_errors_total",
			Help: "Failed connections, reads and writes of a Kafka client (source NAME or sink NAME), and errors brokers answered, by broker and cause.",
		}, []string{"client", "broker", "cause"}),
		GroupCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_kafka_group_commits_total",
			Help: "Commits of a kafka source's stored offsets to its consumer group (for monitoring), by result (ok, error).",
		}, []string{"source", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Lag, m.RecordsIn, m.BrokerErrors, m.GroupCommits)
	}
	return m
}

// BrokerHook returns a kgo hook (pass it with kgo.WithHooks) that counts
// the failed connections, reads and writes of the client named client
// ("source orders-in", "sink out") in BrokerErrors and logs them at Warn
// with the broker and the cause, at most once a second per broker and
// cause, so that a broker down for minutes does not flood the log. kgo
// retries such failures itself with backoff; the hook only makes them
// seen. log nil: slog.Default(). Safe on a nil *KafkaMetrics (it then only
// logs).
func (m *KafkaMetrics) BrokerHook(client string, log *slog.Logger) kgo.Hook {
	if log == nil {
		log = slog.Default()
	}
	return &brokerHook{m: m, client: client, log: log}
}

// logLimit lets a message of one kind through at most once a second, so
// that a fault that lasts minutes does not flood the log.
type logLimit struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// allow reports whether a message of kind may be logged now.
func (l *logLimit) allow(kind string) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last[kind]) < time.Second {
		return false
	}
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	l.last[kind] = now
	return true
}

// CountBrokerError counts one error of client with broker ("" when no
// broker is known), by its cause.
func (m *KafkaMetrics) CountBrokerError(client, broker string, err error) {
	if m == nil {
		return
	}
	m.BrokerErrors.WithLabelValues(client, broker, KafkaErrorCause(err)).Inc()
}

type brokerHook struct {
	m      *KafkaMetrics
	client string
	log    *slog.Logger
	limit  logLimit
}

var (
	_ kgo.HookBrokerConnect = (*brokerHook)(nil)
	_ kgo.HookBrokerRead    = (*brokerHook)(nil)
	_ kgo.HookBrokerWrite   = (*brokerHook)(nil)
)

func (h *brokerHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.failed(meta, "connect", err)
}

func (h *brokerHook) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.failed(meta, "read", err)
}

func (h *brokerHook) OnBrokerWrite(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.failed(meta, "write", err)
}

func (h *brokerHook) failed(meta kgo.BrokerMetadata, op string, err error) {
	// A connection closed because the client is closing is no fault.
	if err == nil || errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
		return
	}
	broker := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	cause := KafkaErrorCause(err)
	h.m.CountBrokerError(h.client, broker, err)
	if h.limit.allow(broker + " " + cause) {
		h.log.Warn("kafka broker "+op+" failed; retrying with backoff", "client", h.client, "broker", broker, "cause", cause, "err", err)
	}
}

// KafkaErrorCause names the cause of a Kafka client error for metrics and
// logs: the Kafka error code's name (NOT_LEADER_FOR_PARTITION), or
// refused, timeout, eof, closed or other for a connection's failures.
func KafkaErrorCause(err error) string {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		return "closed"
	}
	return "other"
}
