package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Report is the checker's verdict on one store and its execution ledger.
type Report struct {
	Executions int            // lines in the execution ledger
	Keys       int            // effect records in the store
	States     map[string]int // effect records by state
	// Double lists every effect key that ran more than once ("key ×n").
	Double []string
	// Stray lists keys that ran but whose record is failed or missing: an execution the store
	// does not hold against the key, so a retry could run it again.
	Stray []string
	// Phantom lists committed keys that never ran: the store says an effect happened that
	// nobody executed.
	Phantom []string
	// Blocked lists the keys left executing or ambiguous.
	Blocked []string
	// Unattributed lists blocked keys that no injected fault explains (only when the checker was
	// given an attribution).
	Unattributed []string
	// Attributed counts blocked keys by the kind of fault that explains them.
	Attributed map[string]int
	// Chain is what `latch receipts --verify --json` reported.
	Chain ChainReport
	// CallReceipts counts the chain's receipts of calls (the other records are state changes
	// such as approval answers and lease lapses).
	CallReceipts int64
}

// ChainReport is the JSON of `latch receipts --verify --json`.
type ChainReport struct {
	OK       bool            `json:"ok"`
	Verified int64           `json:"verified"`
	Breaks   json.RawMessage `json:"breaks"`
}

// Attribution explains blocked keys: for an effect key, the kind of the injected fault that can
// leave it executing or ambiguous, or "" when none was injected on it.
type Attribution func(key string) string

// Check reads the store at url (read-only) and the execution ledger at ledgerPath and judges them.
// attr may be nil: blocked keys are then listed but not attributed.
func Check(ctx context.Context, url, ledgerPath string, attr Attribution) (*Report, error) {
	execs, err := ReadExecutions(ledgerPath)
	if err != nil {
		return nil, fmt.Errorf("check: read executions: %w", err)
	}
	st, err := latch.OpenStore(ctx, url, &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("check: open store: %w", err)
	}
	defer st.Close()
	effects, err := st.Effects(ctx, store.EffectFilter{})
	if err != nil {
		return nil, fmt.Errorf("check: list effects: %w", err)
	}
	rep := judge(execs, effects, attr)
	for r, err := range st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return nil, fmt.Errorf("check: read receipts: %w", err)
		}
		var k struct {
			Kind *string `json:"kind"`
		}
		if err := json.Unmarshal(r.Doc, &k); err != nil {
			return nil, fmt.Errorf("check: receipt %d: %w", r.Seq, err)
		}
		kind := ""
		if k.Kind != nil {
			kind = *k.Kind
		}
		if receipt.IsCall(receipt.KindOf(kind)) {
			rep.CallReceipts++
		}
	}
	if rep.Chain, err = verifyChain(ctx, url); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return rep, nil
}

// judge compares the executions with the effect records.
func judge(execs []Execution, effects []*store.Effect, attr Attribution) *Report {
	rep := &Report{Executions: len(execs), Keys: len(effects), States: map[string]int{}, Attributed: map[string]int{}}
	ran := map[string]int{}
	for _, e := range execs {
		ran[e.Key]++
	}
	byKey := make(map[string]*store.Effect, len(effects))
	for _, e := range effects {
		byKey[e.Key] = e
		rep.States[string(e.State)]++
		n := ran[e.Key]
		switch e.State {
		case store.Committed:
			if n == 0 && e.ResolvedBy == "" {
				rep.Phantom = append(rep.Phantom, e.Key)
			}
		case store.Executing, store.Ambiguous:
			rep.Blocked = append(rep.Blocked, e.Key)
			if attr == nil {
				continue
			}
			if kind := attr(e.Key); kind != "" {
				rep.Attributed[kind]++
			} else {
				rep.Unattributed = append(rep.Unattributed, fmt.Sprintf("%s (%s, ran %d)", e.Key, e.State, n))
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(ran)) {
		n := ran[key]
		if n > 1 {
			rep.Double = append(rep.Double, fmt.Sprintf("%s ×%d", key, n))
		}
		if e := byKey[key]; e == nil || e.State == store.Failed {
			state := "no record"
			if e != nil {
				state = string(e.State)
			}
			rep.Stray = append(rep.Stray, fmt.Sprintf("%s (%s)", key, state))
		}
	}
	slices.Sort(rep.Blocked)
	slices.Sort(rep.Phantom)
	slices.Sort(rep.Unattributed)
	return rep
}

// verifyChain runs `latch receipts --verify --json` on the store, so the campaign checks the
// chain exactly as an operator would.
func verifyChain(ctx context.Context, url string) (ChainReport, error) {
	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"receipts", "--verify", "--json", "--store", url}, &out, &errOut,
		func(string) string { return "" })
	var rep ChainReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("latch receipts --verify exited %d: %s%s", code, out.String(), errOut.String())
	}
	if rep.OK != (code == cli.ExitOK) {
		return rep, fmt.Errorf("latch receipts --verify exited %d with ok=%v", code, rep.OK)
	}
	return rep, nil
}

// Err is nil when every invariant holds: no key ran twice, every key that ran is committed or
// blocked, no committed key is without its execution, no blocked key is unexplained, and the
// chain verifies.
func (r *Report) Err() error {
	var bad []string
	add := func(what string, keys []string) {
		if len(keys) > 0 {
			bad = append(bad, fmt.Sprintf("%d %s: %s", len(keys), what, strings.Join(head(keys, 10), ", ")))
		}
	}
	add("double executions", r.Double)
	add("executions the store does not hold (failed or missing record)", r.Stray)
	add("committed without an execution", r.Phantom)
	add("blocked effects no injected fault explains", r.Unattributed)
	if !r.Chain.OK {
		bad = append(bad, "receipt chain broken: "+string(r.Chain.Breaks))
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("campaign invariants violated:\n  %s", strings.Join(bad, "\n  "))
}

// Summary is a one-line account of the report.
func (r *Report) Summary() string {
	states := make([]string, 0, len(r.States))
	for _, s := range slices.Sorted(maps.Keys(r.States)) {
		states = append(states, fmt.Sprintf("%s=%d", s, r.States[s]))
	}
	return fmt.Sprintf("executions=%d keys=%d [%s] double=%d stray=%d phantom=%d blocked=%d unattributed=%d chain_ok=%v verified=%d",
		r.Executions, r.Keys, strings.Join(states, " "), len(r.Double), len(r.Stray), len(r.Phantom), len(r.Blocked),
		len(r.Unattributed), r.Chain.OK, r.Chain.Verified)
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}
