package connect

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KafkaSinkMetrics are the Kafka sinks' Prometheus series, shared by the
// Kafka sinks of one registry. A nil *KafkaSinkMetrics records nothing.
type KafkaSinkMetrics struct {
	produceSeconds *prometheus.HistogramVec
	transactions   *prometheus.CounterVec
	recordsOut     *prometheus.CounterVec
}

// NewKafkaSinkMetrics registers the Kafka sink series in reg:
// flowhost_kafka_produce_seconds{sink,topic} (from a batch's produce to
// the acknowledgement of its last record), flowhost_kafka_transactions_total{sink,outcome}
// (outcome committed or aborted) and flowhost_kafka_records_out_total{sink,topic}
// (records acknowledged; in a transaction, counted once it commits).
func NewKafkaSinkMetrics(reg prometheus.Registerer) (*KafkaSinkMetrics, error) {
	m := &KafkaSinkMetrics{
		produceSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowhost_kafka_produce_seconds",
			Help:    "Time from producing a Kafka sink batch to the acknowledgement of its last record.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"sink", "topic"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_kafka_transactions_total",
			Help: "Kafka sink transactions, by outcome (committed, aborted).",
		}, []string{"sink", "outcome"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_kafka_records_out_total",
			Help: "Records a Kafka sink wrote (acknowledged; in a transaction, once it committed), by topic.",
		}, []string{"sink", "topic"}),
	}
	for _, c := range []prometheus.Collector{m.produceSeconds, m.transactions, m.recordsOut} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *KafkaSinkMetrics) produced(sink, topic string, records int, d time.Duration) {
	if m == nil {
		return
	}
	m.produceSeconds.WithLabelValues(sink, topic).Observe(d.Seconds())
	m.wrote(sink, topic, records)
}

// wrote counts records written whose produce time is not known (a
// transaction found committed after its answer was lost).
func (m *KafkaSinkMetrics) wrote(sink, topic string, records int) {
	if m == nil {
		return
	}
	m.recordsOut.WithLabelValues(sink, topic).Add(float64(records))
}

func (m *KafkaSinkMetrics) transaction(sink, outcome string) {
	if m == nil {
		return
	}
	m.transactions.WithLabelValues(sink, outcome).Add(1)
}
