package runtime

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowhost/flowhost/host/connect"
)

// metrics are the runtime's Prometheus series. Each Runtime registers its
// own set in its own registry, so several runtimes (tests, embedding) never
// collide.
type metrics struct {
	messagesIn       *prometheus.CounterVec
	messagesOut      *prometheus.CounterVec
	batchRows        *prometheus.HistogramVec
	batchSeconds     *prometheus.HistogramVec
	guestErrors      *prometheus.CounterVec
	deadLetters      *prometheus.CounterVec
	sourceRecords    *prometheus.CounterVec
	bias             *prometheus.GaugeVec
	eventWM          *prometheus.GaugeVec
	systemWM         *prometheus.GaugeVec
	bufferedMsgs     *prometheus.GaugeVec
	bufferedBytes    *prometheus.GaugeVec
	sinkRecords      *prometheus.CounterVec
	backpressureNs   *prometheus.CounterVec
	retained         prometheus.Counter
	progress         progressGauges
	sourceDuplicates *prometheus.CounterVec
	storeBytes       prometheus.Gauge
	storageDurable   prometheus.Gauge
	batchRetries     *prometheus.CounterVec
	commitSeconds    *prometheus.HistogramVec
	quarantined      *prometheus.GaugeVec
	reloads          *prometheus.CounterVec
	// The fair-share scheduler, by tenant ("operator": computations
	// without one).
	tenantSlotSeconds *prometheus.CounterVec
	tenantWaitSeconds *prometheus.CounterVec
	tenantRunning     *prometheus.GaugeVec
	quotaExceeded     *prometheus.CounterVec
	sourceThrottled   *prometheus.CounterVec
	// Idle sources (watermark.idle_partitions).
	sourceIdlePartitions *prometheus.GaugeVec
	streamIdle           *prometheus.GaugeVec
	lateMessages         *prometheus.CounterVec
	// timerCuts counts batches shortened because a timer the guest set
	// in them would have fallen inside them (process.go).
	timerCuts *prometheus.CounterVec
	// Narrowing failed batches and keys down to the inputs that fail on
	// their own (isolate.go).
	isolatedFailures    *prometheus.CounterVec
	isolationCalls      *prometheus.CounterVec
	isolationUnresolved *prometheus.CounterVec
	kafka               *connect.KafkaMetrics // kafka sources and sinks (connect/kafka_metrics.go)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		messagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_messages_in_total",
			Help: "Messages delivered to a computation, by input stream.",
		}, []string{"computation", "stream"}),
		messagesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_messages_out_total",
			Help: "Messages a computation emitted, by output stream.",
		}, []string{"computation", "stream"}),
		batchRows: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowhost_batch_rows",
			Help:    "Inputs (messages and timers) per batch handed to a computation.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}, []string{"computation"}),
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowhost_batch_duration_seconds",
			Help:    "Time to process one batch: encode, guest call, decode and apply.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 9),
		}, []string{"computation"}),
		guestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_guest_errors_total",
			Help: "Failed attempts at a batch (each retry that fails counts again) and failed keys of a computation, by cause (call: trap, deadline, bad status or undecodable response; validate; batch; key).",
		}, []string{"computation", "cause"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_dead_letters_total",
			Help: "Records sent to the dead-letter route, by stage and by the node that refused them: the computation, or the source whose connector could not read them.",
		}, []string{"stage", "node"}),
		sourceRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_source_records_total",
			Help: "Records accepted by a source.",
		}, []string{"source", "stream"}),
		bias: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_stream_bias_seconds",
			Help: "Average EventTimestamp - AlignmentTimestamp over a stream's queued messages, as last seen by a reading partition.",
		}, []string{"stream"}),
		eventWM: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_stream_event_watermark_seconds",
			Help: "A stream's event watermark, Unix seconds.",
		}, []string{"stream"}),
		systemWM: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_stream_system_watermark_seconds",
			Help: "A stream's system watermark, Unix seconds.",
		}, []string{"stream"}),
		bufferedMsgs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_stream_buffered_messages",
			Help: "Messages of a stream queued in input buffers.",
		}, []string{"stream"}),
		bufferedBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_stream_buffered_bytes",
			Help: "Bytes of a stream queued in input buffers.",
		}, []string{"stream"}),
		sinkRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_sink_records_total",
			Help: "Records written to a sink.",
		}, []string{"sink"}),
		backpressureNs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_backpressure_seconds_total",
			Help: "Time senders spent blocked on a full input buffer, by destination computation.",
		}, []string{"computation"}),
		sourceDuplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_source_duplicates_total",
			Help: "Records a source acknowledged without appending them again: their idempotency key (id) was accepted before.",
		}, []string{"source"}),
		retained: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowhost_store_retention_deleted_total",
			Help: "Consumed source records and sink log records the retention policy deleted from the store.",
		}),
		storeBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowhost_store_bytes",
			Help: "Size of the store's files on disk (updated by each retention pass).",
		}),
		storageDurable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowhost_storage_durable",
			Help: "1 when the run commits to a durable storage (a data directory: exactly-once across restarts), 0 in memory.",
		}),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowhost_store_commit_seconds",
			Help:    "Time to commit one transaction to the store (durable on return), by what committed: ingest, route, epoch, sink.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10),
		}, []string{"stage"}),
		batchRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_batch_retries_total",
			Help: "Failed batches a computation retried on a fresh instance (on_failure.retries), by the cause of the failed attempt.",
		}, []string{"computation", "cause"}),
		isolatedFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_isolated_failures_total",
			Help: "Inputs (messages and due timers) a computation failed on their own, found by narrowing a failed batch or key, and dead-lettered; by the cause of the failure of the call that held them alone (call, validate, batch, key).",
		}, []string{"computation", "cause"}),
		isolationCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_isolation_calls_total",
			Help: "Calls a computation spent narrowing failed batches and keys down to the inputs that fail on their own, by the cause of the failure narrowed (call, validate, batch, key).",
		}, []string{"computation", "cause"}),
		isolationUnresolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_isolation_unresolved_total",
			Help: "Inputs a computation dead-lettered without isolating them, because narrowing their batch reached its limit of calls.",
		}, []string{"computation"}),
		quarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowhost_computation_quarantined",
			Help: "1 when a partition of the computation is quarantined (on_failure.quarantine_after): it no longer calls its guest and dead-letters its batches until the run restarts.",
		}, []string{"computation"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowhost_computation_reloads_total",
			Help: "Reloads of a computation's implementation (a new plugin version), by result: swapped (partitions switch at their next batch) or refused (the new version failed its probe instance; the running one keeps running).",
		}, []string{"computation", "result"}),
	}
	m.tenantSlotSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_tenant_worker_seconds_total",
		Help: "Time a tenant's partitions held a worker (calling the guest, applying and committing a batch): its use of the fair share.",
	}, []string{"tenant"})
	m.tenantWaitSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_tenant_throttled_seconds_total",
		Help: "Time a tenant's partitions waited for a worker because others had their share (or the tenant its concurrent_instances): how much it was throttled.",
	}, []string{"tenant"})
	m.tenantRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flowhost_tenant_running_batches",
		Help: "A tenant's batches running now (holding a worker).",
	}, []string{"tenant"})
	m.quotaExceeded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_quota_exceeded_total",
		Help: "Keys a computation's guest failed by exceeding a tenant quota (state or timers per key); their inputs went to the dead-letter route.",
	}, []string{"tenant", "computation", "quota"})
	m.sourceThrottled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_source_throttled_seconds_total",
		Help: "Time a source waited for its tenant's quotas.ingest_rate before accepting records.",
	}, []string{"source"})
	m.sourceIdlePartitions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flowhost_source_idle_partitions",
		Help: "Partitions of a source that are idle: no record for watermark.idle_partitions.duration and none waiting. When it equals the source's partition count the source is idle and left out of the event watermark of what it feeds.",
	}, []string{"source"})
	m.streamIdle = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flowhost_stream_idle",
		Help: "1 while a stream is idle (its source is idle, or every input of the computation writing it is idle and nothing is queued there): its readers leave it out of their event watermark.",
	}, []string{"stream"})
	m.lateMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_late_messages_total",
		Help: "Messages that reached a computation partition with an EventTimestamp below the event watermark it had reached (records of a source rejoining after it was idle, or later than out_of_orderness_bound): delivered and processed like any other, counted here.",
	}, []string{"computation", "stream"})
	reg.MustRegister(m.sourceIdlePartitions, m.streamIdle, m.lateMessages)
	m.progress = newProgressGauges(reg)
	reg.MustRegister(m.sourceThrottled, m.tenantSlotSeconds, m.tenantWaitSeconds, m.tenantRunning, m.quotaExceeded, m.reloads, m.commitSeconds, m.retained, m.storeBytes, m.storageDurable, m.sourceDuplicates, m.messagesIn, m.messagesOut, m.batchRows, m.batchSeconds, m.guestErrors,
		m.deadLetters, m.sourceRecords, m.bias, m.eventWM, m.systemWM, m.bufferedMsgs,
		m.bufferedBytes, m.sinkRecords, m.backpressureNs, m.batchRetries, m.quarantined)
	m.timerCuts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowhost_timer_cuts_total",
		Help: "Batches of a computation processed again shorter because a timer set in them fell before one of their later messages.",
	}, []string{"computation"})
	reg.MustRegister(m.timerCuts)
	reg.MustRegister(m.isolatedFailures, m.isolationCalls, m.isolationUnresolved)
	m.kafka = connect.NewKafkaMetrics(reg)
	return m
}

// commit commits b and records how long it took under stage.
func (m *metrics) commit(stage string, b StorageBatch) error {
	start := time.Now()
	err := b.Commit()
	m.commitSeconds.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	return err
}

// nsToSeconds converts int64 nanoseconds for gauges, which Prometheus
// conventionally keeps in seconds.
func nsToSeconds(ns int64) float64 { return float64(ns) / 1e9 }
