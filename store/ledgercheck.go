package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// The budget ledger checked against the chain (docs/guarantees.md#state-checked-against-the-chain).
//
// A call's receipt records the charges its reservation made (budget_charges, with its effect key
// and attempt), and its effect's records say when an attempt became failed. Replaying the chain
// therefore implies the ledger: for each attempt whose call was recorded, one row per charged
// (budget, metric) with the amount, limit and window the receipt names; each row released exactly
// when the chain says its attempt became failed (an attempt before the effect's last was renewed,
// so it failed), held otherwise. As with the reservation itself, the rows of an attempt whose
// call has not been recorded yet (still executing, or whose holder never reported) are not
// chained: they may stand while the attempt exists, and must be held unless the chain says the
// attempt failed. Anything else — a row edited, deleted or inserted, a release set or cleared —
// is state_diverged.

// chargeNote is what the chain says an attempt charged: the charges of its call's receipt, in
// order (none when the call was recorded without charges).
type chargeNote struct {
	charges []receipt.BudgetCharge
}

// chargeKey is the key under which an attempt's note is gathered: the effect key, a NUL (which
// no key holds) and the attempt, fixed width, so that byte order is (key, attempt) order.
func chargeKey(key string, attempt int) string {
	return key + "\x00" + fmt.Sprintf("%020d", attempt)
}

// reservedResults are the results of a call whose reservation was made.
var reservedResults = map[string]bool{receipt.Committed: true, receipt.Failed: true, receipt.Ambiguous: true}

// callKinds are the kinds of a call's receipt.
var callKinds = map[string]bool{receipt.KindCall: true, receipt.KindLateOutcome: true, receipt.KindOutcomeConflict: true}

// budgetChargesMember marks a document that records charges.
var budgetChargesMember = []byte(`"budget_charges":[`)

// noteCharges adds what a record of key says an attempt charged (st its states, actionID its
// action id; "" when unknown). A call's receipt that records charges is read for them; one that
// records none says so of the attempt it wrote (its effect state names it the holder).
func noteCharges(charges *latestRuns[chargeNote], key, actionID string, seq int64, doc []byte, st receipt.States) error {
	if key == "" || !callKinds[st.Kind] || !reservedResults[st.Result] {
		return nil
	}
	if bytes.Contains(doc, budgetChargesMember) || actionID == "" {
		var w struct {
			ActionID      string                 `json:"action_id"`
			Attempt       int                    `json:"attempt"`
			BudgetCharges []receipt.BudgetCharge `json:"budget_charges"`
		}
		if json.Unmarshal(doc, &w) != nil {
			return nil // the walk reports the document
		}
		if len(w.BudgetCharges) > 0 {
			if w.Attempt < 1 {
				return nil
			}
			return charges.add(chargeKey(key, w.Attempt), seq, &chargeNote{charges: w.BudgetCharges}, false)
		}
		actionID = w.ActionID
	}
	if e := st.Effect; e != nil && e.Holder == actionID && e.Attempt >= 1 {
		return charges.add(chargeKey(key, e.Attempt), seq, &chargeNote{}, false)
	}
	return nil
}

var chargeCodec = stateCodec[chargeNote]{
	put: func(b []byte, s *chargeNote) []byte {
		b = binary.AppendUvarint(b, uint64(len(s.charges)))
		for _, c := range s.charges {
			for _, v := range []string{c.Budget, c.Metric, c.Window} {
				b = binary.AppendUvarint(b, uint64(len(v)))
				b = append(b, v...)
			}
			b = binary.AppendVarint(b, c.Amount)
			b = binary.AppendVarint(b, c.Limit)
		}
		return b
	},
	get: func(r *runReader) (*chargeNote, error) {
		n := r.uvarint()
		if r.err != nil || n > 1<<16 {
			return nil, fmt.Errorf("read a temporary run: %d charges", n)
		}
		s := &chargeNote{charges: make([]receipt.BudgetCharge, 0, n)}
		for range n {
			c := receipt.BudgetCharge{Budget: r.str(), Metric: r.str(), Window: r.str()}
			c.Amount, c.Limit = r.varint(), r.varint()
			s.charges = append(s.charges, c)
		}
		return s, r.err
	},
}

// attemptRows are the ledger rows of one attempt.
type attemptRows struct {
	key     string // chargeKey
	rows    []*ChargeRecord
	effect  string
	attempt int
}

// byAttempt groups ledger rows, yielded by (effect key in byte order, attempt), per attempt.
func byAttempt(rows iter.Seq2[*ChargeRecord, error]) iter.Seq2[*attemptRows, error] {
	return func(yield func(*attemptRows, error) bool) {
		var cur *attemptRows
		for r, err := range rows {
			if err != nil {
				yield(nil, err)
				return
			}
			if cur != nil && (cur.effect != r.EffectKey || cur.attempt != r.Attempt) {
				if !yield(cur, nil) {
					return
				}
				cur = nil
			}
			if cur == nil {
				cur = &attemptRows{key: chargeKey(r.EffectKey, r.Attempt), effect: r.EffectKey, attempt: r.Attempt}
			}
			cur.rows = append(cur.rows, r)
		}
		if cur != nil {
			yield(cur, nil)
		}
	}
}

// chargeGroup is what the check knows of one attempt: what its call's receipt said it charged
// (nil when no receipt says) and its ledger rows.
type chargeGroup = group[chargeNote, attemptRows]

// chargeGroups merges the notes with the ledger's rows, attempt by attempt in (key, attempt)
// order.
func chargeGroups(notes *latestRuns[chargeNote], rows iter.Seq2[*ChargeRecord, error]) iter.Seq2[*chargeGroup, error] {
	return func(yield func(*chargeGroup, error) bool) {
		stopped := false
		err := walkGroups(notes, byAttempt(rows), func(a *attemptRows) string { return a.key }, func(g *chargeGroup) {
			if !stopped {
				stopped = !yield(g, nil)
			}
		})
		if err != nil && !stopped {
			yield(nil, err)
		}
	}
}

// ledgerCheck checks the ledger's attempts as the effects walk reaches their keys.
type ledgerCheck struct {
	c    *stateCheck
	next func() (*chargeGroup, error, bool)
	stop func()
	cur  *chargeGroup
	err  error
	more bool
}

func newLedgerCheck(c *stateCheck, notes *latestRuns[chargeNote], rows iter.Seq2[*ChargeRecord, error]) *ledgerCheck {
	l := &ledgerCheck{c: c}
	l.next, l.stop = iter.Pull2(chargeGroups(notes, rows))
	l.cur, l.err, l.more = l.next()
	return l
}

// effect checks the attempts of key (and, first, those of keys before it, which no effect has),
// given the state the chain implies for the effect (nil when none) and its row (nil when none).
func (l *ledgerCheck) effect(key string, chain *receipt.EffectState, row *Effect) {
	for l.more && l.err == nil {
		g := l.cur
		effect, attempt := splitChargeKey(g.key)
		if effect > key {
			return
		}
		if effect == key {
			l.attempt(g, key, attempt, chain, row)
		} else {
			l.attempt(g, effect, attempt, nil, nil)
		}
		l.cur, l.err, l.more = l.next()
	}
}

// finish checks the attempts of keys after the last effect, and returns the merge's error.
func (l *ledgerCheck) finish() error {
	defer l.stop()
	for l.more && l.err == nil {
		effect, attempt := splitChargeKey(l.cur.key)
		l.attempt(l.cur, effect, attempt, nil, nil)
		l.cur, l.err, l.more = l.next()
	}
	if l.err != nil {
		return fmt.Errorf("check state: budget charges: %w", l.err)
	}
	return nil
}

func splitChargeKey(k string) (string, int) {
	i := len(k) - 21
	if i < 0 {
		return k, 0
	}
	n, _ := strconv.Atoi(k[i+1:])
	return k[:i], n
}

// attempt compares the rows of one attempt with what the chain implies.
func (l *ledgerCheck) attempt(g *chargeGroup, key string, attempt int, chain *receipt.EffectState, row *Effect) {
	subject := func(budget, metric string) string {
		return fmt.Sprintf("budget charge of effect %s attempt %d, budget %s metric %s", safetext.Quote(key), attempt,
			safetext.Quote(budget), safetext.Quote(metric))
	}
	var rows []*ChargeRecord
	if g.row != nil {
		rows = g.row.rows
	}
	// The attempts the chain and the table know of: an attempt not yet chained is the table's
	// executing one past the chain's.
	known := chain != nil && attempt <= chain.Attempt || row != nil && attempt == row.Attempt
	released := chain != nil && (attempt < chain.Attempt || attempt == chain.Attempt && chain.State == string(Failed))
	type want struct {
		charge receipt.BudgetCharge
		seen   bool
	}
	var wants map[[2]string]*want
	if g.state != nil {
		wants = map[[2]string]*want{}
		for _, c := range g.state.charges {
			k := [2]string{c.Budget, c.Metric}
			if wants[k] == nil {
				wants[k] = &want{charge: c}
			}
		}
	}
	for _, r := range rows {
		s := subject(r.Budget, r.Metric)
		table := ledgerText(r)
		switch {
		case !known:
			l.c.diverged(g.seq, s, "no such attempt", table)
			continue
		case wants != nil:
			w := wants[[2]string{r.Budget, r.Metric}]
			if w == nil {
				l.c.diverged(g.seq, s, "no such charge", table)
				continue
			}
			w.seen = true
			if win, err := ParseWindow(w.charge.Window); err != nil || w.charge.Amount != r.Amount || w.charge.Limit != r.Limit || win != r.Window {
				l.c.diverged(g.seq, s, fmt.Sprintf("amount %d of limit %d over %s", w.charge.Amount, w.charge.Limit, w.charge.Window), table)
				continue
			}
		}
		if released != !r.ReleasedAt.IsZero() {
			l.c.diverged(g.seq, s, releaseText(released), releaseText(!r.ReleasedAt.IsZero()))
		}
	}
	missing := make([][2]string, 0, len(wants))
	for k, w := range wants {
		if !w.seen {
			missing = append(missing, k)
		}
	}
	slices.SortFunc(missing, func(a, b [2]string) int {
		if a[0] != b[0] {
			return cmpString(a[0], b[0])
		}
		return cmpString(a[1], b[1])
	})
	for _, k := range missing {
		w := wants[k]
		l.c.diverged(g.seq, subject(k[0], k[1]), fmt.Sprintf("amount %d of limit %d over %s, %s", w.charge.Amount, w.charge.Limit,
			w.charge.Window, releaseText(released)), "no row")
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func releaseText(released bool) string {
	if released {
		return "released"
	}
	return "held"
}

func ledgerText(r *ChargeRecord) string {
	return fmt.Sprintf("amount %d of limit %d over %s, %s", r.Amount, r.Limit, FormatWindow(r.Window), releaseText(!r.ReleasedAt.IsZero()))
}
