package runtime

import (
	"context"
	"fmt"
	"golang.org/x/time/rate"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
	"github.com/flowhost/flowhost/ordering"
)

// Source produces the records of one source stream; see package connect
// for the file, HTTP and generator sources.
type Source = connect.Source

// sourceStream is the source queue of one source stream: records are
// appended per partition as the connector accepts them (WriteTimestamp
// taken there) and read in partition priority, earliest WriteTimestamp
// first. On a durable storage, appended records are committed in groups
// before the reader sees them (ingest); the reader commits each group it
// routes, with its read positions, before handing it over.
type sourceStream struct {
	rt     *Runtime
	spec   *spec.Source
	stream *stream
	conn   Source

	// storedWM is the watermarks last committed for the stream (reader
	// goroutine only).
	storedWM store.Watermarks

	mu        sync.Mutex
	cond      *sync.Cond
	parts     []sourcePartition
	queued    int64 // bytes appended (committed or not) and not yet read
	capBytes  int64
	pm        *ordering.PartitionMerge
	eventWM   *ordering.SourceWatermark
	systemWM  *ordering.SourceSystemWatermark
	ingestEnd bool // the connector returned
	endOfData bool // it returned because its data ended, not on interrupt
	// bias is the stream's running EventTimestamp - AlignmentTimestamp
	// over the records queued here (the source's output buffer); gateIdx
	// is the stream's place in the runtime's sourceGate, and gateBias
	// whether the gate orders it by stabilized priority (false when every
	// reader merges on raw alignment).
	bias     ordering.Bias
	gate     *sourceGate
	gateIdx  int
	gateBias bool
	mRecords prometheus.Counter

	// The ingest group (durable storage): records appended since the last
	// commit, invisible to the reader until their batch commits. commitMu
	// keeps one commit at a time (the connector's goroutine and the linger
	// timer both commit).
	commitMu   sync.Mutex
	pending    []pendingRecord
	pendingLen int64
	batch      StorageBatch
	resume     []byte // the connector's position after the last pending record
	linger     *time.Timer
	// Idempotency keys of the pending group and of the group being
	// committed: a retry that arrives before its first copy committed is
	// caught here, later ones in the store.
	pendingIDs, committingIDs map[string]struct{}
	mDuplicates               prometheus.Counter
	// limiter paces the source to its tenant's quotas.ingest_rate (shared
	// by the tenant's sources); nil: no cap.
	limiter    *rate.Limiter
	mThrottled prometheus.Counter

	// Idleness (idle.go), under mu: idle while every partition is idle;
	// idleTimer looks again when a partition may turn idle (idleArmed:
	// it is set), until the reader ends (readEnd).
	idle       bool
	idleArmed  bool
	readEnd    bool
	idleTimer  *time.Timer
	mIdleParts prometheus.Gauge
	// held is the all-or-nothing group the connector is emitting (records
	// with More), appended only once it ends; only the connector's
	// goroutine touches it.
	held []connect.Record
	// roundRobin counts the records accepted from a connector that leaves
	// the partition to the host (connect.Record.RoundRobin): the next one
	// goes to partition roundRobin % partitions. Every accepted record
	// takes exactly one offset of one partition, so after a restart the
	// count is the sum of the partitions' committed append offsets, and a
	// record gets the partition it would have had without the restart.
	roundRobin uint64 // guarded by mu

	// A replay (--from) routes again the records from its start position
	// to replayEnd, each partition's append offset when it started;
	// replay counts them as they are routed (nil: no replay).
	replayEnd []uint64
	replay    *workCounter
}

type sourcePartition struct {
	queue  fifo[ordering.Message] // appended, visible, not yet read
	clock  ordering.SourceClock
	offset uint64  // the next offset to append
	snd    *sender // the partition's reader, as the sender of its routes
	msgs   slab[ordering.Message]
}

type pendingRecord struct {
	part int
	m    *ordering.Message
}

// DefaultSourceQueueBytes bounds what a source may accept ahead of its
// readers; past it the connector blocks (the HTTP source then holds its
// answer until there is room).
const DefaultSourceQueueBytes = 64 << 20

// Group commits of a durable source: ingest commits once this many records
// or bytes are waiting, or when the oldest has waited ingestLinger (or at
// once when the connector asks, as HTTP does before acknowledging); the
// reader commits up to readGroupRows routed records at a time, fewer when
// no more are queued.
const (
	ingestGroupRows  = 4096
	ingestGroupBytes = 4 << 20
	ingestLinger     = 2 * time.Millisecond
	readGroupRows    = 2048
	// memoryReadGroupRows bounds a group routed in memory: large
	// enough to spread the per-group work, small enough that a group's
	// first record does not wait long behind its last.
	memoryReadGroupRows = 256
)

func (r *Runtime) newSourceStream(ss *spec.Source, s *stream) (*sourceStream, error) {
	now := r.opts.now()
	ewm, err := ordering.NewSourceWatermark(ss.Partitions, watermarkConfig(ss), now)
	if err != nil {
		return nil, fmt.Errorf("source %q: watermark: %w", ss.Name, err)
	}
	src := &sourceStream{
		rt:       r,
		spec:     ss,
		stream:   s,
		parts:    make([]sourcePartition, ss.Partitions),
		capBytes: r.opts.sourceCap,
		pm:       ordering.NewPartitionMerge(ss.Partitions),
		eventWM:  ewm,
		systemWM: ordering.NewSourceSystemWatermark(ss.Partitions),
		mRecords: r.metrics.sourceRecords.WithLabelValues(ss.Name, s.name),

		pendingIDs:  map[string]struct{}{},
		mDuplicates: r.metrics.sourceDuplicates.WithLabelValues(ss.Name),
		limiter:     r.ingestLimiter(ss.Tenant),
		mThrottled:  r.metrics.sourceThrottled.WithLabelValues(ss.Name),
		mIdleParts:  r.metrics.sourceIdlePartitions.WithLabelValues(ss.Name),
	}
	src.cond = sync.NewCond(&src.mu)
	src.idleTimer = time.AfterFunc(time.Hour, src.checkIdle)
	src.idleTimer.Stop()
	for i := range src.parts {
		// "source:" keeps a source partition's identity apart from a
		// computation's of the same name (':' is in no valid name): the
		// two number their messages independently, and their queue
		// entries must never collide.
		src.parts[i].snd = newSender(ordering.Sender{Computation: "source:" + s.name, Partition: i}, nil)
	}
	resume, err := src.recover()
	if err != nil {
		return nil, fmt.Errorf("source %q: resuming from the store: %w", ss.Name, err)
	}
	conn, ok := r.opts.sources[ss.Name]
	if !ok {
		if conn, err = r.openSource(ss, resume); err != nil {
			return nil, err
		}
	}
	src.conn = conn
	src.linger = time.AfterFunc(time.Hour, func() {
		if err := src.flushIngest(); err != nil {
			r.fail(err)
		}
	})
	src.linger.Stop()
	return src, nil
}

// watermarkConfig is the event watermark configuration a spec source
// asks for.
func watermarkConfig(ss *spec.Source) ordering.WatermarkConfig {
	return ordering.WatermarkConfig{
		OutOfOrdernessBound: ss.Watermark.OutOfOrdernessBound,
		IdleDuration:        ss.Watermark.IdlePartitions.Duration,
		IdleMaxRatio:        ss.Watermark.IdlePartitions.MaxRatio,
	}
}

// recover restores the source from the storage: each partition's append
// offset, clock, reader TaskIds and the records appended but not yet
// routed (or, for a replay, those from the replay position on), and the
// stream's watermarks. It returns the connector's resume position.
func (src *sourceStream) recover() ([]byte, error) {
	r := src.rt
	st := r.storage
	name := src.stream.name
	now := r.opts.now()
	replay, replaying := r.opts.replay[src.spec.Name]
	if err := src.ensureIngestTimes(now); err != nil {
		return nil, err
	}
	var replayTotal int64
	if replaying {
		src.replayEnd = make([]uint64, len(src.parts))
	}
	for i := range src.parts {
		p := &src.parts[i]
		ip, _, err := st.Ingest(name, i)
		if err != nil {
			return nil, err
		}
		p.offset = ip.Next
		src.roundRobin += ip.Next
		p.clock = ordering.NewSourceClock(ip.Clock)
		rp, _, err := st.Read(name, i)
		if err != nil {
			return nil, err
		}
		p.snd = newSender(p.snd.id, rp.Tasks)
		from := rp.Next
		if replaying {
			if from, err = replay.offset(st, name, i, ip.Next); err != nil {
				return nil, err
			}
			r.log.Info("replaying a source partition", "source", src.spec.Name, "partition", i, "from", from, "to", ip.Next)
			src.replayEnd[i] = ip.Next
			if ip.Next > from {
				replayTotal += int64(ip.Next - from)
			}
		}
		unrouted := 0
		err = st.SourceRecords(name, i, from, func(_ uint64, m *ordering.Message) error {
			src.queued += m.Footprint()
			src.publish(i, m, now)
			unrouted++
			return nil
		})
		if err != nil {
			return nil, err
		}
		if ip.Next > 0 {
			r.log.Info("source partition resumed from its last commit", "source", src.spec.Name, "partition", i,
				"appended", ip.Next, "routed", from, "to route", unrouted)
		}
	}
	if replaying {
		src.replay = r.work(WorkReplay, src.spec.Name, replayTotal)
	}
	if w, ok, err := st.SourceWatermarks(name); err != nil {
		return nil, err
	} else if ok {
		src.storedWM = w
		src.eventWM.Resume(w.Event)
		for i, maxRead := range w.Partitions {
			if i < len(src.parts) {
				src.eventWM.ResumePartition(i, maxRead)
			}
		}
		src.systemWM.Resume(w.System)
		// Nothing reads yet: set the stream's floor without waking anyone.
		raiseTo(&src.stream.eventWM, w.Event)
		raiseTo(&src.stream.systemWM, w.System)
	}
	return st.Connector(src.spec.Name)
}

// ensureIngestTimes gives the stored records that have no ingest time
// (stored by a flowhost that did not record it) the time now, so that
// retention keeps them for a full period from this run on.
func (src *sourceStream) ensureIngestTimes(now int64) error {
	st := src.rt.storage
	b := st.NewBatch()
	for i := range src.parts {
		added, err := st.EnsureIngestTimes(b, src.stream.name, i, now)
		if err != nil {
			b.Discard()
			return err
		}
		if added {
			src.rt.log.Info("source records stored without an ingest time count as ingested now for retention", "source", src.spec.Name, "partition", i)
		}
	}
	if b.Len() == 0 {
		b.Discard()
		return nil
	}
	return b.Commit()
}

func (src *sourceStream) wake() {
	src.mu.Lock()
	src.cond.Broadcast()
	src.mu.Unlock()
}

// publish makes an appended record visible to the reader. Called with
// src.mu held.
func (src *sourceStream) publish(part int, m *ordering.Message, now int64) {
	p := &src.parts[part]
	if p.queue.len() == 0 {
		src.pm.Set(part, m.Time.Write)
	}
	src.activeLocked()
	p.queue.push(m)
	src.bias.Add(m.Time)
	src.eventWM.Appended(part, m.Time.Event, now)
	src.systemWM.Appended(part, m.Time.System)
	src.mRecords.Inc()
}

// ingest runs the connector until its data ends or ctx (the user's) is
// cancelled. work is cancelled only on a fatal error.
func (src *sourceStream) ingest(ctx, work context.Context) error {
	err := src.conn.Run(ctx, func(rec connect.Record) error { return src.append(work, rec) })
	if ferr := src.flushIngest(); ferr != nil && err == nil {
		err = ferr
	}
	if perr := src.commitIngestPositions(); perr != nil && err == nil {
		err = perr
	}
	src.mu.Lock()
	src.ingestEnd = true
	src.endOfData = err == nil
	src.cond.Broadcast()
	src.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return nil // interrupted: what was accepted is still read
	}
	if err != nil {
		return fmt.Errorf("source %q: %w", src.spec.Name, err)
	}
	return nil
}

// commitIngestPositions leaves each partition's append position to the
// next run on a storage that is not durable, which commits no ingest group
// (a durable one committed them with each group): the next run then goes
// on with the offsets, and so the message ids, after this one's.
func (src *sourceStream) commitIngestPositions() error {
	st := src.rt.storage
	if st.Durable() {
		return nil
	}
	b := st.NewBatch()
	src.mu.Lock()
	for i := range src.parts {
		p := &src.parts[i]
		b.SetIngest(src.stream.name, i, store.IngestPosition{Next: p.offset, Clock: p.clock.Last()})
	}
	src.mu.Unlock()
	if err := b.Commit(); err != nil {
		return fmt.Errorf("source %q: committing its append positions: %w", src.spec.Name, err)
	}
	return nil
}

// append takes one record from the connector: it gets its offset and
// timestamps here, and is visible to the reader at once, or on a durable
// storage once its group has committed. A record with More is only held: the
// records of an all-or-nothing group are appended together, with the one
// that ends it, so that no commit holds part of a group; an error discards
// the group held so far.
func (src *sourceStream) append(work context.Context, rec connect.Record) error {
	err := src.hold(work, rec)
	if err == nil && rec.More {
		return nil
	}
	if err == nil {
		err = src.appendGroup(work, src.held)
	}
	// The held slice is reused, records dropped, unless a large group
	// made it large.
	clear(src.held)
	src.held = src.held[:0]
	if cap(src.held) > heldReuseRecords {
		src.held = nil
	}
	return err
}

// heldReuseRecords bounds the capacity of the held group kept between
// groups.
const heldReuseRecords = 1024

// hold checks one record and paces it, then adds it to src.held, the
// group being held.
func (src *sourceStream) hold(work context.Context, rec connect.Record) error {
	if !rec.RoundRobin && (rec.Partition < 0 || rec.Partition >= len(src.parts)) {
		return fmt.Errorf("source %q: record %s: partition %d out of range [0,%d)", src.spec.Name, rec.Origin, rec.Partition, len(src.parts))
	}
	if src.limiter != nil {
		// Waiting here holds the connector (an HTTP client waits for its
		// answer), so a tenant over its rate is slowed, never refused.
		started := time.Now()
		if err := src.limiter.Wait(work); err != nil {
			return work.Err()
		}
		src.mThrottled.Add(time.Since(started).Seconds())
	}
	src.held = append(src.held, rec)
	return nil
}

// appendGroup appends the records of one group under one hold of src.mu,
// having waited for room in the source queue for the group as a whole (so
// that one group may take the queue past its bound). The duplicates are
// looked up before anything is appended, so that a failing lookup appends
// none of the group.
func (src *sourceStream) appendGroup(work context.Context, group []connect.Record) error {
	r := src.rt
	src.mu.Lock()
	for src.queued >= src.capBytes && work.Err() == nil {
		if len(src.pending) > 0 { // what waits for the reader may be uncommitted
			src.mu.Unlock()
			if err := src.flushIngest(); err != nil {
				return err
			}
			src.mu.Lock()
			continue
		}
		src.cond.Wait()
	}
	if work.Err() != nil {
		src.mu.Unlock()
		return work.Err()
	}
	var dups map[int]bool       // group indexes of records accepted before
	var inGroup map[string]bool // the ids of the group's earlier records
	for i, rec := range group {
		if rec.ID == "" {
			continue
		}
		dup := inGroup[rec.ID]
		if dup {
			src.mDuplicates.Inc()
		} else {
			var err error
			if dup, err = src.seen(rec.ID); err != nil {
				src.mu.Unlock()
				return err
			}
		}
		if len(group) > 1 {
			if inGroup == nil {
				inGroup = map[string]bool{}
			}
			inGroup[rec.ID] = true
		}
		if dup {
			if dups == nil {
				dups = map[int]bool{}
			}
			dups[i] = true
		}
	}
	now := r.opts.now()
	due := false
	for i, rec := range group {
		if dups[i] {
			due = due || rec.Sync
			continue
		}
		if rec.RoundRobin {
			// After the duplicate check: a record not appended takes no turn.
			rec.Partition = int(src.roundRobin % uint64(len(src.parts)))
			src.roundRobin++
		}
		due = src.appendLocked(rec, now) || due
	}
	src.cond.Broadcast() // records visible at once (see appendLocked)
	src.mu.Unlock()
	if due {
		return src.flushIngest()
	}
	return nil
}

// appendLocked appends one record. On a durable storage it goes to the
// pending ingest group, visible to the reader once the group committed,
// and appendLocked reports whether that group is due to commit; otherwise
// the storage keeps no record, so its append is its commit and the reader
// sees it at once. Called with src.mu held.
func (src *sourceStream) appendLocked(rec connect.Record, now int64) (due bool) {
	st := src.rt.storage
	write := now
	if rec.HasWrite {
		write = rec.Write
	}
	event := write
	if rec.HasEvent {
		event = rec.Event
	}
	p := &src.parts[rec.Partition]
	if src.spec.Type == spec.SourceKafka {
		// A Kafka CreateTime can step back (producers' clocks, retries):
		// the record's WriteTimestamp is raised to the partition's last,
		// kept across restarts with the ingest position, so that it never
		// decreases within a partition, as partition priority and the
		// seed's AlignmentTimestamp rule assume.
		write = max(write, p.clock.Last())
	}
	m := p.msgs.next()
	*m = ordering.Message{
		ID:      ordering.SourceID(src.stream.name, int32(rec.Partition), p.offset),
		Stream:  src.stream.name,
		Key:     rec.Key,
		Time:    p.clock.SourceRecord(event, write),
		Parents: rec.Parents,
		Payload: rec.Payload,
	}
	src.queued += m.Footprint()
	if !st.Durable() {
		p.offset++
		src.publish(rec.Partition, m, now)
		return false
	}
	if src.batch == nil {
		src.batch = st.NewBatch()
	}
	src.batch.AppendSource(src.stream.name, rec.Partition, p.offset, m)
	if rec.ID != "" {
		src.batch.SetIdempotency(src.stream.name, rec.ID, p.offset, m.Time.Event)
		src.pendingIDs[rec.ID] = struct{}{}
	}
	p.offset++
	src.pending = append(src.pending, pendingRecord{part: rec.Partition, m: m})
	src.pendingLen += m.Size()
	if rec.Resume != nil {
		src.resume = rec.Resume
	}
	if len(src.pending) == 1 {
		src.linger.Reset(ingestLinger)
	}
	return rec.Sync || len(src.pending) >= ingestGroupRows || src.pendingLen >= ingestGroupBytes
}

// seen reports whether a record with idempotency key id was accepted
// before; a duplicate is counted and logged. Called with src.mu held.
func (src *sourceStream) seen(id string) (bool, error) {
	_, pending := src.pendingIDs[id]
	_, committing := src.committingIDs[id]
	dup := pending || committing
	if !dup {
		rec, ok, err := src.rt.storage.Idempotent(src.stream.name, id)
		if err != nil {
			return false, err
		}
		dup = ok
		if ok {
			src.rt.log.Debug("duplicate record not appended again", "source", src.spec.Name, "id", id, "offset", rec.Offset)
		}
	}
	if dup {
		src.mDuplicates.Inc()
	}
	return dup, nil
}

// flushIngest commits the pending records with each partition's append
// position and the connector's resume position, then shows them to the
// reader. When it returns nil, every record appended before the call is
// durable.
func (src *sourceStream) flushIngest() error {
	src.commitMu.Lock()
	defer src.commitMu.Unlock()
	src.mu.Lock()
	recs, b, resume := src.pending, src.batch, src.resume
	src.pending, src.batch, src.pendingLen = nil, nil, 0
	src.committingIDs, src.pendingIDs = src.pendingIDs, map[string]struct{}{}
	if len(recs) == 0 {
		src.mu.Unlock()
		return nil
	}
	src.linger.Stop()
	// Each partition's part of the group starts at its first record: the
	// ingest time recorded there is what retention counts from.
	groupStart := map[int]uint64{}
	for _, pr := range recs {
		if _, ok := groupStart[pr.part]; !ok {
			groupStart[pr.part] = pr.m.ID.Root().Seq
		}
	}
	ingested := src.rt.opts.now()
	for part, first := range groupStart {
		p := &src.parts[part]
		b.SetIngest(src.stream.name, part, store.IngestPosition{Next: p.offset, Clock: p.clock.Last()})
		b.SetIngestTime(src.stream.name, part, first, ingested)
	}
	if resume != nil {
		b.SetConnector(src.spec.Name, resume)
	}
	src.mu.Unlock()
	if err := src.rt.metrics.commit("ingest", b); err != nil {
		return fmt.Errorf("source %q: committing %d ingested records: %w", src.spec.Name, len(recs), err)
	}
	if c, ok := src.conn.(connect.ResumeCommitter); ok && resume != nil {
		c.Committed(resume) // a kafka source's group offsets, for monitoring
	}
	src.mu.Lock()
	src.committingIDs = nil
	now := src.rt.opts.now()
	for _, pr := range recs {
		src.publish(pr.part, pr.m, now)
	}
	src.cond.Broadcast()
	src.mu.Unlock()
	return nil
}

// routed is one record the reader has routed and not yet handed over;
// ds[lo:hi] of the group are its deliveries.
type routed struct {
	part   int
	m      *ordering.Message
	lo, hi int
}

// read hands the queued records downstream in partition priority and
// publishes the stream's watermarks after each group has been delivered,
// so a watermark never passes a record that is not yet in a buffer.
// Records are routed in groups that commit, with the partitions' read
// positions, before they are handed over.
func (src *sourceStream) read(work context.Context) error {
	r := src.rt
	defer src.stopIdle()
	// Look at idleness from the start: a source that never gets a record
	// must turn idle too.
	src.mu.Lock()
	w := src.watermarksLocked(r.opts.now())
	src.mu.Unlock()
	src.publishWatermarks(w)
	// Records are delivered in groups of what is queued (never waiting
	// for more): the watermarks are recomputed and published once per
	// group instead of once per record. A durable group's commit costs a
	// sync, so its groups are larger.
	groupRows := memoryReadGroupRows
	if r.storage.Durable() {
		groupRows = readGroupRows
	}
	var group []routed
	var ds []delivery
	flush := func() error {
		err := src.deliverGroup(work, group, ds)
		clear(group)
		clear(ds)
		group, ds = group[:0], ds[:0]
		return err
	}
	for {
		src.mu.Lock()
		part, ok := src.pm.Next()
		if !ok && len(group) > 0 {
			src.mu.Unlock()
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		if !ok {
			// A group commits the watermarks published before it, so
			// the last group's move is stored here, before waiting:
			// otherwise a source that goes quiet (Kafka, HTTP) restarts
			// with a watermark short of what it routed, and the timers
			// that move would fire wait for records that may never come.
			if wm := src.watermarksToStoreLocked(nil); !wm.Equal(src.storedWM) {
				src.mu.Unlock()
				b := r.storage.NewBatch()
				b.SetSourceWatermarks(src.stream.name, wm)
				if err := b.Commit(); err != nil {
					return fmt.Errorf("source %q: committing its watermarks: %w", src.spec.Name, err)
				}
				src.storedWM = wm
				continue
			}
		}
		for !ok && !src.ingestEnd && work.Err() == nil {
			src.gate.empty(src.gateIdx)
			src.cond.Wait()
			part, ok = src.pm.Next()
		}
		if work.Err() != nil {
			src.mu.Unlock()
			return work.Err()
		}
		if !ok { // ingest ended and everything was read
			end := src.endOfData
			wm := src.watermarksToStoreLocked(nil)
			// No idle check after this: a finished stream is never idle.
			src.readEnd = true
			src.idleTimer.Stop()
			src.mu.Unlock()
			b := r.storage.NewBatch()
			b.SetSourceWatermarks(src.stream.name, wm)
			if err := b.Commit(); err != nil {
				return fmt.Errorf("source %q: committing its watermarks: %w", src.spec.Name, err)
			}
			src.gate.end(src.gateIdx)
			src.stream.finish(end)
			return nil
		}
		p := &src.parts[part]
		m := p.queue.pop()
		if p.queue.len() == 0 {
			src.pm.Clear(part)
		} else {
			src.pm.Set(part, p.queue.peek().Time.Write)
		}
		// The record still counts in the source queue until its group
		// has been handed over (deliverGroup): a group held in hand
		// must not let the connector run further ahead.
		prio := m.Time.Alignment
		if src.gateBias {
			prio = src.bias.Stabilized(prio)
		}
		src.bias.Remove(m.Time)
		src.cond.Broadcast()
		src.mu.Unlock()

		if len(group) > 0 && !src.gate.open(src.gateIdx, prio) {
			if err := flush(); err != nil { // don't hold routed records while waiting
				return err
			}
		}
		if err := src.gate.pass(work, src.gateIdx, prio); err != nil {
			return err
		}
		lo := len(ds)
		var err error
		if ds, err = r.plan(work, p.snd, m, ds); err != nil {
			return err
		}
		group = append(group, routed{part: part, m: m, lo: lo, hi: len(ds)})
		if len(group) >= groupRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// watermarksToStoreLocked is what the store keeps of the source's
// watermarks once group (routed, not yet read by the watermark) commits:
// the published values and each partition's largest EventTimestamp
// routed, group included, since a restart does not read those records
// again. Called with src.mu held.
func (src *sourceStream) watermarksToStoreLocked(group []routed) store.Watermarks {
	w := store.Watermarks{Event: src.eventWM.Value(), System: src.systemWM.Value(), Partitions: make([]int64, len(src.parts))}
	for i := range w.Partitions {
		w.Partitions[i] = src.eventWM.MaxRead(i)
	}
	for _, g := range group {
		w.Partitions[g.part] = max(w.Partitions[g.part], g.m.Time.Event)
	}
	return w
}

// deliverGroup commits a group of routed records, hands them over and then
// publishes the watermarks they allow.
func (src *sourceStream) deliverGroup(work context.Context, group []routed, ds []delivery) error {
	if len(group) == 0 {
		return nil
	}
	r := src.rt
	name := src.stream.name
	b := r.storage.NewBatch()
	next := map[int]uint64{}
	for _, g := range group {
		persist(b, src.parts[g.part].snd.id, ds[g.lo:g.hi])
		next[g.part] = max(next[g.part], g.m.ID.Root().Seq+1)
	}
	for part, n := range next {
		b.SetRead(name, part, store.ReadPosition{Next: n, Tasks: src.parts[part].snd.storedTasks()})
	}
	src.mu.Lock()
	src.storedWM = src.watermarksToStoreLocked(group)
	b.SetSourceWatermarks(name, src.storedWM)
	src.mu.Unlock()
	if err := r.metrics.commit("route", b); err != nil {
		return fmt.Errorf("source %q: committing %d routed records: %w", src.spec.Name, len(group), err)
	}
	if src.replay != nil {
		// Counted once committed: a replay interrupted before its commit
		// routes those records again on the next run.
		var replayed int64
		for _, g := range group {
			if g.m.ID.Root().Seq < src.replayEnd[g.part] {
				replayed++
			}
		}
		if replayed > 0 {
			src.replay.add(replayed)
		}
	}
	// Consecutive records of one source partition are delivered together:
	// their deliveries are contiguous in ds, in order.
	for i := 0; i < len(group); {
		j := i + 1
		for j < len(group) && group[j].part == group[i].part {
			j++
		}
		if err := r.deliver(work, src.parts[group[i].part].snd.id, ds[group[i].lo:group[j-1].hi]); err != nil {
			return err
		}
		i = j
	}
	src.mu.Lock()
	now := r.opts.now()
	for _, g := range group {
		src.eventWM.Read(g.part, g.m.Time.Event, now)
		src.systemWM.Read(g.part, g.m.Time.System)
	}
	for _, g := range group {
		src.queued -= g.m.Footprint()
	}
	src.cond.Broadcast() // room in the source queue
	w := src.watermarksLocked(now)
	src.mu.Unlock()
	src.publishWatermarks(w)
	return nil
}
