package opview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Format writes snap as flowhost status prints it: the graph, then a table
// per part of the view. It writes what the page shows, in text.
func Format(w io.Writer, snap Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	now := time.Unix(0, snap.Time)
	p("pipeline %s at %s\n", snap.Pipeline.Name, now.UTC().Format(time.RFC3339))

	p("\ngraph\n")
	for _, n := range snap.Pipeline.Nodes {
		var outs []string
		for _, e := range snap.Pipeline.Edges {
			if e.From == n.ID {
				outs = append(outs, fmt.Sprintf("%s -> %s", e.Stream, e.To))
			}
		}
		tenant := ""
		if n.Tenant != "" {
			tenant = " tenant " + n.Tenant
		}
		q := ""
		if n.Quarantined > 0 {
			q = fmt.Sprintf(" QUARANTINED %d", n.Quarantined)
		}
		p("  %s (%s%s)%s\t%s\n", n.ID, n.Type, tenant, q, strings.Join(outs, ", "))
	}

	p("\nstreams\tin/s\tout/s\tin\tout\tbuffered\tbias\tevent watermark\tsystem watermark\tlag\n")
	for _, s := range snap.Streams {
		lagText := duration(s.LagNanos)
		if s.BrokerLag != nil {
			lagText += fmt.Sprintf(" (broker %d)", *s.BrokerLag)
		}
		state := ""
		switch {
		case s.Finished:
			state = " (ended)"
		case s.Idle:
			state = " (idle)"
		}
		p("  %s%s\t%.1f\t%.1f\t%d\t%d\t%d msgs, %s\t%s\t%s\t%s\t%s\n", s.Name, state, s.RateIn, s.RateOut, s.In, s.Out,
			s.BufferedMessages, bytesText(s.BufferedBytes), time.Duration(s.BiasNanos), wmText(s.EventWatermark), wmText(s.SystemWatermark), lagText)
	}
	if h := snap.WatermarkHold; h != nil {
		p("\nevent time held back by")
		if h.Stream != "" {
			p(" stream %s at %s", h.Stream, wmText(h.StreamWatermark))
		}
		if h.Computation != "" {
			p(", partition %s/p%d at %s", h.Computation, h.Partition, wmText(h.PartitionWatermark))
		}
		p(" (lag %s)\n", duration(h.LagNanos))
	}

	p("\npartitions\towner\tepoch\tqueued\tlast batch\ttimers\tstate\tevent watermark\n")
	for _, pt := range snap.Partitions {
		last := "-"
		if pt.LastBatchAt > 0 {
			last = fmt.Sprintf("%d rows in %s", pt.LastBatchRows, time.Duration(pt.LastBatchNanos).Round(time.Microsecond))
		}
		q := ""
		if pt.Quarantine != "" {
			q = " QUARANTINED"
		}
		p("  %s/p%d%s\t%s\t%d\t%d\t%s\t%d\t%d keys, %s\t%s\n", pt.Computation, pt.Partition, q, pt.Owner, pt.Epoch, pt.Queued, last,
			pt.PendingTimers, pt.StateKeys, bytesText(pt.StateBytes), wmText(pt.EventWatermark))
	}

	if len(snap.Progress) > 0 {
		p("\nprogress\tdone\ttotal\tpercent\trate/s\teta\n")
		for _, pr := range snap.Progress {
			p("  %s %s\t%d\t%d\t%s\t%.1f\t%s\n", pr.Kind, pr.Name, pr.Done, pr.Total, percentText(pr.Done, pr.Total), pr.Rate, etaText(pr))
		}
	}

	p("\ntenants\tweight\tcpu share\tworker time\tthrottled\tquota refusals\n")
	for _, t := range snap.Tenants {
		p("  %s\t%d (%.0f%%)\t%.0f%%\t%.1fs\t%.1fs\t%d\n", t.Name, t.Weight, 100*t.WeightShare, 100*t.CPUShare, t.WorkerSeconds, t.ThrottledSeconds, t.QuotaRefusals)
	}

	p("\nquarantines: %d\n", len(snap.Quarantines))
	for _, q := range snap.Quarantines {
		p("  %s/p%d\t%s\n", q.Computation, q.Partition, q.Reason)
	}
	p("\ndead letters: %d\n", snap.DeadLetters.Total)
	for _, node := range sortedKeys(snap.DeadLetters.ByNode) {
		p("  %s\t%d\n", node, snap.DeadLetters.ByNode[node])
	}
	if n := len(snap.DeadLetters.Latest); n > 0 {
		p("latest:\n")
		for _, d := range snap.DeadLetters.Latest[max(0, n-5):] {
			p("  %s\t%s\t%s\t%s\n", time.Unix(0, d.Time).UTC().Format(time.RFC3339), d.Node, d.Stage, d.Cause)
		}
	}
	return tw.Flush()
}

func percentText(done, total int64) string {
	if total <= 0 {
		return "100%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(min(done, total))/float64(total))
}

// etaText is the time left, "done" once finished, "-" while it cannot be
// told (no progress over the rate window).
func etaText(pr Progress) string {
	switch {
	case pr.Finished:
		return "done"
	case pr.ETANanos == nil:
		return "-"
	}
	return time.Duration(*pr.ETANanos).Round(time.Second).String()
}

func wmText(wm *int64) string {
	switch {
	case wm == nil:
		return "none yet"
	case *wm == EndOfStream:
		return "end"
	}
	return time.Unix(0, *wm).UTC().Format("2006-01-02T15:04:05.000Z")
}

func duration(d *int64) string {
	if d == nil {
		return "-"
	}
	return time.Duration(*d).Round(time.Millisecond).String()
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
