package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/flowhost/flowhost/ordering"
)

// Report is what a data directory holds, for `flowhost inspect`.
type Report struct {
	Sources     []SourceReport
	Partitions  []PartitionReport
	Queues      []QueueReport
	Sinks       []SinkReport
	StoreBytes  uint64
	RecordCount int
}

// SourceReport is one source partition.
type SourceReport struct {
	Stream    string
	Partition int
	// First is the oldest offset retained, End one past the newest.
	First, End uint64
	// Appended is the next offset ingest gives; Read the first not routed.
	Appended, Read uint64
	Watermarks     Watermarks
}

// PartitionReport is one computation partition.
type PartitionReport struct {
	Computation string
	Partition   int
	Meta        PartitionMeta
	HasMeta     bool
	Timers      int
	// States are the keys with state and their sizes in bytes, by key.
	States []KeyState
}

// KeyState is one key's state size.
type KeyState struct {
	Key   string
	Bytes int
}

// QueueReport is one destination's queue of committed, unconsumed
// messages.
type QueueReport struct {
	Dest     Dest
	Messages int
	Bytes    int
}

// SinkReport is one sink's committed position and log.
type SinkReport struct {
	Name             string
	Position         SinkPosition
	LogFirst, LogEnd uint64
	LogRecords       int
}

// Inspect reads the whole store once and summarises it.
func (s *Store) Inspect() (*Report, error) {
	rep := &Report{StoreBytes: s.DiskBytes()}
	type srcKey struct {
		stream string
		part   int
	}
	sources := map[srcKey]*SourceReport{}
	source := func(stream string, part int) *SourceReport {
		k := srcKey{stream, part}
		if sources[k] == nil {
			sources[k] = &SourceReport{Stream: stream, Partition: part}
		}
		return sources[k]
	}
	parts := map[srcKey]*PartitionReport{}
	partition := func(comp string, part int) *PartitionReport {
		k := srcKey{comp, part}
		if parts[k] == nil {
			parts[k] = &PartitionReport{Computation: comp, Partition: part}
		}
		return parts[k]
	}
	queues := map[Dest]*QueueReport{}
	type takenBy struct {
		d    Dest
		from ordering.Sender
	}
	taken := map[takenBy]ordering.TaskID{}
	sinks := map[string]*SinkReport{}
	sink := func(name string) *SinkReport {
		if sinks[name] == nil {
			sinks[name] = &SinkReport{Name: name}
		}
		return sinks[name]
	}
	watermarks := map[string]Watermarks{}
	err := s.scan(keyBuf{}, nil, "all records", func(key, v []byte) error {
		rep.RecordCount++
		if len(key) == 0 {
			return s.corrupt("all records", fmt.Errorf("empty key"))
		}
		r := keyReader{b: key[1:]}
		switch key[0] {
		case tableSource:
			sr := source(r.str("stream"), r.u32("partition"))
			off := r.u64("offset")
			if sr.End == 0 && sr.First == 0 {
				sr.First = off
			}
			sr.End = off + 1
		case tableIngest:
			sr := source(r.str("stream"), r.u32("partition"))
			var p IngestPosition
			if err := decMode.Unmarshal(v, &p); err != nil {
				return s.corrupt("ingest position", err)
			}
			sr.Appended = p.Next
		case tableRead:
			sr := source(r.str("stream"), r.u32("partition"))
			var p ReadPosition
			if err := decMode.Unmarshal(v, &p); err != nil {
				return s.corrupt("read position", err)
			}
			sr.Read = p.Next
		case tableSourceWM:
			var w Watermarks
			if err := decMode.Unmarshal(v, &w); err != nil {
				return s.corrupt("source watermarks", err)
			}
			watermarks[r.str("stream")] = w
		case tableTaken: // sorts before tableQueue: read before the queues
			d := Dest{Sink: r.str("dest kind") == "k", Name: r.str("dest"), Partition: r.u32("dest partition")}
			from := ordering.Sender{Computation: r.str("sender"), Partition: r.u32("sender partition")}
			task, _ := binary.Uvarint(v)
			taken[takenBy{d, from}] = ordering.TaskID(task)
		case tableQueue:
			d := Dest{Sink: r.str("dest kind") == "k", Name: r.str("dest"), Partition: r.u32("dest partition")}
			from := ordering.Sender{Computation: r.str("sender"), Partition: r.u32("sender partition")}
			task := ordering.TaskID(r.u64("task"))
			q := queues[d]
			if q == nil {
				q = &QueueReport{Dest: d}
				queues[d] = q
			}
			n := ordering.TaskID(1)
			if isRun(v) {
				count, _ := binary.Uvarint(v[1:])
				n = ordering.TaskID(count)
			}
			// What the sink took of a run it took in part is not queued.
			if through := taken[takenBy{d, from}]; task > through {
				q.Messages += int(min(n, task-through))
			}
			q.Bytes += len(v)
		case tableState:
			p := partition(r.str("computation"), r.u32("partition"))
			p.States = append(p.States, KeyState{Key: r.rest(), Bytes: len(v)})
		case tableTimer:
			partition(r.str("computation"), r.u32("partition")).Timers++
		case tablePartition:
			p := partition(r.str("computation"), r.u32("partition"))
			if err := decMode.Unmarshal(v, &p.Meta); err != nil {
				return s.corrupt("partition metadata", err)
			}
			p.HasMeta = true
		case tableSink:
			sk := sink(r.str("sink"))
			if err := decMode.Unmarshal(v, &sk.Position); err != nil {
				return s.corrupt("sink position", err)
			}
		case tableSinkLog:
			sk := sink(r.str("sink"))
			seq := r.u64("seq")
			if sk.LogRecords == 0 {
				sk.LogFirst = seq
			}
			sk.LogEnd = seq + 1
			sk.LogRecords++
		}
		return r.err
	})
	if err != nil {
		return nil, err
	}
	for _, sr := range sources {
		sr.Watermarks = watermarks[sr.Stream]
		rep.Sources = append(rep.Sources, *sr)
	}
	slices.SortFunc(rep.Sources, func(a, b SourceReport) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Partition, b.Partition))
	})
	for _, p := range parts {
		rep.Partitions = append(rep.Partitions, *p)
	}
	slices.SortFunc(rep.Partitions, func(a, b PartitionReport) int {
		return cmp.Or(cmp.Compare(a.Computation, b.Computation), cmp.Compare(a.Partition, b.Partition))
	})
	for _, q := range queues {
		rep.Queues = append(rep.Queues, *q)
	}
	slices.SortFunc(rep.Queues, func(a, b QueueReport) int { return cmp.Compare(a.Dest.String(), b.Dest.String()) })
	for _, sk := range sinks {
		rep.Sinks = append(rep.Sinks, *sk)
	}
	slices.SortFunc(rep.Sinks, func(a, b SinkReport) int { return cmp.Compare(a.Name, b.Name) })
	return rep, nil
}
