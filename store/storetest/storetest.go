// Package storetest is the conformance suite every latch store backend passes (docs/guarantees.md#stores): the
// retry table, leases, request keys, approvals (binding, single use, expiry, answered once), resolution,
// durability across reopen, the receipt chain, events, and races between goroutines and between
// OS processes on one key. A backend is done when it passes; a behaviour change to a backend
// starts as a case here.
//
// A backend's test package calls it like this:
//
//	func TestMain(m *testing.M) {
//		storetest.Child(backend) // first: a re-executed racer does its part and exits here
//		os.Exit(m.Run())
//	}
//
//	func TestConformance(t *testing.T) { storetest.Run(t, backend) }
//
// Every request carries its own Now, so the suite uses fixed times and never sleeps to make a
// lease lapse.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Backend describes a backend under test.
type Backend struct {
	Name string
	// New returns the URL of a fresh, empty store (new file / new schema), removed with t.Cleanup.
	New func(t *testing.T) string
	// Open opens (creating and migrating if needed) the store at url.
	Open func(ctx context.Context, url string) (store.Store, error)
}

// Run runs the conformance suite against b. Each case gets a fresh store from b.New; cases run in
// parallel.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil || b.Open == nil {
		t.Fatalf("storetest: backend %q needs New and Open", b.Name)
	}
	groups := []struct {
		name string
		run  func(*testing.T, Backend)
	}{
		{"RetryTable", testRetryTable},
		{"Record", testRecord},
		{"RecordOnce", testRecordOnce},
		{"RequestKeys", testRequestKeys},
		{"ExtendLease", testExtendLease},
		{"Approvals", testApprovals},
		{"Answers", testAnswers},
		{"Edits", testEdits},
		{"ReserveWithApproval", testReserveWithApproval},
		{"ApprovalProbe", testApprovalProbe},
		{"ApprovalAgain", testApprovalAgain},
		{"Resolution", testResolution},
		{"LateOutcomes", testLateOutcomes},
		{"ResolutionExtras", testResolutionExtras},
		{"KeyConflict", testKeyConflict},
		{"Durability", testDurability},
		{"ReceiptChain", testReceiptChain},
		{"Events", testEvents},
		{"Errors", testErrors},
		{"InvalidInput", testInvalidInput},
		{"VerifyWhileWriting", testVerifyWhileWriting},
		{"WriteTransactions", testWriteTransactions},
		{"Delegations", testDelegations},
		{"Tokens", testTokens},
		{"Sweep", testSweep},
		{"OnExpiry", testOnExpiry},
		{"Accounts", testAccounts},
		{"Sessions", testSessions},
		{"Retention", testRetention},
		{"Tally", testTally},
		{"PruneWhileWriting", testPruneWhileWriting},
		{"Budgets", testBudgets},
		{"Suspensions", testSuspensions},
		{"Standing", testStanding},
		{"Fill", testFill},
		{"Unsettled", testUnsettled},
		{"Races", testRaces},
		{"ProcessRaces", testProcessRaces},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, b)
		})
	}
}

// The fixed clock and the cast of every case.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	lease    = time.Minute
	agent    = "agent:billing"
	user     = "user:ana"
	approver = "user:bob"
	action   = "billing.charge"
)

var (
	chargeResult = json.RawMessage(`{"charge_id":"ch_1","amount":1200}`)
	arguments    = json.RawMessage(`{"amount":1200,"invoice_id":"inv_88"}`)
	policyHash   = hashOf("policy")
)

// newID returns prefix and 32 random hex digits, the shape of latch's ids.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// call is one proposed call: an action with its own id, under an effect key.
type call struct {
	ActionID   string
	Hash       string
	Key        string
	ApprovalID string
	// Charges are the budget charges its reservation makes; its receipts record them.
	Charges []store.Charge
}

func newCall(key string) call {
	return call{ActionID: newID("act_"), Hash: hashOf(action + " " + key), Key: key}
}

// retry is the next proposal of the same action: a new action id, the same key and hash.
func (c call) retry() call {
	c.ActionID = newID("act_")
	return c
}

func (c call) draft(now time.Time) *receipt.Receipt {
	return &receipt.Receipt{
		ReceiptID: newID("rcp_"), ActionID: c.ActionID, Action: action, ActionHash: c.Hash, Arguments: arguments,
		Resource: "invoice:inv_88", Principal: receipt.Principal{Agent: agent, User: user}, Environment: "production",
		Decision: "allow", DecisionReason: "rule charge", ApprovalID: c.ApprovalID, EffectKey: c.Key,
		StartedAt: now, PolicyHash: policyHash, Mode: "enforce", BudgetCharges: receiptCharges(c.Charges),
	}
}

// receiptCharges is how a call's receipt records its reservation's charges.
func receiptCharges(cs []store.Charge) []receipt.BudgetCharge {
	var out []receipt.BudgetCharge
	for _, c := range cs {
		out = append(out, receipt.BudgetCharge{Budget: c.Budget, Metric: c.Metric, Amount: c.Amount, Limit: c.Limit,
			Window: store.FormatWindow(c.Window)})
	}
	return out
}

func (c call) reserve(now time.Time) *store.ReserveRequest {
	return &store.ReserveRequest{
		Now: now, ActionID: c.ActionID, Action: action, ActionHash: c.Hash, EffectKey: c.Key, Lease: lease,
		ApprovalID: c.ApprovalID, Receipt: c.draft(now), Arguments: arguments, Charges: c.Charges,
	}
}

// record is the end of attempt for c with the given outcome; Result and Error are filled as an
// executor would leave them.
func (c call) record(now time.Time, attempt int, outcome store.State) *store.RecordRequest {
	rc := c.draft(now)
	rc.Result = string(outcome)
	rc.Attempt = attempt
	req := &store.RecordRequest{Now: now, Receipt: rc, EffectKey: c.Key, ActionID: c.ActionID, Attempt: attempt, Outcome: outcome}
	switch outcome {
	case store.Committed:
		req.Result = chargeResult
	case store.Failed:
		req.Error = "card declined (not executed)"
	case store.Ambiguous:
		req.Error = "context deadline exceeded"
	}
	rc.Error = req.Error
	return req
}

// receiptOnly is a Record that writes only a receipt (a call with no effect key).
func receiptOnly(c call, now time.Time, result string) *store.RecordRequest {
	rc := c.draft(now)
	rc.Result = result
	rc.FinishedAt = now
	return &store.RecordRequest{Now: now, Receipt: rc}
}

func newApproval(hash string, now time.Time) *store.Approval {
	return &store.Approval{
		ID: newID("apr_"), Status: store.Pending, ActionHash: hash, ActionName: action,
		Action: json.RawMessage(`{"schema":"latch.action/v1","name":"billing.charge"}`),
		Agent:  agent, User: user, PolicyHash: policyHash, CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
}

// fixture is one fresh store and the helpers every case uses; each helper fails the test on an
// unexpected error.
type fixture struct {
	t   *testing.T
	b   Backend
	url string
	st  store.Store
}

func newFixture(t *testing.T, b Backend) *fixture {
	t.Helper()
	url := b.New(t)
	return &fixture{t: t, b: b, url: url, st: openStore(t, b, url)}
}

func openStore(t *testing.T, b Backend, url string) store.Store {
	t.Helper()
	st, err := b.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v", url, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return st
}

func (f *fixture) reserve(req *store.ReserveRequest) *store.ReserveResult {
	f.t.Helper()
	res, err := f.st.Reserve(f.t.Context(), req)
	if err != nil {
		f.t.Fatalf("Reserve(%s, %s) = %v", req.EffectKey, req.ActionID, err)
	}
	return res
}

func (f *fixture) record(req *store.RecordRequest) *store.RecordResult {
	f.t.Helper()
	res, err := f.st.Record(f.t.Context(), req)
	if err != nil {
		f.t.Fatalf("Record(%s, %s) = %v", req.EffectKey, req.ActionID, err)
	}
	return res
}

// reserved reserves c at now and fails unless it was reserved.
func (f *fixture) reserved(c call, now time.Time) *store.ReserveResult {
	f.t.Helper()
	res := f.reserve(c.reserve(now))
	if !res.Reserved {
		f.t.Fatalf("Reserve(%s, %s) refused: %+v", c.Key, c.ActionID, res.Refusal)
	}
	return res
}

// run takes c through one whole attempt: reserve at now, record outcome a second later.
func (f *fixture) run(c call, now time.Time, outcome store.State) *store.Effect {
	f.t.Helper()
	res := f.reserved(c, now)
	rec := f.record(c.record(now.Add(time.Second), res.Effect.Attempt, outcome))
	if rec.Lost {
		f.t.Fatalf("Record(%s, %s) lost the key", c.Key, c.ActionID)
	}
	return rec.Effect
}

func (f *fixture) effect(key string) *store.Effect {
	f.t.Helper()
	e, err := f.st.Effect(f.t.Context(), key)
	if err != nil {
		f.t.Fatalf("Effect(%s) = %v", key, err)
	}
	return e
}

func (f *fixture) noEffect(key string) {
	f.t.Helper()
	if e, err := f.st.Effect(f.t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		f.t.Errorf("Effect(%s) = %+v, %v, want ErrNotFound", key, e, err)
	}
}

func (f *fixture) approval(id string) *store.Approval {
	f.t.Helper()
	a, err := f.st.Approval(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("Approval(%s) = %v", id, err)
	}
	return a
}

func (f *fixture) createApproval(hash string, now time.Time) *store.Approval {
	f.t.Helper()
	a := newApproval(hash, now)
	res, err := f.st.CreateApproval(f.t.Context(), &store.ApprovalRequest{Now: now, Approval: a})
	if err != nil {
		f.t.Fatalf("CreateApproval(%s) = %v", a.ID, err)
	}
	if res.Refused != nil || res.Approval == nil {
		f.t.Fatalf("CreateApproval(%s) refused: %+v", a.ID, res.Refused)
	}
	return res.Approval
}

func (f *fixture) answer(id string, grant bool, now time.Time) *store.Approval {
	f.t.Helper()
	a, err := f.st.AnswerApproval(f.t.Context(), &store.AnswerRequest{Now: now, ID: id, Grant: grant, Approver: approver})
	if err != nil {
		f.t.Fatalf("AnswerApproval(%s, grant=%t) = %v", id, grant, err)
	}
	return a
}

// granted creates an approval for hash at t0 and grants it a minute later.
func (f *fixture) granted(hash string) *store.Approval {
	f.t.Helper()
	a := f.createApproval(hash, t0)
	return f.answer(a.ID, true, t0.Add(time.Minute))
}

func (f *fixture) receipts(flt store.ReceiptFilter) []receipt.Sealed {
	f.t.Helper()
	var out []receipt.Sealed
	for r, err := range f.st.Receipts(f.t.Context(), flt) {
		if err != nil {
			f.t.Fatalf("Receipts(%+v) = %v", flt, err)
		}
		out = append(out, r)
	}
	return out
}

func (f *fixture) head() receipt.Head {
	f.t.Helper()
	h, err := f.st.Head(f.t.Context())
	if err != nil {
		f.t.Fatalf("Head() = %v", err)
	}
	return h
}

func (f *fixture) events(flt store.EventFilter) []*store.Event {
	f.t.Helper()
	evs, err := f.st.Events(f.t.Context(), flt)
	if err != nil {
		f.t.Fatalf("Events(%+v) = %v", flt, err)
	}
	return evs
}

func (f *fixture) effects(flt store.EffectFilter) []*store.Effect {
	f.t.Helper()
	es, err := f.st.Effects(f.t.Context(), flt)
	if err != nil {
		f.t.Fatalf("Effects(%+v) = %v", flt, err)
	}
	return es
}

func (f *fixture) approvals(flt store.ApprovalFilter) []*store.Approval {
	f.t.Helper()
	as, err := f.st.Approvals(f.t.Context(), flt)
	if err != nil {
		f.t.Fatalf("Approvals(%+v) = %v", flt, err)
	}
	return as
}

// verify checks the whole chain against the head and returns how many receipts it holds.
func (f *fixture) verify() int64 {
	f.t.Helper()
	return verifyStore(f.t, f.st)
}

func verifyStore(t *testing.T, st store.Store) int64 {
	t.Helper()
	rep, err := store.VerifyChain(t.Context(), st)
	if err != nil {
		t.Fatalf("VerifyChain() = %v", err)
	}
	if !rep.OK {
		t.Errorf("Verify() breaks: %+v", rep.Breaks)
	}
	return rep.Verified
}

// jsonEqual compares JSON by value, not by bytes: a backend may keep JSON in a column type that
// normalizes it (Postgres jsonb). Receipt documents are bytes, and compared as bytes.
var jsonEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
})

// same fails the test when got differs from want.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := cmp.Diff(want, got, jsonEqual); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// doc decodes a sealed receipt's document.
func doc(t *testing.T, s receipt.Sealed) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.Doc, &m); err != nil {
		t.Fatalf("receipt %d: %v", s.Seq, err)
	}
	return m
}

// docString returns a string field of a sealed receipt ("" for null).
func docString(t *testing.T, s receipt.Sealed, field string) string {
	t.Helper()
	v, _ := doc(t, s)[field].(string)
	return v
}

func wantReserved(t *testing.T, what string, res *store.ReserveResult) {
	t.Helper()
	if !res.Reserved || res.Refusal != nil {
		t.Fatalf("%s: Reserved = %t, Refusal = %+v; want reserved", what, res.Reserved, res.Refusal)
	}
}

func wantRefused(t *testing.T, what string, res *store.ReserveResult, byApproval bool, reason string) {
	t.Helper()
	if res.Reserved || res.Refusal == nil {
		t.Fatalf("%s: Reserved = %t, Refusal = %+v; want refused %s", what, res.Reserved, res.Refusal, reason)
	}
	if res.Refusal.Approval != byApproval || res.Refusal.Reason != reason {
		t.Fatalf("%s: Refusal = %+v, want Approval=%t Reason=%s", what, res.Refusal, byApproval, reason)
	}
	if res.Refusal.Detail == "" {
		t.Errorf("%s: Refusal.Detail is empty", what)
	}
}

// wantBlockedReceipt checks that a refused reservation wrote its blocked receipt.
func wantBlockedReceipt(t *testing.T, what string, res *store.ReserveResult) {
	t.Helper()
	if res.Receipt == nil {
		t.Fatalf("%s: no receipt, want a blocked one", what)
	}
	if got := docString(t, *res.Receipt, "result"); got != receipt.Blocked {
		t.Errorf("%s: receipt result = %q, want %q", what, got, receipt.Blocked)
	}
	if got := docString(t, *res.Receipt, "error"); got != res.Refusal.Text() {
		t.Errorf("%s: receipt error = %q, want the refused caller's message %q", what, got, res.Refusal.Text())
	}
}

func kinds(evs []*store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func seqs(rs []receipt.Sealed) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

// increasing checks that event ids strictly increase.
func increasing(t *testing.T, what string, evs []*store.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Errorf("%s: event id %d follows %d", what, evs[i].ID, evs[i-1].ID)
		}
	}
}
