package spec

import (
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowhost/flowhost/plugins/suggest"
)

// nameExpected describes a valid name. Names end up in file names, metric
// labels and message ids, hence the small alphabet.
const nameExpected = "a name of at most 128 letters, digits, '.', '_' or '-', starting with a letter or digit"

func validName(s string) bool {
	if s == "" || len(s) > 128 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validator checks the meaning of a decoded spec, collecting every error.
type validator struct {
	p    *Pipeline
	errs ErrorList
}

// validate checks everything Parse guarantees beyond form.
func validate(p *Pipeline) ErrorList {
	v := &validator{p: p}
	if p.Name == "" {
		v.errorf("name", "required; expected %s", nameExpected)
	} else {
		v.name("name", p.Name)
	}
	v.streams()
	v.sources()
	v.computations()
	v.sinks()
	v.deadLetter()
	v.retention()
	v.cluster()
	v.httpEndpoints()
	v.references()
	v.tenants()
	v.cycles()
	return v.errs
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.p.src.errorAt(path, format, args...))
}

// at returns "line:column" of the node at path, for errors that mention a
// second place.
func (v *validator) at(path string) string {
	e := v.p.src.errorAt(path, "")
	return strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column)
}

// name checks a name that is present (possibly empty).
func (v *validator) name(path, s string) bool {
	if !validName(s) {
		v.errorf(path, "expected %s; got %q", nameExpected, s)
		return false
	}
	return true
}

// requiredName checks a name that must be present.
func (v *validator) requiredName(path, s string) bool {
	if s == "" {
		v.errorf(path, "required; expected %s", nameExpected)
		return false
	}
	return v.name(path, s)
}

// unique reports the second use of a name within one section; first maps
// names to the path of their first use.
func (v *validator) unique(first map[string]string, path, what, name string) {
	if prev, ok := first[name]; ok {
		v.errorf(path, "duplicate %s name %q; first defined at %s", what, name, v.at(prev))
		return
	}
	first[name] = path
}

// fields checks a list of payload field names (group_by, partition_by):
// each a top-level field or a dot-separated path into nested objects, as
// the key extractor reads them.
func (v *validator) fields(path string, names []string) {
	seen := map[string]bool{}
	for i, f := range names {
		p := indexPath(path, i)
		switch {
		case f == "":
			v.errorf(p, "expected a payload field name; got an empty string")
		case slices.Contains(strings.Split(f, "."), ""):
			v.errorf(p, "field %q has an empty path segment; expected field names joined by single dots, such as user.id", f)
		case seen[f]:
			v.errorf(p, "duplicate field %q", f)
		}
		seen[f] = true
	}
}

// partitions checks a partition count: at least 1, at most MaxPartitions.
func (v *validator) partitions(path string, n int) {
	v.atLeast(path, int64(n), 1)
	if n > MaxPartitions {
		v.errorf(path, "expected at most %d; got %d", MaxPartitions, n)
	}
}

// streamList checks the names in a list of streams and that none repeats.
func (v *validator) streamList(path string, names []string) {
	seen := map[string]bool{}
	for i, s := range names {
		p := indexPath(path, i)
		if v.requiredName(p, s) && seen[s] {
			v.errorf(p, "stream %q is listed twice", s)
		}
		seen[s] = true
	}
}

func (v *validator) atLeast(path string, got, least int64) {
	if got < least {
		v.errorf(path, "expected at least %d; got %d", least, got)
	}
}

func (v *validator) streams() {
	first := map[string]string{}
	for i, s := range v.p.Streams {
		path := indexPath("streams", i)
		if v.requiredName(fieldPath(path, "name"), s.Name) {
			v.unique(first, fieldPath(path, "name"), "stream", s.Name)
		}
	}
}

func (v *validator) sources() {
	if len(v.p.Sources) == 0 {
		v.errorf("sources", "a pipeline needs at least one source")
	}
	first := map[string]string{}
	for i := range v.p.Sources {
		s := &v.p.Sources[i]
		path := indexPath("sources", i)
		if v.requiredName(fieldPath(path, "name"), s.Name) {
			v.unique(first, fieldPath(path, "name"), "source", s.Name)
		}
		if s.Type == "" {
			v.errorf(fieldPath(path, "type"), "required; expected one of %s", strings.Join(s.Type.values(), ", "))
		}
		v.requiredName(fieldPath(path, "stream"), s.Stream)
		v.partitions(fieldPath(path, "partitions"), s.Partitions)
		v.fields(fieldPath(path, "partition_by"), s.PartitionBy)
		v.block(path, string(s.Type), "file", s.File != nil, s.Type == SourceFile)
		v.block(path, string(s.Type), "http", s.HTTP != nil, s.Type == SourceHTTP)
		v.block(path, string(s.Type), "generator", s.Generator != nil, false)
		v.block(path, string(s.Type), "kafka", s.Kafka != nil, s.Type == SourceKafka)
		if s.Kafka != nil {
			v.kafkaSource(path, s)
		}
		v.sourceFormat(path, s)
		if s.File != nil {
			v.filePath(fieldPath(path, "file.path"), s.File.Path)
		}
		if s.HTTP != nil {
			v.http(fieldPath(path, "http"), s.HTTP)
		}
		if g := s.Generator; g != nil {
			gp := fieldPath(path, "generator")
			v.atLeast(fieldPath(gp, "count"), g.Count, 0)
			if !(g.Rate >= 0) || math.IsInf(g.Rate, 0) {
				v.errorf(fieldPath(gp, "rate"), "expected a finite number of records per second, at least 0; got %v", g.Rate)
			} else if g.Rate > 0 && float64(time.Second)/g.Rate >= math.MaxInt64 {
				v.errorf(fieldPath(gp, "rate"), "expected 0 (as fast as possible) or at least one record in 292 years; got %v", g.Rate)
			}
			v.atLeast(fieldPath(gp, "keys"), g.Keys, 1)
			if g.PayloadBytes > MaxGeneratorPayloadBytes {
				v.errorf(fieldPath(gp, "payload_bytes"), "expected at most %d (64MiB); got %d", MaxGeneratorPayloadBytes, g.PayloadBytes)
			}
			if g.EventLag == math.MaxInt64 {
				v.errorf(fieldPath(gp, "event_lag"), "expected a lag below %v; got %v", time.Duration(math.MaxInt64), g.EventLag)
			}
		}
		if s.Type == SourceGenerator {
			for j, f := range s.PartitionBy {
				if f != "key" && f != "seq" && f != "filler" {
					v.errorf(indexPath(fieldPath(path, "partition_by"), j), "a generator's records have only the fields key, seq and filler; got %q", f)
				}
			}
		}
		if r := s.Watermark.IdlePartitions.MaxRatio; !(r >= 0 && r <= 1) {
			v.errorf(fieldPath(path, "watermark.idle_partitions.max_ratio"), "expected a ratio between 0 and 1; got %v", r)
		}
	}
}

// block checks that a type-specific block is present when its type needs it
// and absent for any other type.
func (v *validator) block(path, typ, name string, present, required bool) {
	switch {
	case typ == "":
		// the missing type is reported already
	case present && typ != name:
		v.errorf(fieldPath(path, name), "only allowed when type is %s; type is %s", name, typ)
	case !present && required:
		v.errorf(fieldPath(path, name), "required when type is %s", name)
	}
}

func (v *validator) filePath(path, file string) {
	if file == "" {
		v.errorf(path, "required; expected a file path")
	}
}

func (v *validator) http(path string, h *HTTPEndpoint) {
	lp := fieldPath(path, "listen")
	if h.Listen == "" {
		v.errorf(lp, `required; expected host:port such as "127.0.0.1:8080"`)
	} else if _, port, err := net.SplitHostPort(h.Listen); err != nil || !validPort(port) {
		v.errorf(lp, `expected host:port such as "127.0.0.1:8080"; got %q`, h.Listen)
	}
	if !strings.HasPrefix(h.Path, "/") {
		v.errorf(fieldPath(path, "path"), "expected a URL path starting with '/'; got %q", h.Path)
	}
	if t := h.TLS; t != nil {
		v.filePath(fieldPath(path, "tls.cert_file"), t.CertFile)
		v.filePath(fieldPath(path, "tls.key_file"), t.KeyFile)
	}
	if a := h.Auth; a != nil {
		ap := fieldPath(path, "auth")
		switch {
		case a.BearerTokenFile != "" && a.BearerTokenEnv != "":
			v.errorf(fieldPath(ap, "bearer_token_env"), "give bearer_token_file or bearer_token_env, not both")
		case a.BearerTokenFile == "" && a.BearerTokenEnv == "":
			v.errorf(ap, "expected bearer_token_file (a file holding the token) or bearer_token_env (an environment variable holding it); the token itself never goes in the spec")
		}
	}
}

func validPort(port string) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= math.MaxUint16
}

func (v *validator) computations() {
	first := map[string]string{}
	for i := range v.p.Computations {
		c := &v.p.Computations[i]
		path := indexPath("computations", i)
		if v.requiredName(fieldPath(path, "name"), c.Name) {
			v.unique(first, fieldPath(path, "name"), "computation", c.Name)
		}
		v.requiredName(fieldPath(path, "plugin"), c.Plugin)
		v.partitions(fieldPath(path, "partitions"), c.Partitions)
		v.fields(fieldPath(path, "group_by"), c.GroupBy)
		if len(c.InputStreams) == 0 {
			v.errorf(fieldPath(path, "input_streams"), "a computation needs at least one input stream")
		}
		v.streamList(fieldPath(path, "input_streams"), c.InputStreams)
		v.streamList(fieldPath(path, "output_streams"), c.OutputStreams)
		if dl := c.DeadLetter; dl != nil {
			dp := fieldPath(path, "dead_letter.stream")
			if v.requiredName(dp, dl.Stream) && slices.Contains(c.OutputStreams, dl.Stream) {
				v.errorf(dp, "stream %q is also an output stream; dead letters need a stream of their own", dl.Stream)
			}
		}
		delays := fieldPath(path, "input_ordering.stream_delays")
		for _, s := range sortedKeys(c.InputOrdering.StreamDelays) {
			if !slices.Contains(c.InputStreams, s) {
				v.errorf(keyPath(delays, s), "stream %q is not an input of this computation; expected one of its input_streams%s", s, didYouMean(s, c.InputStreams))
			}
			if d := c.InputOrdering.StreamDelays[s]; d < 0 {
				v.errorf(keyPath(delays, s), "expected a non-negative delay; got %v", d)
			}
		}
		if c.Kind == KindMap && c.WatermarkStrategy != nil {
			v.errorf(fieldPath(path, "watermark_strategy"), "not allowed for kind map: a map sets no timers and passes its input's watermark on; use kind transform")
		}
		if ws := c.WatermarkStrategy; ws != nil && ws.OutOfOrdernessBound < 0 {
			v.errorf(fieldPath(path, "watermark_strategy.out_of_orderness_bound"), "expected a non-negative duration; got %v", ws.OutOfOrdernessBound)
		}
		bp := fieldPath(path, "batch")
		v.atLeast(fieldPath(bp, "max_rows"), int64(c.Batch.MaxRows), 1)
		v.atLeast(fieldPath(bp, "max_bytes"), c.Batch.MaxBytes, 1)
		if c.Batch.MaxDuration <= 0 {
			v.errorf(fieldPath(bp, "max_duration"), "expected a duration above 0; got %v", c.Batch.MaxDuration)
		}
		v.atLeast(fieldPath(path, "buffer_bytes"), c.BufferBytes, 1)
		v.onFailure(fieldPath(path, "on_failure"), &c.OnFailure)
	}
}

// onFailure checks a computation's failure policy. Negative durations and
// an unknown then are errors of form, reported by the decoder.
func (v *validator) onFailure(path string, f *OnFailure) {
	v.atLeast(fieldPath(path, "retries"), int64(f.Retries), 0)
	v.atLeast(fieldPath(path, "quarantine_after"), int64(f.QuarantineAfter), 0)
	if f.Backoff > f.MaxBackoff {
		// Point at the one the spec wrote: with backoff left at its
		// default, the mistake is a max_backoff below it.
		bp, mp := fieldPath(path, "backoff"), fieldPath(path, "max_backoff")
		if v.written(bp) || !v.written(mp) {
			v.errorf(bp, "expected at most max_backoff (%v); got %v", f.MaxBackoff, f.Backoff)
		} else {
			v.errorf(mp, "expected at least backoff (%v, the default); got %v", f.Backoff, f.MaxBackoff)
		}
	}
}

// written reports whether the spec itself holds the field at path (rather
// than Parse's default).
func (v *validator) written(path string) bool {
	if v.p.src == nil {
		return false
	}
	_, ok := v.p.src.tokens[path]
	return ok
}

func (v *validator) retention() {
	r := v.p.Retention
	v.atLeast("retention.sink_log_records", r.SinkLogRecords, 1)
	if r.Interval <= 0 {
		v.errorf("retention.interval", "expected a duration above 0; got %v", r.Interval)
	}
}

func (v *validator) sinks() {
	first := map[string]string{}
	for i := range v.p.Sinks {
		s := &v.p.Sinks[i]
		path := indexPath("sinks", i)
		if v.requiredName(fieldPath(path, "name"), s.Name) {
			v.unique(first, fieldPath(path, "name"), "sink", s.Name)
		}
		if s.Type == "" {
			v.errorf(fieldPath(path, "type"), "required; expected one of %s", strings.Join(s.Type.values(), ", "))
		}
		if len(s.Streams) == 0 {
			v.errorf(fieldPath(path, "streams"), "a sink needs at least one stream to read")
		}
		v.streamList(fieldPath(path, "streams"), s.Streams)
		v.block(path, string(s.Type), "file", s.File != nil, s.Type == SinkFile)
		v.block(path, string(s.Type), "http", s.HTTP != nil, s.Type == SinkHTTP)
		v.block(path, string(s.Type), "kafka", s.Kafka != nil, s.Type == SinkKafka)
		if s.Kafka != nil {
			v.kafkaSink(path, s)
		}
		if s.Format == FormatText && s.Type == SinkHTTP { // kafkaSink checks kafka's
			v.errorf(fieldPath(path, "format"), "text is a format for people, of file and stdout sinks; an http sink serves json (the record with every timestamp and id) or payload (the payload alone)")
		}
		if s.File != nil {
			v.filePath(fieldPath(path, "file.path"), s.File.Path)
		}
		if s.HTTP != nil {
			v.http(fieldPath(path, "http"), s.HTTP)
		}
	}
}

func (v *validator) deadLetter() {
	dl := v.p.DeadLetter
	if dl.File == nil {
		return
	}
	if dl.Type != DeadLetterFile {
		v.errorf("dead_letter.file", "only allowed when type is file; type is %s", dl.Type)
		return
	}
	v.filePath("dead_letter.file.path", dl.File.Path)
}

// httpEndpoints checks that no two HTTP sources or sinks serve the same
// address and URL path, which the host could not tell apart. Port 0 stands
// for a fresh port each time, so it never clashes.
func (v *validator) httpEndpoints() {
	first := map[[2]string]string{}
	check := func(path string, h *HTTPEndpoint) {
		if h == nil {
			return
		}
		if _, port, err := net.SplitHostPort(h.Listen); err != nil || port == "0" {
			return
		}
		k := [2]string{listenWithHost(h.Listen), h.Path}
		if prev, ok := first[k]; ok {
			v.errorf(path, "%s%s is already served by the HTTP endpoint at %s", h.Listen, h.Path, v.at(prev))
			return
		}
		first[k] = path
	}
	for i := range v.p.Sources {
		check(fieldPath(indexPath("sources", i), "http"), v.p.Sources[i].HTTP)
	}
	for i := range v.p.Sinks {
		check(fieldPath(indexPath("sinks", i), "http"), v.p.Sinks[i].HTTP)
	}
}

// references checks that every stream has exactly one writer and that every
// stream read has one.
func (v *validator) references() {
	writers := map[string]streamRef{}
	for _, w := range v.p.writerRefs() {
		if !validName(w.stream) {
			continue // reported by the section's own checks
		}
		if prev, ok := writers[w.stream]; ok {
			if prev.owner != w.owner {
				v.errorf(w.path, "stream %q already has a writer, %s at %s; a stream has exactly one writer", w.stream, prev.node, v.at(prev.path))
			}
			continue
		}
		writers[w.stream] = w
	}
	declared := map[string]string{}
	for i, s := range v.p.Streams {
		if _, ok := declared[s.Name]; !ok {
			declared[s.Name] = fieldPath(indexPath("streams", i), "name")
		}
	}
	read := map[string]bool{}
	written := sortedKeys(writers)
	for _, r := range v.p.readerRefs() {
		if !validName(r.stream) {
			continue
		}
		read[r.stream] = true
		if _, ok := writers[r.stream]; ok {
			continue
		}
		if _, ok := declared[r.stream]; ok {
			v.errorf(r.path, "stream %q has no writer: no source or computation writes it%s", r.stream, didYouMean(r.stream, written))
		} else {
			v.errorf(r.path, "stream %q is not declared: no source or computation writes it and streams does not list it%s", r.stream,
				didYouMean(r.stream, slices.Concat(written, sortedKeys(declared))))
		}
	}
	for i, s := range v.p.Streams {
		path := fieldPath(indexPath("streams", i), "name")
		if _, ok := writers[s.Name]; !ok && !read[s.Name] && declared[s.Name] == path && validName(s.Name) {
			v.errorf(path, "stream %q is declared but no source or computation writes it", s.Name)
		}
	}
}

// cycles reports one cycle of every strongly connected part of the
// computation graph: a computation must not depend on its own output.
func (v *validator) cycles() {
	edges := v.p.computationEdges()
	for _, scc := range stronglyConnected(edges) {
		start := scc[0]
		if len(scc) == 1 && !slices.ContainsFunc(edges[start], func(e edge) bool { return e.to == start }) {
			continue
		}
		cycle := shortestCycle(edges, start, scc)
		names := []string{v.p.Computations[start].Name}
		streams := make([]string, len(cycle))
		for i, e := range cycle {
			names = append(names, v.p.Computations[e.to].Name)
			streams[i] = strconv.Quote(e.stream)
		}
		v.errorf(cycle[len(cycle)-1].path, "cycle in the computation graph: %s (through streams %s)",
			strings.Join(names, " -> "), strings.Join(streams, ", "))
	}
}

// stronglyConnected returns the strongly connected components of the graph
// (Tarjan's algorithm), each sorted, in order of their smallest member.
func stronglyConnected(edges [][]edge) [][]int {
	n := len(edges)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var sccs [][]int
	next := 0
	var visit func(int)
	visit = func(u int) {
		index[u], low[u] = next, next
		next++
		stack = append(stack, u)
		onStack[u] = true
		for _, e := range edges[u] {
			switch {
			case index[e.to] < 0:
				visit(e.to)
				low[u] = min(low[u], low[e.to])
			case onStack[e.to]:
				low[u] = min(low[u], index[e.to])
			}
		}
		if low[u] == index[u] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == u {
					break
				}
			}
			slices.Sort(scc)
			sccs = append(sccs, scc)
		}
	}
	for u := range n {
		if index[u] < 0 {
			visit(u)
		}
	}
	slices.SortFunc(sccs, func(a, b []int) int { return a[0] - b[0] })
	return sccs
}

// shortestCycle returns the edges of a shortest cycle from start back to
// start inside the component scc, found breadth first in spec order.
func shortestCycle(edges [][]edge, start int, scc []int) []edge {
	via := map[int]edge{} // how each computation was first reached
	from := map[int]int{} // and from which
	queue := []int{start}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range edges[u] {
			if _, in := slices.BinarySearch(scc, e.to); !in {
				continue
			}
			if e.to == start {
				cycle := []edge{e}
				for w := u; w != start; w = from[w] {
					cycle = append(cycle, via[w])
				}
				slices.Reverse(cycle)
				return cycle
			}
			if _, seen := via[e.to]; !seen {
				via[e.to], from[e.to] = e, u
				queue = append(queue, e.to)
			}
		}
	}
	return nil // unreachable for a component with a cycle
}

// didYouMean is the "; did you mean" end of a message about a name that
// matches none of known, or "" when none is close: one rule
// (suggest.Closest) for every name a spec refers to.
func didYouMean(name string, known []string) string {
	if hint := suggest.DidYouMean(name, known); hint != "" {
		return "; " + hint
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
