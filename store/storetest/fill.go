package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchkit/latch/internal/prefill"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// testFill checks store.Filler, the bulk path that grows a store for latch bench --prefill: a
// fill writes what the same calls write through the write methods one at a time (the same
// effect rows, events and receipts), its chain and state verify, the store keeps working after
// it, and a fill that fails writes nothing.
func testFill(t *testing.T, b Backend) {
	ctx := t.Context()
	filled := openStore(t, b, b.New(t))
	f, ok := filled.(store.Filler)
	if !ok {
		t.Skipf("backend %s does not implement store.Filler", b.Name)
	}
	alone := openStore(t, b, b.New(t))

	// 2,400 rounds cover every kind of the mix (rounds 9,000 to 11,399: duplicates have calls to
	// duplicate, and round 10,098 is left ambiguous), in three transactions of 800.
	const first, rounds, per = 9000, 2400, 800
	gen := prefill.New("fill", first)
	var calls []store.FillCall
	for i := int64(first); i < first+rounds; i += per {
		batch := calls[len(calls):]
		for n := i; n < i+per; n++ {
			batch = gen.Next(batch, n, t0.Add(time.Duration(n)*time.Millisecond))
		}
		if err := f.Fill(ctx, batch); err != nil {
			t.Fatalf("Fill(rounds %d-%d) = %v", i, i+per-1, err)
		}
		calls = append(calls, batch...)
	}
	for i := range calls {
		if err := calls[i].Write(ctx, alone); err != nil {
			t.Fatalf("call %d through the write methods: %v", i, err)
		}
	}

	tally := gen.Tally
	for kind, n := range map[prefill.Kind]string{prefill.Denied: "denied", prefill.Duplicate: "duplicate",
		prefill.Approved: "approved", prefill.AmbiguousResolved: "ambiguous resolved", prefill.FailedRetried: "failed retried",
		prefill.Failed: "failed", prefill.AmbiguousLeft: "ambiguous left"} {
		found := false
		for i := int64(first); i < first+rounds; i++ {
			found = found || prefill.KindOf(i, first) == kind
		}
		if !found {
			t.Errorf("the rounds filled hold no %s call", n)
		}
	}

	rep, err := store.VerifyChain(ctx, filled)
	if err != nil || !rep.OK {
		t.Fatalf("VerifyChain(filled) = %+v, %v; want an intact chain", rep, err)
	}
	if rep.Verified != tally.Receipts {
		t.Errorf("filled chain holds %d receipts, want %d", rep.Verified, tally.Receipts)
	}
	effects, err := filled.Effects(ctx, store.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byState := map[store.State]int64{}
	for _, e := range effects {
		byState[e.State]++
	}
	if diff := cmp.Diff(tally.Effects, byState); diff != "" {
		t.Errorf("filled effects by state (-want +got):\n%s", diff)
	}
	if rep.State == nil || rep.State.Effects != int64(len(effects)) || rep.State.Approvals != tally.Approvals {
		t.Errorf("state checked = %+v, want %d effects and %d approvals", rep.State, len(effects), tally.Approvals)
	}
	consumed, err := filled.Approvals(ctx, store.ApprovalFilter{Status: store.Consumed})
	if err != nil || int64(len(consumed)) != tally.Approvals {
		t.Errorf("consumed approvals = %d, %v; want %d", len(consumed), err, tally.Approvals)
	}

	// The same as one call at a time: effect rows, approvals, events and receipts.
	aloneEffects, err := alone.Effects(ctx, store.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := cmpopts.SortSlices(func(x, y *store.Effect) bool { return x.Key < y.Key })
	if diff := cmp.Diff(aloneEffects, effects, byKey); diff != "" {
		t.Errorf("effects filled differ from the same calls made one at a time (-alone +filled):\n%s", diff)
	}
	aloneApprovals, err := alone.Approvals(ctx, store.ApprovalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	filledApprovals, err := filled.Approvals(ctx, store.ApprovalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byID := cmpopts.SortSlices(func(x, y *store.Approval) bool { return x.ID < y.ID })
	if diff := cmp.Diff(aloneApprovals, filledApprovals, byID); diff != "" {
		t.Errorf("approvals filled differ from one at a time (-alone +filled):\n%s", diff)
	}
	aloneEvents, err := alone.Events(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	filledEvents, err := filled.Events(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ignoreID := cmpopts.IgnoreFields(store.Event{}, "ID")
	if diff := cmp.Diff(aloneEvents, filledEvents, ignoreID, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("events filled differ from one at a time (-alone +filled):\n%s", diff)
	}
	aloneReceipts, filledReceipts := readAll(t, alone), readAll(t, filled)
	if len(aloneReceipts) != len(filledReceipts) {
		t.Fatalf("filled %d receipts, one at a time %d", len(filledReceipts), len(aloneReceipts))
	}
	for i, a := range aloneReceipts {
		fr := filledReceipts[i]
		// Records a store makes itself (answers, resolutions) take a fresh receipt id each time.
		if a.Kind == "" && a.ReceiptID != fr.ReceiptID || a.Result != fr.Result ||
			a.Kind != fr.Kind || a.EffectKey != fr.EffectKey || a.ActionID != fr.ActionID {
			t.Fatalf("receipt %d filled = %s %s %s %s, one at a time %s %s %s %s", i+1, fr.Kind, fr.ReceiptID,
				fr.Result, fr.EffectKey, a.Kind, a.ReceiptID, a.Result, a.EffectKey)
		}
	}

	// The store works on after a fill: a new call commits, a filled key is refused as a duplicate.
	fx := &fixture{t: t, b: b, st: filled}
	if e := fx.run(newCall(newID("after:")), t0, store.Committed); e.State != store.Committed {
		t.Errorf("a call after the fill ended %s, want committed", e.State)
	}
	dup := newCall("charge:fill_9500") // round 9,500 of the fill committed under this key
	if prefill.KindOf(9500, first) != prefill.Commit {
		t.Fatalf("round 9500 is not a commit: pick another key")
	}
	held := fx.effect(dup.Key)
	dup.Hash = held.ActionHash // the same call again, not other arguments
	req := dup.reserve(t0)
	req.Action, req.Arguments, req.Receipt.Action, req.Receipt.Arguments = held.Action, held.Arguments, held.Action, held.Arguments
	res, err := filled.Reserve(ctx, req)
	if err != nil || res.Refusal == nil || res.Refusal.Reason != "committed" {
		t.Errorf("Reserve(a filled committed key) = %+v, %v; want refused committed", res, err)
	}

	// A fill that fails writes nothing, and one Fill does not write is refused before anything.
	head, err := filled.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := prefill.New("bad", first).Next(nil, first+500, t0)
	bad = append(bad, store.FillCall{Answer: &store.AnswerRequest{Now: t0, ID: "apr_none", Grant: true, Approver: approver}})
	if err := f.Fill(ctx, bad); err == nil {
		t.Errorf("Fill(answer of an unknown request) = nil, want an error")
	}
	keyed := prefill.New("keyed", first).Next(nil, first+500, t0)
	keyed[0].Reserve.RequestKey, keyed[0].Reserve.Agent = "req-1", agent
	var fe *store.FillError
	if err := f.Fill(ctx, keyed); !errors.As(err, &fe) || fe.Field != "Reserve.RequestKey" {
		t.Errorf("Fill(a reservation with a request key) = %v, want a *store.FillError naming Reserve.RequestKey", err)
	}
	after, err := filled.Head(ctx)
	if err != nil || after != head {
		t.Errorf("head after failed fills = %+v, %v; want %+v unchanged", after, err, head)
	}
}

// readAll reads every receipt of st, decoded, in chain order.
func readAll(t *testing.T, st store.Store) []*receipt.Receipt {
	t.Helper()
	var out []*receipt.Receipt
	for s, err := range st.Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatalf("Receipts() = %v", err)
		}
		var rc receipt.Receipt
		if err := json.Unmarshal(s.Doc, &rc); err != nil {
			t.Fatalf("receipt %d: %v", s.Seq, err)
		}
		out = append(out, &rc)
	}
	return out
}
