package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// printJoined prints the first n joined records as an aligned table.
func printJoined(w io.Writer, joined []joinedRecord, n int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   ORDER\tCUSTOMER\tORDERED AT\tPAID AT\tPAID AFTER\tMESSAGE_ID")
	for _, j := range joined[:min(n, len(joined))] {
		ordered, paid := clock(j.OrderedAt), clock(j.PaidAt)
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\t%s\t%s\n", j.OrderID, j.Customer, ordered, paid, after(j.OrderedAt, j.PaidAt), j.MessageID)
	}
	tw.Flush()
}

// clock shows the time of day of an RFC 3339 timestamp.
func clock(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.Format("15:04:05.000")
}

func after(from, to string) string {
	a, err1 := time.Parse(time.RFC3339Nano, from)
	b, err2 := time.Parse(time.RFC3339Nano, to)
	if err1 != nil || err2 != nil {
		return "?"
	}
	return b.Sub(a).Round(time.Second).String()
}

// printFigure prints the inversion figure of the two runs and what it
// means.
func printFigure(w io.Writer, ev, al *result, lag [2]time.Duration) {
	row := func(label, b, a string) { fmt.Fprintf(w, "   %-32s %20s %20s\n", label, b, a) }
	row("", al.mode.label+" raw alignment", ev.mode.label+" bias + delays")
	row("messages delivered to the join", thousands(al.inv.Deliveries), thousands(ev.inv.Deliveries))
	row("inversions (event_ts went back)", thousands(al.inv.Count), thousands(ev.inv.Count))
	row("how far back, in total", human(al.inv.Total), human(ev.inv.Total))
	row("how far back, on average", human(al.inv.Mean()), human(ev.inv.Mean()))
	row("how far back, at most", human(al.inv.Max), human(ev.inv.Max))
	row("mean bias of payments / orders", human(al.bias["payments"])+" / "+human(al.bias["orders"]),
		human(ev.bias["payments"])+" / "+human(ev.bias["orders"]))

	fmt.Fprintf(w, "\n   Inversions: %s with raw alignment vs %s with bias+delays (%s).\n",
		thousands(al.inv.Count), thousands(ev.inv.Count), compare(float64(al.inv.Count), float64(ev.inv.Count), "fewer", "more", "about as many"))
	fmt.Fprintf(w, "   How far back in total: %s with raw alignment vs %s with bias+delays (%s).\n",
		human(al.inv.Total), human(ev.inv.Total), compare(float64(al.inv.Total), float64(ev.inv.Total), "less", "more", "about as far"))

	fmt.Fprintf(w, `
What the figure means
   An inversion is a message the join received right after one that happened later:
   its event time went back. Payments reach their queue %[1]s-%[2]s after they are made,
   orders within a second. (b) merges the streams on the write time, so a payment
   arrives among orders placed minutes after it. (a) adds each stream's bias, the
   average event_ts - write_ts of its buffered messages (%[3]s for payments, %[4]s for
   orders): each stream competes at about its event time, so the join steps back less far.
`, human(lag[0]), human(lag[1]), human(ev.bias["payments"]), human(ev.bias["orders"]))
	if spread := (lag[1] - lag[0]) / 2; spread >= time.Second {
		fmt.Fprintf(w, `   The bias corrects a stream's average lag, not each message's own: a payment can
   still land up to %[1]s from its place among the orders, and each misplaced one is
   an inversion, which is why the count falls far less than the distance (try
   -lag-min 4m -lag-max 4m: one lag for every payment).
`, human(spread))
	}
	if d, ok := ev.join.InputOrdering.StreamDelays["payments"]; ok && d > 0 {
		fmt.Fprintf(w, "   stream_delays holds payments %s behind orders of the same moment, by design.\n", human(d))
	}
	fmt.Fprintf(w, `   Both files are read in step (the host's source gate sends the record with the
   earliest priority first across source streams), and within one stream messages
   keep their (write time, id) order, so payments made out of order stay so.
   The join runs with batch.max_rows %[1]d: a batch hands its messages to the guest key
   by key, which regroups them in the trace (try -max-rows 0).
`, ev.join.Batch.MaxRows)
}

// compare says how much smaller b is than a.
func compare(a, b float64, fewer, more, same string) string {
	switch {
	case a == 0 && b == 0:
		return "none in either"
	case b == 0:
		return "none with bias+delays"
	case a == 0:
		return "none with raw alignment"
	case a/b >= 1.1:
		return fmt.Sprintf("%.1fx %s", a/b, fewer)
	case b/a >= 1.1:
		return fmt.Sprintf("%.1fx %s", b/a, more)
	}
	return same
}

// human writes a duration for people: 67h20m, 2m43.1s, 250ms.
func human(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d == 0:
		s = "0"
	case d >= time.Hour:
		d = d.Round(time.Minute)
		s = fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute && d%time.Minute == 0:
		s = fmt.Sprintf("%dm", d/time.Minute)
	case d >= time.Second:
		s = d.Round(100 * time.Millisecond).String()
	default:
		s = d.Round(time.Millisecond).String()
	}
	if neg {
		return "-" + s
	}
	return s
}

// thousands writes n with comma separators: 12,345.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
