// Package host is where flowhost's parts meet: it reads a pipeline spec,
// finds each computation's plugin, compiles it with a WebAssembly engine
// and runs the pipeline with package runtime, serving Prometheus metrics
// while it runs. The CLI in cmd/flowhost is a thin layer over [Run] and
// [ValidatePlugin]; embedders can call them, or use package runtime
// directly with native Go computations.
package host

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/engine"
	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/progress"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
	"github.com/flowhost/flowhost/plugins"
)

// RunConfig says what to run and how. The zero value of every optional
// field has a working default.
type RunConfig struct {
	// SpecPath is the pipeline spec (YAML or JSON). Required.
	SpecPath string
	// PluginDirs are plugin directories, or folders of them.
	PluginDirs []string
	// TracePath, if set, receives one JSON line per delivery.
	TracePath string
	// MetricsAddr is where /metrics is served, such as "127.0.0.1:9464";
	// empty serves nothing. A busy address fails the run with an error
	// naming --metrics-addr, unless MetricsFallback is set.
	MetricsAddr string
	// MetricsFallback serves on a free port of MetricsAddr's host, and
	// logs it, when MetricsAddr is in use (another pipeline on the same
	// machine): the CLI sets it when the user did not choose the address.
	MetricsFallback bool
	// CacheDir holds compiled plugins so that a restart does not recompile;
	// empty means the user's cache directory (os.UserCacheDir)/flowhost.
	CacheDir string
	// Logger receives the host's and the guests' logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Options are passed on to runtime.New after the host's own.
	Options []runtime.Option
	// OnMetricsListen, if set, is called with the bound metrics address.
	OnMetricsListen func(addr string)
	// Progress receives the progress display of file sources; nil means
	// os.Stderr (a live bar when it is a terminal, log lines otherwise),
	// io.Discard turns it off.
	Progress io.Writer
	// DataDir is the data directory of the run's store: the run is
	// exactly-once, and a run started on the same directory resumes where
	// the last one committed. Empty means store.DefaultDataDir(pipeline
	// name).
	DataDir string
	// InMemory runs without a store: faster, but nothing survives the
	// process, and a restart processes its input again.
	InMemory bool
	// Cluster, when set, replaces the spec's cluster block (the CLI's
	// --cluster kafka --brokers). With a cluster block the run's store is
	// on Kafka (see cluster.OpenStore) instead of a data directory.
	Cluster *spec.Cluster
	// HostID, with a cluster block, makes this host a static member of
	// the pipeline's hosts group (see cluster.HostsConfig.InstanceID).
	// Every host needs its own.
	HostID string
	// Replay reprocesses sources from positions (see runtime.Replay); it
	// needs the store.
	Replay map[string]runtime.Replay
	// ResetState starts the computations downstream of the replayed
	// sources from empty state and timers (runtime.WithResetState).
	ResetState bool
	// FromSavepoint, if set, is a savepoint (see [CreateSavepoint]) that
	// the run starts from: it is copied into the data directory, which
	// must be new or empty unless ReplaceDataDir.
	FromSavepoint  string
	ReplaceDataDir bool
	// Reload watches the plugin directories while the run lasts and
	// reloads a plugin whose manifest gets a new checksum, at an epoch
	// boundary of each partition (no message lost, none processed by
	// both versions); a bad new version is refused and the running one
	// keeps running.
	Reload bool
	// OnReload, if set, is called after every reload attempt with the
	// computation and nil (swapped) or why the new version was refused.
	OnReload func(computation string, err error)
	// InsecureListen lets HTTP sources and sinks without tls listen on
	// addresses that are not loopback (see runtime.WithInsecureListen).
	InsecureListen bool
	// CPUPerBatch caps the time a guest of the operator's plugins (those
	// of computations without a tenant) may run on one batch; past it the
	// guest is interrupted and the batch fails, as a tenant's
	// quotas.cpu_per_batch does for the tenant's. A manifest's
	// limits.batch_timeout may ask for less, never for more. 0 means
	// DefaultCPUPerBatch. Negative sets none but the manifest's: its
	// guests are then not interruptible, which is about 3x faster on
	// wazero, but a guest in an infinite loop holds its partition, and
	// the stop of the run, until a second signal.
	CPUPerBatch time.Duration
	// StopGrace is how long the run, once ctx is cancelled, goes on
	// delivering what was accepted before it interrupts the running
	// guest calls and returns runtime.ErrInterrupted (nothing half-done
	// commits). 0 means DefaultStopGrace; negative waits as long as
	// delivering takes.
	StopGrace time.Duration
	// Summary, if set, receives the human-readable summary of the run
	// when it ends (see RunSummary).
	Summary io.Writer
	// SummaryJSON, if set, is a file the run's RunSummary is written to
	// as JSON when the run ends.
	SummaryJSON string
	// MetricsSecurity is how the metrics server, which also serves the
	// operator's page and API (package opview), is exposed: a
	// MetricsAddr that is not loopback needs TLS and a bearer token, or
	// Insecure.
	MetricsSecurity opview.Security
	// EnableStateLookup lets the API read a key's committed state
	// (/api/v1/state); off by default, because state may hold personal
	// data. It needs the store.
	EnableStateLookup bool
	// LiveTrace keeps the last LiveTrace deliveries of every computation
	// partition for the API's live trace (/api/v1/trace); 0 keeps none.
	LiveTrace int
}

// DefaultCPUPerBatch is the CPU limit per batch of the operator's plugins
// when RunConfig.CPUPerBatch does not set one: the same as a tenant's
// default quotas.cpu_per_batch.
const DefaultCPUPerBatch = spec.DefaultTenantCPUPerBatch

// DefaultStopGrace is how long a run, once cancelled, goes on delivering
// what was accepted before it interrupts the running guest calls, when
// RunConfig.StopGrace does not say.
const DefaultStopGrace = 10 * time.Second

// Run runs the pipeline of cfg until its sources end or ctx is cancelled
// (then it drains what was accepted, for at most the stop's grace period;
// see runtime.Runtime.Run), and reports a RunSummary as cfg asks. It
// returns the run's fatal error, runtime.ErrInterrupted when the stop's
// grace period ran out, or else an error wrapping ErrQuarantined when a
// partition was quarantined; ExitCode maps these to exit statuses.
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	summary, err := run(ctx, &cfg)
	if summary == nil { // it did not start: nothing to summarise
		return err
	}
	// Reported once everything of the run is closed, so that it is the
	// last thing the run prints.
	err = summary.finish(err)
	if rerr := summary.report(&cfg); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// run is Run without the report; its summary is nil when the pipeline
// did not start.
func run(ctx context.Context, cfg *RunConfig) (*RunSummary, error) {
	log := cfg.Logger
	// A host whose store on Kafka another host took over, or which lost
	// the pipeline in its hosts group, stops the run with
	// cluster.ErrFenced or cluster.ErrLostOwnership as the cause.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	pipe, err := spec.ParseFile(cfg.SpecPath)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		if err := pipe.WithCluster(cfg.Cluster); err != nil {
			return nil, flagErrors("--cluster, --brokers", err)
		}
	}
	if err := checkStoreChoice(pipe, cfg); err != nil {
		return nil, err
	}
	catalog, err := plugins.Discover(cfg.PluginDirs)
	if err != nil {
		return nil, err
	}
	cacheDir, err := compilationCacheDir(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	loaded, err := LoadComputations(ctx, pipe, catalog, cacheDir, cfg.CPUPerBatch, log)
	if err != nil {
		return nil, err
	}
	defer loaded.Close(context.WithoutCancel(ctx))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []runtime.Option{runtime.WithLogger(log), runtime.WithRegistry(reg)}
	if cfg.TracePath != "" {
		f, err := os.Create(cfg.TracePath)
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		defer f.Close()
		opts = append(opts, runtime.WithTrace(f))
	}
	var rep *progress.Reporter // nil: no progress display
	if hasLongWork(pipe, cfg) && cfg.Progress != io.Discard {
		w, tty := cfg.Progress, false
		if w == nil {
			w, tty = os.Stderr, progress.IsTerminal(os.Stderr)
		}
		rep = progress.New(w, tty)
		defer rep.Close()
		opts = append(opts, runtime.WithProgress(fileProgress(rep)), runtime.WithWorkProgress(workProgress(rep)))
	}
	summary := &RunSummary{}
	var rt *runtime.Runtime
	var savepoints http.Handler
	var runStore *store.Store // nil in memory
	if cfg.ReplaceDataDir && cfg.FromSavepoint == "" {
		return nil, errors.New("--replace-data-dir replaces the data directory with a savepoint: give it with --from-savepoint")
	}
	if !cfg.InMemory {
		if cfg.FromSavepoint != "" {
			if err := restoreSavepoint(pipe, cfg, log, rep); err != nil {
				return nil, err
			}
		}
		var st *store.Store
		if pipe.Cluster != nil {
			var leave func()
			if st, leave, err = openClusterStore(ctx, pipe, cfg, reg, log, stopRun); err != nil {
				return nil, err
			}
			// Deferred before the store's Close, so run after it: the
			// host leaves the group once its last commit is done.
			defer leave()
			summary.StoreTopic = cluster.StoreTopic(pipe.Name)
		} else {
			if st, err = OpenStore(pipe, cfg.DataDir); err != nil {
				return nil, err
			}
			log.Info("exactly-once: committing to the data directory", "dir", st.Dir())
			summary.DataDir = st.Dir()
			// The handler is served once rt is set (by the metrics
			// server, started after runtime.New).
			savepoints = savepointHandler(st, func(p runtime.WorkProgress) { rt.ReportWork(p) }, func(kind, name string) { rt.ForgetWork(kind, name) })
		}
		defer st.Close()
		runStore = st
		opts = append(opts, runtime.WithStore(st))
		if len(cfg.Replay) > 0 {
			opts = append(opts, runtime.WithReplay(cfg.Replay))
		}
		if cfg.ResetState {
			opts = append(opts, runtime.WithResetState())
		}
	} else if len(cfg.Replay) > 0 || cfg.ResetState || cfg.FromSavepoint != "" {
		return nil, errors.New("--from, --reset-state and --from-savepoint work on the data directory; they cannot run in memory")
	}
	if cfg.InsecureListen {
		opts = append(opts, runtime.WithInsecureListen())
	}
	if cfg.LiveTrace > 0 {
		opts = append(opts, runtime.WithLiveTrace(cfg.LiveTrace))
	}
	stopGrace := cfg.StopGrace
	if stopGrace == 0 {
		stopGrace = DefaultStopGrace
	}
	opts = append(opts, runtime.WithStopGrace(stopGrace))
	opts = append(opts, cfg.Options...)
	rt, err = runtime.New(pipe, loaded.Factories, opts...)
	if err != nil {
		return nil, err
	}
	if cfg.MetricsAddr != "" {
		listen, err := cfg.MetricsSecurity.Resolve(cfg.MetricsAddr)
		if err != nil {
			return nil, err
		}
		vc := opview.Config{Pipeline: pipe, Status: rt.Status, Gatherer: reg, Token: listen.Token,
			StateLookup: stateLookup(cfg, pipe, runStore), HostID: cfg.HostID}
		if cfg.LiveTrace > 0 {
			vc.Trace = rt.RecentDeliveries
		}
		view := opview.New(vc)
		stopView := view.Start(ctx)
		defer stopView()
		stop, err := serveMetrics(cfg.MetricsAddr, cfg.MetricsFallback, reg, rt.Status, savepoints, log, cfg.OnMetricsListen, view, listen)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	if cfg.Reload {
		stop, err := loaded.watchPlugins(ctx, rt, cfg.OnReload)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	start := time.Now()
	log.Info("pipeline running", "pipeline", pipe.Name, "spec", cfg.SpecPath, "computations", len(pipe.Computations))
	err = rt.Run(ctx)
	if cause := context.Cause(ctx); (errors.Is(cause, cluster.ErrFenced) || errors.Is(cause, cluster.ErrLostOwnership)) && !errors.Is(err, cause) {
		// The run may have drained without a commit to fail, or ended
		// as a cancelled run does: it still lost its store, and must not
		// end as if it had completed (ExitCode maps a cancel to 0).
		stopped := fmt.Errorf("stopped: %w", cause)
		if err == nil || errors.Is(err, context.Canceled) {
			err = stopped
		} else {
			err = errors.Join(stopped, err)
		}
	}
	log.Info("pipeline stopped", "pipeline", pipe.Name, "elapsed", time.Since(start).Round(time.Millisecond), "err", err)
	summary.Summary, summary.ElapsedNanos = rt.Summary(), int64(time.Since(start))
	return summary, err
}

// flagErrors reports the spec errors of a block the command line gave as
// the flags' errors: the spec's lines do not hold it.
func flagErrors(flags string, err error) error {
	var list spec.ErrorList
	if !errors.As(err, &list) {
		return fmt.Errorf("%s: %w", flags, err)
	}
	msgs := make([]string, len(list))
	for i, e := range list {
		msgs[i] = e.Path + ": " + e.Message
	}
	return fmt.Errorf("%s: %s", flags, strings.Join(msgs, "; "))
}

// checkStoreChoice refuses the flags that do not go with where the run's
// store is.
func checkStoreChoice(pipe *spec.Pipeline, cfg *RunConfig) error {
	if pipe.Cluster == nil {
		return nil
	}
	switch {
	case cfg.InMemory:
		return errors.New("--in-memory runs without a store, and the spec's cluster block (or --cluster) puts the store on Kafka: choose one")
	case cfg.DataDir != "":
		return errors.New("--data-dir: with a cluster block (or --cluster) the store is on Kafka, not in a data directory; drop one of them")
	case cfg.FromSavepoint != "":
		return errors.New("--from-savepoint restores a data directory; a store on Kafka is restored from its topic")
	}
	return nil
}

// openClusterStore joins pipe's hosts group on the Kafka cluster of its
// cluster block, waits (as a standby) until this host owns the pipeline,
// and then opens its store, fencing the host that ran it before. When the
// host loses the pipeline (its session expired) or another host fences
// it, it stops the run with why as the cause. leave leaves the group;
// call it after the store's Close.
//
// While it stands by, the host serves /metrics (flowhost_cluster_owner is
// 0, then 1) and a /status saying so on cfg.MetricsAddr, if set.
func openClusterStore(ctx context.Context, pipe *spec.Pipeline, cfg *RunConfig, reg *prometheus.Registry, log *slog.Logger, stop context.CancelCauseFunc) (st *store.Store, leave func(), err error) {
	hostID := cfg.HostID
	k := pipe.Cluster.Kafka
	conn, err := runtime.KafkaConnection(pipe, "cluster.kafka", k.Connection())
	if err != nil {
		return nil, nil, err
	}
	opts, err := connect.KafkaClientOpts(conn)
	if err != nil {
		return nil, nil, pipe.ErrorAt("cluster.kafka", "%v", err)
	}
	replication := int16(k.Replication)
	if replication == 0 {
		replication = -1
	}
	hosts, err := cluster.JoinHosts(ctx, cluster.HostsConfig{Pipeline: pipe, Opts: opts, Replication: replication,
		InstanceID: hostID, SessionTimeout: k.SessionTimeout})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: joining the hosts of pipeline %s on %v: %w", pipe.Name, k.Brokers, err)
	}
	log.Info("cluster: joined the pipeline's hosts; waiting to own the pipeline (another host may be running it: this one stands by)",
		"group", cluster.HostsGroup(pipe.Name), "host_id", hostID)
	owner := prometheus.NewGauge(prometheus.GaugeOpts{Name: "flowhost_cluster_owner",
		Help:        "1 when this host owns the pipeline (runs it), 0 while it stands by in the pipeline's hosts group.",
		ConstLabels: prometheus.Labels{"pipeline": pipe.Name, "host_id": hostID}})
	reg.MustRegister(owner)
	stopStandby := func() {}
	if cfg.MetricsAddr != "" {
		if stopStandby, err = serveStandby(pipe, cfg, reg, log); err != nil {
			hosts.Close()
			return nil, nil, err
		}
	}
	waited := time.Now()
	select {
	case <-hosts.Owned():
		stopStandby()
		owner.Set(1)
	case <-ctx.Done():
		stopStandby()
		hosts.Close()
		return nil, nil, context.Cause(ctx)
	}
	log.Info("cluster: this host owns the pipeline", "waited", time.Since(waited).Round(time.Millisecond))
	go func() {
		select {
		case <-hosts.Lost():
			log.Error("cluster: this host lost the pipeline to another (its session in the hosts' group ended): stopping")
			stop(cluster.ErrLostOwnership)
		case <-ctx.Done():
		}
	}()
	if st, err = openOwnedStore(ctx, pipe, opts, replication, log, stop); err != nil {
		hosts.Close()
		return nil, nil, err
	}
	return st, hosts.Close, nil
}

// StandbyStatus is the /status of a host standing by in its pipeline's
// hosts group (see docs/cluster.md); a running host serves
// runtime.Status.
type StandbyStatus struct {
	Pipeline string `json:"pipeline"`
	// Role is "standby".
	Role  string `json:"role"`
	Group string `json:"group"`
	// HostID is the host's --host-id ("" without one).
	HostID string `json:"host_id"`
}

// serveStandby serves /metrics and a StandbyStatus at /status on
// cfg.MetricsAddr, with the metrics server's security, until stop.
func serveStandby(pipe *spec.Pipeline, cfg *RunConfig, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	listen, err := cfg.MetricsSecurity.Resolve(cfg.MetricsAddr)
	if err != nil {
		return nil, err
	}
	ln, err := listenMetrics(cfg.MetricsAddr, cfg.MetricsFallback, log)
	if err != nil {
		return nil, err
	}
	status := StandbyStatus{Pipeline: pipe.Name, Role: "standby", Group: cluster.HostsGroup(pipe.Name), HostID: cfg.HostID}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(status)
	})
	base, stop := serveHTTP(ln, listen, mux, log, nil)
	log.Info("standing by: serving metrics and status", "addr", base+"/metrics")
	if cfg.OnMetricsListen != nil {
		cfg.OnMetricsListen(ln.Addr().String())
	}
	return stop, nil
}

// openOwnedStore opens the store of a pipeline this host owns.
func openOwnedStore(ctx context.Context, pipe *spec.Pipeline, opts []kgo.Opt, replication int16, log *slog.Logger, stop context.CancelCauseFunc) (*store.Store, error) {
	k := pipe.Cluster.Kafka
	topic := cluster.StoreTopic(pipe.Name)
	log.Info("exactly-once: restoring the store from Kafka", "topic", topic, "brokers", k.Brokers)
	start := time.Now()
	fenced := func(err error) {
		log.Error("another host took over the pipeline's store: stopping", "topic", topic, "err", err)
		stop(err)
	}
	st, err := cluster.OpenStore(ctx, cluster.StoreConfig{Pipeline: pipe, Opts: opts, Replication: replication, OnFenced: fenced})
	if err != nil {
		return nil, fmt.Errorf("cluster: opening the store of pipeline %s on %v: %w", pipe.Name, k.Brokers, err)
	}
	log.Info("exactly-once: committing to Kafka", "topic", topic, "restored_in", time.Since(start).Round(time.Millisecond))
	return st, nil
}

// OpenStore opens the data directory of pipe: dir, or the default one for
// its name when dir is empty.
func OpenStore(pipe *spec.Pipeline, dir string) (*store.Store, error) {
	if dir == "" {
		var err error
		if dir, err = store.DefaultDataDir(pipe.Name); err != nil {
			return nil, err
		}
	}
	return store.Open(dir, store.Options{})
}

// hasLongWork reports whether the run may have work whose progress is
// shown: a file or Kafka source (a file to read, a backlog to catch up),
// a replay or a savepoint to restore.
func hasLongWork(p *spec.Pipeline, cfg *RunConfig) bool {
	if len(cfg.Replay) > 0 || cfg.FromSavepoint != "" {
		return true
	}
	for _, s := range p.Sources {
		if s.Type == spec.SourceFile || s.Type == spec.SourceKafka {
			return true
		}
	}
	return false
}

// workProgress shows a replay, a Kafka backlog or a savepoint taken while
// the pipeline runs as a counter named by its kind and source (or
// directory), from its first report with something to do (a
// backlog already caught up when it is measured shows nothing), until it
// finished.
func workProgress(rep *progress.Reporter) func(runtime.WorkProgress) {
	var mu sync.Mutex
	counters := map[string]*progress.Counter{}
	return func(wp runtime.WorkProgress) {
		name := wp.Kind + " " + wp.Name
		mu.Lock()
		c, ok := counters[name]
		if !ok {
			if wp.Finished && wp.Done == 0 {
				mu.Unlock()
				return
			}
			unit := " (records)"
			if wp.Kind == runtime.WorkSavepoint {
				unit = " (bytes)"
			}
			c = rep.Counter(name+unit, wp.Total)
			counters[name] = c
		}
		mu.Unlock()
		c.SetTotal(wp.Total)
		c.Set(wp.Done)
		if wp.Finished {
			c.Done()
		}
	}
}

// fileProgress shows, per file source, the bytes read of the file's size;
// the rates count only what this run read, and a source that reached the
// end of its file stops being reported while the others go on.
func fileProgress(rep *progress.Reporter) func(string, connect.FileProgress) {
	var mu sync.Mutex
	counters := map[string]*progress.Counter{}
	return func(source string, fp connect.FileProgress) {
		mu.Lock()
		c, ok := counters[source]
		if !ok {
			c = rep.ResumedCounter(source+" (bytes)", fp.StartBytes, fp.TotalBytes)
			counters[source] = c
		}
		mu.Unlock()
		c.Set(fp.BytesRead)
		if fp.Done {
			c.Done()
		}
	}
}

// Loaded holds the compiled plugins of a pipeline.
type Loaded struct {
	// Factories maps each computation name to its factory; a
	// *compute.Refused for a tenant's computation whose plugin was
	// refused (the run goes on without it).
	Factories map[string]compute.Factory
	// Origins maps each computation to the plugin it was loaded from, for
	// reloads; refused ones have none.
	Origins map[string]*plugins.Plugin
	// specParams are each computation's parameters as the spec gives
	// them, before the manifest's defaults: a reload merges the new
	// manifest's.
	specParams map[string]map[string]any
	cacheDir   string
	log        *slog.Logger
	pipe       *spec.Pipeline
	// cpuPerBatch is the operator's plugins' CPU limit per batch; 0:
	// none but their manifests'.
	cpuPerBatch time.Duration

	mu      sync.Mutex
	engines []engine.Engine
}

// Close releases the engines and their compiled modules.
func (l *Loaded) Close(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.engines {
		_ = e.Close(ctx)
	}
	l.engines = nil
}

func (l *Loaded) keep(e engine.Engine) {
	if e == nil {
		return
	}
	l.mu.Lock()
	l.engines = append(l.engines, e)
	l.mu.Unlock()
}

// drop closes e and forgets it, if Close has not already closed it.
func (l *Loaded) drop(ctx context.Context, e engine.Engine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.engines, e); i >= 0 {
		l.engines = slices.Delete(l.engines, i, i+1)
		_ = e.Close(ctx)
	}
}

// LoadComputations finds, checks and compiles the plugin of every
// computation of pipe. A computation without a tenant looks its plugin up
// in catalog (the host's plugin directories), and any error stops the
// load: the operator's pipeline is wrong. A tenant's computation looks it
// up in the tenant's plugin directories and runs under its quotas and
// policy; an error there refuses that computation only (logged, and its
// inputs go to its dead-letter route), so that one tenant's bad plugin
// does not stop the others. Each error names the computation, the tenant,
// the plugin and the file. cpuPerBatch is the operator's plugins' CPU
// limit per batch (0: DefaultCPUPerBatch, negative: none; see
// RunConfig.CPUPerBatch).
func LoadComputations(ctx context.Context, pipe *spec.Pipeline, catalog *plugins.Catalog, cacheDir string, cpuPerBatch time.Duration, log *slog.Logger) (*Loaded, error) {
	switch {
	case cpuPerBatch == 0:
		cpuPerBatch = DefaultCPUPerBatch
	case cpuPerBatch < 0:
		cpuPerBatch = 0
		log.Warn("the operator's plugins have no CPU limit per batch but their manifest's limits.batch_timeout: a guest in an infinite loop holds its partition, and the stop of the run, until a second signal")
	}
	l := &Loaded{Factories: map[string]compute.Factory{}, Origins: map[string]*plugins.Plugin{}, specParams: map[string]map[string]any{},
		cacheDir: cacheDir, log: log, pipe: pipe, cpuPerBatch: cpuPerBatch}
	catalogs := map[string]*plugins.Catalog{"": catalog}
	for i := range pipe.Tenants {
		t := &pipe.Tenants[i]
		// A tenant's broken plugin directory refuses only the plugins it
		// breaks; the lookups report the problems.
		c, err := plugins.DiscoverPartial(t.PluginDirs)
		if err != nil {
			log.Warn("tenant's plugin directories have problems: the plugins concerned are refused", "tenant", t.Name, "err", err)
		}
		catalogs[t.Name] = c
	}
	compiled := map[string]compute.Factory{} // by tenant and plugin
	var errs []error
	for i := range pipe.Computations {
		c := &pipe.Computations[i]
		l.specParams[c.Name] = c.Parameters
		f, p, err := func() (compute.Factory, *plugins.Plugin, error) {
			p, err := catalogs[c.Tenant].Lookup(c.Plugin)
			if err != nil {
				return nil, nil, err
			}
			if !p.Manifest.Serves(plugins.Kind(c.Kind)) {
				return nil, p, fmt.Errorf("plugin %q (%s) serves %v, not %s", c.Plugin, p.ManifestPath(), p.Manifest.Kinds, c.Kind)
			}
			c.Parameters = p.Manifest.MergeParameters(c.Parameters)
			key := c.Tenant + "/" + p.Manifest.Name
			if f, ok := compiled[key]; ok {
				return f, p, nil
			}
			f, _, err := l.compile(ctx, p, pipe.Tenant(c.Tenant))
			if err != nil {
				return nil, p, err
			}
			compiled[key] = f
			return f, p, nil
		}()
		switch {
		case err == nil:
			l.Factories[c.Name], l.Origins[c.Name] = f, p
		case c.Tenant == "":
			errs = append(errs, fmt.Errorf("computation %q: %w", c.Name, err))
		default:
			err = fmt.Errorf("computation %q (tenant %q): %w", c.Name, c.Tenant, err)
			log.Error("plugin refused: the computation's inputs go to its dead-letter route, until a good version is reloaded; the other computations run", "computation", c.Name, "tenant", c.Tenant, "err", err)
			l.Factories[c.Name] = &compute.Refused{Err: err}
			if p != nil {
				l.Origins[c.Name] = p // a fixed version there is reloaded
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.Close(ctx)
		return nil, err
	}
	return l, nil
}

// DefaultEngine is the engine of a plugin whose manifest and tenant name
// none: wasmtime where the build has it (cgo), wazero otherwise. Every
// plugin of a run has a CPU limit per batch, and with limits on wasmtime
// is 3.5x to 23x faster per batch than wazero and costs 0.9x of itself
// without them, where wazero's limit costs it about 0.3x (README, "Which
// engine is the default"). wazero keeps the cheapest calls on tiny
// batches and the static, cgo-free binary.
var DefaultEngine = func() plugins.Engine {
	if engine.WasmtimeAvailable {
		return plugins.EngineWasmtime
	}
	return plugins.EngineWazero
}()

// compile reads, verifies and compiles one plugin under tenant's quotas
// and policy (nil: the operator's, whose only quota is the CPU limit per
// batch). Each plugin gets its own engine, because limits and
// capabilities are engine-wide.
func (l *Loaded) compile(ctx context.Context, p *plugins.Plugin, tenant *spec.Tenant) (*compute.WASM, engine.Engine, error) {
	lim := p.Manifest.Limits
	engineName := p.Manifest.Engine
	if tenant != nil && engineName == plugins.EngineDefault {
		engineName = plugins.Engine(tenant.Engine)
	}
	if engineName == plugins.EngineDefault {
		engineName = DefaultEngine
	}
	if tenant != nil {
		q := tenant.Quotas
		p.MaxWasmBytes = q.MaxModuleBytes
		lim.MemoryPages = tighter(lim.MemoryPages, uint32(q.MemoryPages))
		lim.BatchTimeout = tighter(lim.BatchTimeout, q.CPUPerBatch)
		lim.MaxResponseBytes = tighter(lim.MaxResponseBytes, q.MaxOutputBytes)
		if err := checkPolicy(p, tenant); err != nil {
			return nil, nil, err
		}
	} else {
		lim.BatchTimeout = tighter(lim.BatchTimeout, l.cpuPerBatch)
	}
	wasm, err := p.ReadWasm()
	if err != nil {
		return nil, nil, err
	}
	caps, err := capabilities(p)
	if err != nil {
		return nil, nil, err
	}
	info, err := engine.Inspect(wasm)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin %q (%s): %w", p.Manifest.Name, p.WasmPath, err)
	}
	if err := engine.CheckABI(p.Manifest.Name, info, caps); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.WasmPath, err)
	}
	// A batch timeout needs interruptible guests, which cost up to 6x on
	// loop-heavy wazero code (engine.Config.WithInterruptible). Every
	// plugin of a run has one: a guest in an infinite loop must not hold
	// a batch, or a stop, for ever.
	cfg := engine.NewConfig().WithCompilationCacheDir(l.cacheDir).WithLogger(l.log).WithCapabilities(caps).
		WithInterruptible(lim.BatchTimeout > 0)
	if lim.MemoryPages > 0 {
		cfg = cfg.WithMemoryLimitPages(lim.MemoryPages)
	}
	limits := abi.ResponseLimits{}
	if lim.MaxResponseBytes > 0 {
		cfg = cfg.WithMaxResponseBytes(uint32(min(lim.MaxResponseBytes, 1<<32-1)))
		limits.MaxBytes = int(lim.MaxResponseBytes)
	}
	var eng engine.Engine
	if engineName == plugins.EngineWasmtime {
		if eng, err = engine.NewWasmtime(cfg); err != nil {
			return nil, nil, fmt.Errorf("plugin %q (%s): %w", p.Manifest.Name, p.ManifestPath(), err)
		}
	} else if eng, err = engine.NewWazero(ctx, cfg); err != nil {
		return nil, nil, err
	}
	l.keep(eng)
	mod, err := eng.Compile(ctx, p.Manifest.Name, wasm)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.WasmPath, err)
	}
	tenantName := ""
	if tenant != nil {
		tenantName = tenant.Name
	}
	l.log.Info("plugin compiled", "plugin", p.Manifest.Name, "version", p.Manifest.Version, "tenant", tenantName, "engine", engineName,
		"memory_pages", lim.MemoryPages, "batch_timeout", lim.BatchTimeout, "max_response_bytes", lim.MaxResponseBytes)
	return &compute.WASM{Module: mod, Limits: limits, BatchTimeout: lim.BatchTimeout}, eng, nil
}

// tighter returns the smaller of a limit the manifest asks for and a
// quota; 0 is no limit.
func tighter[T uint32 | int64 | time.Duration](asked, quota T) T {
	if asked == 0 || quota != 0 && quota < asked {
		return quota
	}
	return asked
}

// checkPolicy refuses a plugin whose manifest grants a capability its
// tenant's policy forbids.
func checkPolicy(p *plugins.Plugin, t *spec.Tenant) error {
	refuse := func(c spec.Capability, what string) error {
		return fmt.Errorf("plugin %q (%s): its manifest grants %s (capabilities), which tenant %q forbids (tenants: forbid: [%s])",
			p.Manifest.Name, p.ManifestPath(), what, t.Name, c)
	}
	if p.Manifest.Capabilities.Clock && t.Forbids(spec.CapabilityClock) {
		return refuse(spec.CapabilityClock, "the real clock")
	}
	if len(p.Manifest.Capabilities.ReadOnlyDirs) > 0 && t.Forbids(spec.CapabilityReadOnlyDirs) {
		return refuse(spec.CapabilityReadOnlyDirs, fmt.Sprintf("read-only directories %v", p.Manifest.Capabilities.ReadOnlyDirs))
	}
	return nil
}

func capabilities(p *plugins.Plugin) (engine.Capabilities, error) {
	var caps engine.Capabilities
	if p.Manifest.Capabilities.Clock {
		caps = caps.WithClock()
	}
	dirs, err := p.ReadOnlyDirs()
	if err != nil {
		return caps, err
	}
	for i, d := range dirs {
		caps = caps.WithReadOnlyDir(d, "/"+filepath.ToSlash(p.Manifest.Capabilities.ReadOnlyDirs[i]))
	}
	return caps, nil
}

// ValidatePlugin checks the plugin directory dir as `flowhost plugin
// validate` does: manifest, checksum, module framing, exports, ABI version
// and imports. It returns every problem found; none means valid.
func ValidatePlugin(dir string) (*plugins.Plugin, []error) {
	p, err := plugins.Load(dir)
	if err != nil {
		return nil, []error{err}
	}
	if errs := plugins.Validate(p); len(errs) > 0 {
		return p, errs
	}
	wasm, err := p.ReadWasm()
	if err != nil {
		return p, []error{err}
	}
	caps, err := capabilities(p)
	if err != nil {
		return p, []error{err}
	}
	info, err := engine.Inspect(wasm)
	if err != nil {
		return p, []error{fmt.Errorf("%s: %w", p.WasmPath, err)}
	}
	if err := engine.CheckABI(p.Manifest.Name, info, caps); err != nil {
		return p, []error{fmt.Errorf("%s: %w", p.WasmPath, err)}
	}
	return p, nil
}

// listenMetrics listens on addr. An address in use (two pipelines on one
// machine share the default) is either replaced by a free port of the same
// host, logged, when fallback is set, or refused with an error that names
// the flag which changes it.
func listenMetrics(addr string, fallback bool, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	if fallback {
		if host, _, splitErr := net.SplitHostPort(addr); splitErr == nil {
			if ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
				log.Warn("metrics address in use (another flowhost?): serving metrics on a free port instead; choose one with --metrics-addr",
					"busy", addr, "addr", ln.Addr().String())
				return ln, nil
			}
		}
	}
	return nil, fmt.Errorf("--metrics-addr %s: address already in use (another flowhost?); give another with --metrics-addr, or --metrics-addr '' to turn metrics off", addr)
}

// PluginCheck is what validating one plugin directory found.
type PluginCheck struct {
	// Dir is the plugin directory; or the directory given, when it is
	// neither a plugin directory nor a folder of them.
	Dir string
	// Plugin is the plugin; nil when its manifest could not be loaded.
	Plugin *plugins.Plugin
	// Errs are the problems found; none means the plugin is valid.
	Errs []error
}

// ValidatePlugins checks, with [ValidatePlugin], every plugin directory
// that dirs stand for, as `flowhost plugin validate` does: each of dirs
// is a plugin directory or a folder of them, read as `run --plugins`
// reads it (plugins.DirsIn). It returns one check per plugin directory,
// in order, and one for each given directory that is neither; a
// directory reached twice is checked once, and a plugin whose name an
// earlier one has is reported as a duplicate, as run refuses it.
func ValidatePlugins(dirs []string) []PluginCheck {
	var checks []PluginCheck
	seen := map[string]bool{}
	manifestOf := map[string]string{} // plugin name -> its manifest
	for _, given := range dirs {
		pluginDirs, err := plugins.DirsIn(given)
		if err != nil {
			checks = append(checks, PluginCheck{Dir: filepath.Clean(given), Errs: []error{err}})
		}
		for _, dir := range pluginDirs {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			p, errs := ValidatePlugin(dir)
			if p != nil {
				if other, dup := manifestOf[p.Manifest.Name]; dup {
					errs = append(errs, fmt.Errorf("duplicate plugin name %q: %s and %s", p.Manifest.Name, other, p.ManifestPath()))
				} else {
					manifestOf[p.Manifest.Name] = p.ManifestPath()
				}
			}
			checks = append(checks, PluginCheck{Dir: dir, Plugin: p, Errs: errs})
		}
	}
	return checks
}

func compilationCacheDir(dir string) (string, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("compilation cache: %w (set --cache-dir)", err)
		}
		dir = filepath.Join(base, "flowhost", "wazero")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("compilation cache: %w", err)
	}
	return dir, nil
}

// serveMetrics serves /metrics, /status (the runtime's Status as JSON),
// the operator's page and API of view and, with a store, SavepointPath on
// addr until stop is called, over TLS and behind a bearer token when
// listen has them. When addr is in use and fallback is set, it serves on
// a free port of the same host instead.
func serveMetrics(addr string, fallback bool, g prometheus.Gatherer, status func() runtime.Status, savepoints http.Handler, log *slog.Logger, onListen func(string),
	view *opview.Server, listen opview.Listen) (stop func(), err error) {
	ln, err := listenMetrics(addr, fallback, log)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(status())
	})
	if savepoints != nil {
		mux.Handle(SavepointPath, savepoints)
	}
	view.Register(mux)
	base, stop := serveHTTP(ln, listen, mux, log, view.Close)
	log.Info("serving metrics", "addr", base+"/metrics")
	log.Info("serving the operator's page", "addr", base+"/")
	if onListen != nil {
		onListen(ln.Addr().String())
	}
	return stop, nil
}

// serveHTTP serves h on ln with the metrics address's security (TLS, the
// bearer token) until stop, which calls onShutdown; base is the URL of
// the address.
func serveHTTP(ln net.Listener, listen opview.Listen, h http.Handler, log *slog.Logger, onShutdown func()) (base string, stop func()) {
	srv := &http.Server{Handler: opview.Protect(listen.Token, h), ReadHeaderTimeout: 5 * time.Second, TLSConfig: listen.TLS}
	if onShutdown != nil {
		srv.RegisterOnShutdown(onShutdown)
	}
	base = "http://" + ln.Addr().String()
	if listen.TLS != nil {
		ln, base = tls.NewListener(ln, listen.TLS), "https://"+ln.Addr().String()
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return base, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

// stateLookup is the API's state lookup of the run: nil unless cfg
// enables it. It reads the store's committed state, never a partition's
// uncommitted batch; a run in memory has none to read.
func stateLookup(cfg *RunConfig, pipe *spec.Pipeline, st *store.Store) func(computation, key string) (opview.StateValue, error) {
	if !cfg.EnableStateLookup {
		return nil
	}
	return func(computation, key string) (opview.StateValue, error) {
		if st == nil {
			return opview.StateValue{}, errors.New("state lookup reads the store: this run is --in-memory")
		}
		i := slices.IndexFunc(pipe.Computations, func(c spec.Computation) bool { return c.Name == computation })
		if i < 0 {
			return opview.StateValue{}, fmt.Errorf("no computation %q in pipeline %q", computation, pipe.Name)
		}
		part := ordering.PartitionOf(key, max(1, pipe.Computations[i].Partitions))
		v, ok, err := st.State(computation, part, key)
		if err != nil {
			return opview.StateValue{}, fmt.Errorf("computation %q partition %d key %q: %w", computation, part, key, err)
		}
		return opview.StateValue{Computation: computation, Key: key, Partition: part, Found: ok, Value: v}, nil
	}
}
