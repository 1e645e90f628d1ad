package abi

import (
	"strconv"
	"strings"
)

// ValidateResponse checks the meaning of a decoded response against the
// request it answers and the computation's declared output streams. It
// returns the first violation in envelope order as an *Error naming its
// field path: a key that is not in the request or appears twice, a failed
// key or batch that also has effects, an unknown state_op, state bytes
// without state_op 1 or state_op 1 without them, state or timers from a map
// computation, an emit to an undeclared stream, and parent indexes that are
// empty, out of range or repeated. It assumes req is valid (Request.Validate).
func ValidateResponse(resp *Response, req *Request, outputs []string) error {
	if resp.Error != "" && len(resp.Keys) > 0 {
		return &Error{Field: "keys", Msg: "a failed batch (error is set) must report no keys"}
	}
	match := keyMatcher{req: req, used: make([]uint64, (len(req.Keys)+63)/64)}
	var parentsSeen []uint64
	for i := range resp.Keys {
		rk := &resp.Keys[i]
		at := func(field string) string { return "keys[" + strconv.Itoa(i) + "]" + field }
		j, err := match.find(resp, i)
		if err != nil {
			return &Error{Field: at(".key"), Msg: err.Error()}
		}
		if rk.Error != "" {
			if f := rk.firstEffect(); f != "" {
				return &Error{Field: at("." + f), Msg: "a failed key (error is set) has no effects"}
			}
			continue
		}
		switch rk.StateOp {
		case StateKeep, StateDelete:
			if rk.State != nil {
				return &Error{Field: at(".state"), Msg: "present with state_op " + strconv.Itoa(int(rk.StateOp)) + " (" + rk.StateOp.String() + "); only state_op 1 (replace) carries state"}
			}
		case StateReplace:
			if rk.State == nil {
				return &Error{Field: at(".state"), Msg: "missing; state_op 1 (replace) requires it"}
			}
		default:
			return &Error{Field: at(".state_op"), Msg: "unknown state_op " + strconv.Itoa(int(rk.StateOp)) + " (want 0 keep, 1 replace or 2 delete)"}
		}
		if req.Kind == KindMap {
			if rk.StateOp != StateKeep {
				return &Error{Field: at(".state_op"), Msg: "a map computation keeps no state"}
			}
			if len(rk.TimersSet) > 0 {
				return &Error{Field: at(".timers_set"), Msg: "a map computation sets no timers"}
			}
			if len(rk.TimersCancel) > 0 {
				return &Error{Field: at(".timers_cancel"), Msg: "a map computation sets no timers"}
			}
		}
		inputs := req.Keys[j].Inputs()
		if need := (inputs + 63) / 64; cap(parentsSeen) < need {
			parentsSeen = make([]uint64, need)
		} else {
			parentsSeen = parentsSeen[:need]
		}
		for e := range rk.Emits {
			em := &rk.Emits[e]
			emitAt := func(field string) string { return at(".emits[" + strconv.Itoa(e) + "]" + field) }
			if !declared(outputs, em.Stream) {
				return &Error{Field: emitAt(".stream"), Msg: strconv.Quote(em.Stream) + " is not a declared output stream (declared: " + strings.Join(outputs, ", ") + ")"}
			}
			if em.Parents == nil {
				continue
			}
			if len(em.Parents) == 0 {
				return &Error{Field: emitAt(".parents"), Msg: "empty; leave the field out to mean every input"}
			}
			for p, idx := range em.Parents {
				if int64(idx) >= int64(inputs) {
					return &Error{Field: emitAt(".parents[" + strconv.Itoa(p) + "]"), Msg: "input " + strconv.FormatUint(uint64(idx), 10) + " out of range: the key has " + strconv.Itoa(inputs) + " inputs"}
				}
				w, bit := idx/64, uint64(1)<<(idx%64)
				if parentsSeen[w]&bit != 0 {
					return &Error{Field: emitAt(".parents[" + strconv.Itoa(p) + "]"), Msg: "input " + strconv.FormatUint(uint64(idx), 10) + " repeated"}
				}
				parentsSeen[w] |= bit
			}
			for _, idx := range em.Parents {
				parentsSeen[idx/64] = 0
			}
		}
	}
	return nil
}

// firstEffect names the first field of k that is an effect, or "".
func (k *ResponseKey) firstEffect() string {
	switch {
	case len(k.Emits) > 0:
		return "emits"
	case len(k.TimersSet) > 0:
		return "timers_set"
	case len(k.TimersCancel) > 0:
		return "timers_cancel"
	case k.StateOp != StateKeep:
		return "state_op"
	case k.State != nil:
		return "state"
	}
	return ""
}

func declared(outputs []string, stream string) bool {
	for _, s := range outputs {
		if s == stream {
			return true
		}
	}
	return false
}

// keyMatcher finds the request key of each response key. Guests answer in
// request order, usually leaving keys out; a cursor over the request finds
// those without a map, which is built only for a response out of order.
type keyMatcher struct {
	req    *Request
	cursor int
	index  map[string]int
	used   []uint64
}

func (m *keyMatcher) find(resp *Response, i int) (int, error) {
	key := resp.Keys[i].Key
	j := -1
	for c := m.cursor; c < len(m.req.Keys) && m.index == nil; c++ {
		if m.req.Keys[c].Key == key {
			j, m.cursor = c, c+1
			break
		}
	}
	if j < 0 {
		if m.index == nil {
			m.index = make(map[string]int, len(m.req.Keys))
			for c := range m.req.Keys {
				m.index[m.req.Keys[c].Key] = c
			}
		}
		c, ok := m.index[key]
		if !ok {
			return 0, errorString(strconv.Quote(key) + " is not a key of the request")
		}
		j = c
	}
	w, bit := j/64, uint64(1)<<(j%64)
	if m.used[w]&bit != 0 {
		for k := range resp.Keys[:i] {
			if resp.Keys[k].Key == key {
				return 0, errorString(strconv.Quote(key) + " repeats keys[" + strconv.Itoa(k) + "]")
			}
		}
	}
	m.used[w] |= bit
	return j, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// Validate checks the meaning of a request: the ABI version, the kind,
// keys that are distinct and each have at least one input, and messages
// that name their id and stream. Hosts run it in tests; a guest may run it
// on what it receives.
func (r *Request) Validate() error {
	if r.ABI != Version {
		return &Error{Field: "abi", Msg: "version " + strconv.FormatUint(r.ABI, 10) + ", want " + strconv.Itoa(Version)}
	}
	if !r.Kind.Valid() {
		return &Error{Field: "kind", Msg: "unknown kind " + strconv.Quote(string(r.Kind)) + " (want transform or map)"}
	}
	if r.Computation == "" {
		return &Error{Field: "computation", Msg: "empty"}
	}
	seen := make(map[string]int, len(r.Keys))
	for i := range r.Keys {
		k := &r.Keys[i]
		at := "keys[" + strconv.Itoa(i) + "]"
		if prev, dup := seen[k.Key]; dup {
			return &Error{Field: at + ".key", Msg: strconv.Quote(k.Key) + " repeats keys[" + strconv.Itoa(prev) + "]"}
		}
		seen[k.Key] = i
		if k.Inputs() == 0 {
			return &Error{Field: at, Msg: "a key must have at least one timer or message"}
		}
		if r.Kind == KindMap && (len(k.Timers) > 0 || k.State != nil) {
			return &Error{Field: at, Msg: "a map computation has no state or timers"}
		}
		for t := range k.Timers {
			if k.Timers[t].ID == "" {
				return &Error{Field: at + ".timers[" + strconv.Itoa(t) + "].id", Msg: "empty"}
			}
		}
		for m := range k.Messages {
			msg := &k.Messages[m]
			mAt := at + ".messages[" + strconv.Itoa(m) + "]"
			if msg.ID == "" {
				return &Error{Field: mAt + ".id", Msg: "empty"}
			}
			if msg.Stream == "" {
				return &Error{Field: mAt + ".stream", Msg: "empty"}
			}
		}
	}
	return nil
}

// Validate checks the meaning of an init envelope: the ABI version, the
// kind, and output streams that are named and distinct.
func (in *Init) Validate() error {
	if in.ABI != Version {
		return &Error{Field: "abi", Msg: "version " + strconv.FormatUint(in.ABI, 10) + ", want " + strconv.Itoa(Version)}
	}
	if !in.Kind.Valid() {
		return &Error{Field: "kind", Msg: "unknown kind " + strconv.Quote(string(in.Kind)) + " (want transform or map)"}
	}
	if in.Computation == "" {
		return &Error{Field: "computation", Msg: "empty"}
	}
	for i, s := range in.OutputStreams {
		at := "output_streams[" + strconv.Itoa(i) + "]"
		if s == "" {
			return &Error{Field: at, Msg: "empty"}
		}
		for j := range i {
			if in.OutputStreams[j] == s {
				return &Error{Field: at, Msg: strconv.Quote(s) + " repeats output_streams[" + strconv.Itoa(j) + "]"}
			}
		}
	}
	return nil
}
