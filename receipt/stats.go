package receipt

import (
	"fmt"
	"iter"
	"sort"
)

// Stats counts receipts by action and result and, for observe-mode receipts, what enforcement
// would have blocked. It is what `latch stats` prints and what `latch serve` answers at
// /v1/stats.
type Stats struct {
	Receipts         int                `json:"receipts"`
	Counts           []Count            `json:"counts"`
	Observed         int                `json:"observed"`
	WouldHaveBlocked []WouldHaveBlocked `json:"would_have_blocked"`
}

// Count is the number of receipts of one action with one result.
type Count struct {
	Action string `json:"action"`
	Result string `json:"result"`
	Count  int    `json:"count"`
}

// WouldHaveBlocked counts observed calls enforcement would have stopped: WouldHave is denied (the
// decision was deny), approval_required (a human would have had to approve) or refused (the
// effect's state would have refused the reservation); Reason is the decision reason or the
// effect refusal.
type WouldHaveBlocked struct {
	Action    string `json:"action"`
	WouldHave string `json:"would_have"`
	Reason    string `json:"reason"`
	Count     int    `json:"count"`
}

// Tally counts the calls' receipts seq yields (records of other kinds are skipped). A stored
// document that no longer parses is counted as action "(unreadable receipt)", result
// "unreadable", rather than dropped.
func Tally(seq iter.Seq2[Sealed, error]) (Stats, error) {
	t := newTally()
	for r, err := range seq {
		if err != nil {
			return t.stats(), fmt.Errorf("read receipts: %w", err)
		}
		t.add(r.Doc)
	}
	return t.stats(), nil
}

// Add is the sum of s and o: the stats of the receipts of both.
func (s Stats) Add(o Stats) Stats {
	t := newTally()
	t.addStats(s)
	t.addStats(o)
	return t.stats()
}

// tally is Stats being counted: the counts by key, sorted into Stats at the end.
type tally struct {
	receipts, observed int
	counts             map[[2]string]int
	blocked            map[[3]string]int
}

func newTally() *tally {
	return &tally{counts: map[[2]string]int{}, blocked: map[[3]string]int{}}
}

// add counts one stored receipt document.
func (t *tally) add(doc []byte) {
	f, err := Parse(doc)
	if err != nil {
		f = &Receipt{Action: "(unreadable receipt)", Result: "unreadable"}
	}
	if !IsCall(f.Kind) {
		return // a state change no call made: stats count calls
	}
	t.receipts++
	t.counts[[2]string{f.Action, f.Result}]++
	if f.Result != Observed {
		return
	}
	t.observed++
	if f.WouldHave == nil {
		return
	}
	w := f.WouldHave
	switch {
	case w.Decision == "deny":
		t.blocked[[3]string{f.Action, "denied", w.Reason}]++
	case w.Decision == "approve":
		t.blocked[[3]string{f.Action, "approval_required", w.Reason}]++
	case w.Decision != "allow":
		// Not a decision this binary knows: enforcement fails closed, so it would have denied.
		t.blocked[[3]string{f.Action, "denied", w.Decision}]++
	case w.Effect != "" && w.Effect != "reserved":
		t.blocked[[3]string{f.Action, "refused", w.Effect}]++
	}
}

// addStats counts what s counted.
func (t *tally) addStats(s Stats) {
	t.receipts += s.Receipts
	t.observed += s.Observed
	for _, c := range s.Counts {
		t.counts[[2]string{c.Action, c.Result}] += c.Count
	}
	for _, b := range s.WouldHaveBlocked {
		t.blocked[[3]string{b.Action, b.WouldHave, b.Reason}] += b.Count
	}
}

// stats is what t counted, each list in order.
func (t *tally) stats() Stats {
	out := Stats{Receipts: t.receipts, Observed: t.observed, Counts: []Count{}, WouldHaveBlocked: []WouldHaveBlocked{}}
	for k, n := range t.counts {
		out.Counts = append(out.Counts, Count{Action: k[0], Result: k[1], Count: n})
	}
	sort.Slice(out.Counts, func(i, j int) bool {
		x, y := out.Counts[i], out.Counts[j]
		if x.Action != y.Action {
			return x.Action < y.Action
		}
		return x.Result < y.Result
	})
	for k, n := range t.blocked {
		out.WouldHaveBlocked = append(out.WouldHaveBlocked, WouldHaveBlocked{Action: k[0], WouldHave: k[1], Reason: k[2], Count: n})
	}
	sort.Slice(out.WouldHaveBlocked, func(i, j int) bool {
		x, y := out.WouldHaveBlocked[i], out.WouldHaveBlocked[j]
		if x.Action != y.Action {
			return x.Action < y.Action
		}
		if x.WouldHave != y.WouldHave {
			return x.WouldHave < y.WouldHave
		}
		return x.Reason < y.Reason
	})
	return out
}
