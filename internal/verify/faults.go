package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Fault names, for Config's faults (set by this package's tests). Each breaks latch in one way so
// that a test can show the matching guarantee able to fail; production runs inject none. Store faults wrap the scratch
// store (the backends are untouched); flow faults change what the harness does.
const (
	// faultApprovalReusable accepts a mismatched or consumed approval: the reservation goes ahead
	// as if none had been presented. G1 and G2 fail.
	faultApprovalReusable = "approval_reusable"
	// faultReserveLies reports a reservation refused as committed or in_progress as reserved, as
	// a non-atomic reservation would. G3 and G4 fail.
	faultReserveLies = "reserve_lies"
	// faultAmbiguousAsFailed records an ambiguous outcome as failed (record and receipt): unknown
	// collapsed into failed. G5, G10 and G12 fail.
	faultAmbiguousAsFailed = "ambiguous_as_failed"
	// faultAllowUnknown lets an unlisted action through, as a default-allow policy would. G6
	// fails.
	faultAllowUnknown = "allow_unknown"
	// faultAnonymousPrincipal gives a call without a principal a default one ("anonymous"), as an
	// identity layer that fails open would. G7 fails.
	faultAnonymousPrincipal = "anonymous_principal"
	// faultChainBlind ignores what receipt verification found. G11 fails.
	faultChainBlind = "chain_blind"
	// faultLeaseRetry treats an executing record whose lease expired as reservable, without
	// making it ambiguous. L1 fails.
	faultLeaseRetry = "lease_retry"
	// faultExpiryOffByOne evaluates every call with the clock 1µs behind, as an expiry check
	// that treats expires_at as exclusive of the next instant would. G8 fails.
	faultExpiryOffByOne = "authority_expiry_off_by_one"
	// faultDelegationUnchecked creates delegations straight in the store, without checking that
	// they are contained in their parent, as a Delegate that skipped CheckDelegation would. G9
	// fails.
	faultDelegationUnchecked = "delegation_unchecked"
	// faultRefuseAll refuses every effect reservation: each refusal check would hold, and the
	// positive controls catch it (G3, G4, G5, L1 fail with "control failed").
	faultRefuseAll = "refuse_all"
	// faultAnyoneEntitled gives every approver every role, as an entitlement lookup that fails
	// open would. G17 fails.
	faultAnyoneEntitled = "anyone_entitled"
	// faultSelfApprovalBytewise compares the approver with the requester byte for byte: the
	// requester spelling their name otherwise is recorded as someone else. G18 fails.
	faultSelfApprovalBytewise = "self_approval_bytewise"
	// faultCountPerSession counts answers per session rather than per person: a person's further
	// answer is recorded as someone else's. G19 fails.
	faultCountPerSession = "count_per_session"
	// faultTokenStale hands a renewal the attempt number of the first attempt (the store still
	// records the real one), so its idempotency token is the first attempt's, as a token derived
	// from the key alone would be. G14 fails.
	faultTokenStale = "token_stale"
	// faultAttemptsUnbounded reserves renewals without their action's max_attempts, as a store
	// that forgot the ceiling would. G15 fails.
	faultAttemptsUnbounded = "attempts_unbounded"
	// faultLateOutcomeAnyAttempt records a holder's outcome against whichever attempt holds the
	// key, as a compare-and-set on the key alone would. L2 fails.
	faultLateOutcomeAnyAttempt = "late_outcome_any_attempt"
	// faultConflictUnnamed reports a key_conflict as the plain refusal of the record's state
	// (committed, in_progress), as a store comparing keys alone would. L3 fails.
	faultConflictUnnamed = "conflict_unnamed"
	// faultArgumentsOptional declares the argument L5 misspells optional, undeclared arguments
	// allowed, as a policy engine that skips a condition on an absent argument would behave: a
	// rule that denies on that argument no longer fires. L5 fails where such a rule comes first.
	faultArgumentsOptional = "arguments_optional"
	// faultStateBlind ignores the state_diverged breaks of verification, as a check of the chain
	// alone would. L4 fails.
	faultStateBlind = "state_blind"
	// faultCheckpointsBlind counts every checkpoint as held whatever its check found, as a
	// verifier that only checked signatures would. G28 fails.
	faultCheckpointsBlind = "checkpoints_blind"
	// faultSchemaCurrentOnly treats a document of any earlier receipt schema (v1, v2, v3) as
	// altered, as a verifier that knew only the current version would. G31 fails.
	faultSchemaCurrentOnly = "schema_current_only"
	// faultRevocationIgnored hands the guard its delegations without their revocations, as a
	// cache that never learns of one would. L6 fails.
	faultRevocationIgnored = "revocation_ignored"
	// faultCredentialCached gives G20's guard an identity provider that remembers the principal
	// of each credential it verified once and never asks the verifier (and its revocation feed)
	// again, as a token cache would. G20 fails.
	faultCredentialCached = "credential_cached"
	// faultSkewThresholdUnit opens G13's stores with the largest threshold (5m) instead of the
	// default (1s), as a threshold read in the wrong unit would. G13 fails.
	faultSkewThresholdUnit = "skew_threshold_wrong_unit"
	// faultPreconditionCached answers G16's precondition provider from the first state it read
	// for each call, as a recheck that reused the read made when the request was stored would:
	// the moved state goes unseen. G16 fails.
	faultPreconditionCached = "precondition_cached"
	// faultPolicyApprovalUnrequired opens G21's guard without RequireApprovedPolicy, as a server
	// that dropped its flag on the way to the guard would. G21 fails.
	faultPolicyApprovalUnrequired = "policy_approval_unrequired"
	// faultTransportNotExecuted wraps every transport error of G12's executor in NotExecuted,
	// as a hand-written classifier that took any connection error for "never sent" would. G12
	// fails.
	faultTransportNotExecuted = "transport_errors_not_executed"
	// faultPinIgnored gives G27's gateway its upstream without the pin of the tool under test,
	// as a gateway that did not compare a tool's definition with its pin when deciding a call
	// would: the swapped tool is called. G27 fails.
	faultPinIgnored = "pin_ignored"
)

// faultTargets lists, for each fault, the guarantees it makes fail.
var faultTargets = map[string][]string{
	faultApprovalReusable:         {"G1", "G2"},
	faultReserveLies:              {"G3", "G4"},
	faultAmbiguousAsFailed:        {"G5", "G10", "G12"},
	faultAllowUnknown:             {"G6"},
	faultAnonymousPrincipal:       {"G7"},
	faultChainBlind:               {"G11"},
	faultLeaseRetry:               {"L1"},
	faultExpiryOffByOne:           {"G8"},
	faultDelegationUnchecked:      {"G9"},
	faultRefuseAll:                {"G3", "G4", "G5", "G14", "G15", "G22", "L1", "L2", "L3"},
	faultAnyoneEntitled:           {"G17"},
	faultSelfApprovalBytewise:     {"G18"},
	faultCountPerSession:          {"G19"},
	faultTokenStale:               {"G14"},
	faultAttemptsUnbounded:        {"G15"},
	faultLateOutcomeAnyAttempt:    {"L2"},
	faultConflictUnnamed:          {"L3"},
	faultArgumentsOptional:        {"L5"},
	faultStateBlind:               {"L4"},
	faultCheckpointsBlind:         {"G28"},
	faultSchemaCurrentOnly:        {"G31"},
	faultRevocationIgnored:        {"L6"},
	faultCredentialCached:         {"G20"},
	faultSkewThresholdUnit:        {"G13"},
	faultPreconditionCached:       {"G16"},
	faultPolicyApprovalUnrequired: {"G21"},
	faultTransportNotExecuted:     {"G12"},
	faultPrunePastCheckpoint:      {"G29"},
	faultHoldIgnored:              {"G30"},
	faultPruneReseals:             {"G32"},
	faultTasksIgnored:             {"G24"},
	faultBudgetUnchecked:          {"G22"},
	faultScopeFailsOpen:           {"G23"},
	faultHopUnchecked:             {"G25"},
	faultHopFallback:              {"G25"},
	faultHopReceiptUnnamed:        {"G26"},
	faultPinIgnored:               {"G27"},
}

// faultNames returns every fault name with the guarantees it makes fail.
func faultNames() map[string][]string {
	out := make(map[string][]string, len(faultTargets))
	for k, v := range faultTargets {
		out[k] = slices.Clone(v)
	}
	return out
}

// faultSet is the parsed Config.faults.
type faultSet map[string]bool

// faultAliases are earlier names of faults, still accepted.
var faultAliases = map[string]string{
	// G31's fault was named for the one schema it knew when v2 was current.
	"schema_v2_only": faultSchemaCurrentOnly,
}

func parseFaults(names []string) (faultSet, error) {
	fs := faultSet{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if to, ok := faultAliases[n]; ok {
			n = to
		}
		if _, ok := faultTargets[n]; !ok {
			known := make([]string, 0, len(faultTargets))
			for k := range faultTargets {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, &UsageError{Msg: fmt.Sprintf("unknown fault %q (expected one of %s)", n, strings.Join(known, ", "))}
		}
		fs[n] = true
	}
	return fs, nil
}

func (fs faultSet) list() []string {
	out := make([]string, 0, len(fs))
	for k := range fs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// storeFaults reports whether any fault needs the store wrapper.
func (fs faultSet) storeFaults() bool {
	return fs[faultApprovalReusable] || fs[faultReserveLies] || fs[faultAmbiguousAsFailed] ||
		fs[faultLeaseRetry] || fs[faultRefuseAll] || fs[faultSelfApprovalBytewise] || fs[faultCountPerSession] ||
		fs[faultTokenStale] || fs[faultAttemptsUnbounded] || fs[faultLateOutcomeAnyAttempt] || fs[faultConflictUnnamed] ||
		fs[faultRevocationIgnored] || fs[faultBudgetUnchecked] || fs[faultHopReceiptUnnamed]
}

// AnswerApproval implements the answer faults: the approver is recorded under another name,
// so that the store's own checks of who answered do not see who it is.
func (f *faultStore) AnswerApproval(ctx context.Context, req *store.AnswerRequest) (*store.Approval, error) {
	if f.faults[faultSelfApprovalBytewise] || f.faults[faultCountPerSession] {
		if a, err := f.Store.Approval(ctx, req.ID); err == nil {
			self := store.SameName(req.Approver, a.Agent) || a.User != "" && store.SameName(req.Approver, a.User)
			bytewise := strings.TrimSpace(req.Approver) == a.Agent || a.User != "" && strings.TrimSpace(req.Approver) == a.User
			again := slices.ContainsFunc(a.Answers, func(x store.Answer) bool { return store.SameName(x.Name, req.Approver) })
			if f.faults[faultSelfApprovalBytewise] && self && !bytewise || f.faults[faultCountPerSession] && again {
				r := *req
				r.Approver = fmt.Sprintf("%s (%s %d)", strings.TrimSpace(req.Approver), req.Method, len(a.Answers)+1)
				req = &r
			}
		}
	}
	return f.Store.AnswerApproval(ctx, req)
}

// faultStore is a store.Store that misbehaves as its faults say, in front of a real backend.
type faultStore struct {
	store.Store
	faults faultSet
	mu     sync.Mutex
	real   map[string]int // faultTokenStale: the attempt each renewed key really holds
}

// Reserve implements the reservation faults.
func (f *faultStore) Reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
	if f.faults[faultAttemptsUnbounded] && req.MaxAttempts > 0 {
		r := *req
		r.MaxAttempts = 0
		req = &r
	}
	if f.faults[faultBudgetUnchecked] && req.Charges != nil {
		r := *req
		r.Charges = nil
		req = &r
	}
	res, err := f.reserve(ctx, req)
	if err == nil && f.faults[faultTokenStale] && res.Reserved && res.Effect != nil && res.Effect.Attempt > 1 {
		f.mu.Lock()
		if f.real == nil {
			f.real = map[string]int{}
		}
		f.real[req.EffectKey] = res.Effect.Attempt
		f.mu.Unlock()
		stale := *res
		eff := *res.Effect
		eff.Attempt = 1
		stale.Effect = &eff
		return &stale, nil
	}
	if err == nil && f.faults[faultConflictUnnamed] && res.Refusal != nil && res.Refusal.Reason == "key_conflict" && res.Effect != nil {
		plain := *res
		ref := *res.Refusal
		ref.Reason = "committed"
		if res.Effect.State == store.Executing {
			ref.Reason = "in_progress"
		}
		plain.Refusal = &ref
		return &plain, nil
	}
	return res, err
}

func (f *faultStore) reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
	if f.faults[faultRefuseAll] && req.EffectKey != "" {
		return &store.ReserveResult{Refusal: &store.Refusal{Reason: "in_progress", Detail: "fault refuse_all"}}, nil
	}
	if f.faults[faultApprovalReusable] && req.ApprovalID != "" {
		a, err := f.Store.Approval(ctx, req.ApprovalID)
		if err == nil {
			if reason, _ := store.CheckApproval(a, req.ActionHash, req.Now); reason == "mismatch" || reason == "consumed" {
				r := *req
				r.ApprovalID = ""
				req = &r
			}
		}
	}
	if f.faults[faultLeaseRetry] && req.EffectKey != "" {
		e, err := f.Store.Effect(ctx, req.EffectKey)
		if err == nil && e.State == store.Executing && !req.Now.Before(e.LeaseExpiresAt) {
			return f.lie(req, e.Attempt+1), nil
		}
	}
	if f.faults[faultReserveLies] && req.Receipt != nil {
		// A refusal writes its blocked receipt with the draft's id; the lie below lets the call
		// go on to record a receipt of its own under that id. The refusal gets another.
		r := *req
		rc := *req.Receipt
		rc.ReceiptID = newReceiptID()
		r.Receipt = &rc
		req = &r
	}
	res, err := f.Store.Reserve(ctx, req)
	if err != nil || !f.faults[faultReserveLies] {
		return res, err
	}
	if r := res.Refusal; r != nil && !r.Approval && (r.Reason == "committed" || r.Reason == "in_progress") {
		attempt := 1
		if res.Effect != nil {
			attempt = res.Effect.Attempt
		}
		return f.lie(req, attempt), nil
	}
	return res, nil
}

// lie is a reservation the store never made.
func (f *faultStore) lie(req *store.ReserveRequest, attempt int) *store.ReserveResult {
	return &store.ReserveResult{Reserved: true, Effect: &store.Effect{
		Key: req.EffectKey, State: store.Executing, Attempt: attempt, ActionID: req.ActionID,
		Action: req.Action, ActionHash: req.ActionHash, LeaseExpiresAt: req.Now.Add(req.Lease),
		CreatedAt: req.Now, UpdatedAt: req.Now,
	}}
}

// Record implements faultAmbiguousAsFailed, faultTokenStale, faultLateOutcomeAnyAttempt and
// faultHopReceiptUnnamed.
func (f *faultStore) Record(ctx context.Context, req *store.RecordRequest) (*store.RecordResult, error) {
	if f.faults[faultTokenStale] && req.EffectKey != "" && req.Attempt == 1 {
		f.mu.Lock()
		a, ok := f.real[req.EffectKey]
		f.mu.Unlock()
		if ok {
			r := *req
			r.Attempt = a
			req = &r
		}
	}
	if f.faults[faultLateOutcomeAnyAttempt] && req.EffectKey != "" {
		if eff, err := f.Store.Effect(ctx, req.EffectKey); err == nil && eff.State == store.Executing &&
			(eff.Attempt != req.Attempt || eff.ActionID != req.ActionID) {
			r := *req
			r.Attempt, r.ActionID = eff.Attempt, eff.ActionID
			req = &r
		}
	}
	if f.faults[faultHopReceiptUnnamed] && req.Receipt != nil && req.Receipt.Authority != nil && req.Receipt.Authority.DelegationID != "" {
		r := *req
		rc := *req.Receipt
		au := *rc.Authority
		au.DelegationID = ""
		rc.Authority = &au
		r.Receipt = &rc
		req = &r
	}
	if f.faults[faultAmbiguousAsFailed] && req.Receipt != nil && req.Receipt.Result == receipt.Ambiguous {
		r := *req
		rc := *req.Receipt
		rc.Result = receipt.Failed
		r.Receipt = &rc
		if r.Outcome == store.Ambiguous {
			r.Outcome = store.Failed
		}
		req = &r
	}
	return f.Store.Record(ctx, req)
}

func newReceiptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "rcp_" + hex.EncodeToString(b[:])
}

// principalKey marks a context whose call has a principal, for anonymousIdentity.
type principalKey struct{}

// anonymousIdentity is the identity provider of faultAnonymousPrincipal: the verify principal
// when the call has one, else a default — the fail-open bug G7 exists to catch.
type anonymousIdentity struct{}

func (anonymousIdentity) Principal(ctx context.Context) (latch.Principal, error) {
	if p, ok := ctx.Value(principalKey{}).(latch.Principal); ok {
		return p, nil
	}
	return latch.Principal{Agent: "anonymous"}, nil
}

// The delegation methods forward to the backend, so that a policy's authority section is read
// through a faulty store as through the backend itself.

// CreateDelegation implements store.DelegationStore.
func (f *faultStore) CreateDelegation(ctx context.Context, d *store.Delegation, events []store.Event) error {
	ds, err := f.delegations()
	if err != nil {
		return err
	}
	return ds.CreateDelegation(ctx, d, events)
}

// RevokeDelegation implements store.DelegationStore.
func (f *faultStore) RevokeDelegation(ctx context.Context, req *store.RevokeRequest) (*store.Delegation, error) {
	ds, err := f.delegations()
	if err != nil {
		return nil, err
	}
	return ds.RevokeDelegation(ctx, req)
}

// Delegations implements store.DelegationStore.
func (f *faultStore) Delegations(ctx context.Context) ([]*store.Delegation, error) {
	ds, err := f.delegations()
	if err != nil {
		return nil, err
	}
	all, err := ds.Delegations(ctx)
	if err != nil || !f.faults[faultRevocationIgnored] {
		return all, err
	}
	out := make([]*store.Delegation, len(all))
	for i, d := range all {
		c := *d
		c.RevokedAt, c.RevokedBy = time.Time{}, ""
		out[i] = &c
	}
	return out, nil
}

// LogEvents implements store.DelegationStore.
func (f *faultStore) LogEvents(ctx context.Context, events []store.Event) error {
	ds, err := f.delegations()
	if err != nil {
		return err
	}
	return ds.LogEvents(ctx, events)
}

// Charges implements store.BudgetStore, so that a guard whose policy declares budgets opens over
// a faulty store as over the backend itself.
func (f *faultStore) Charges(ctx context.Context, cf store.ChargeFilter) ([]*store.ChargeRecord, error) {
	bs, ok := f.Store.(store.BudgetStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no budget ledger", f.Store)
	}
	return bs.Charges(ctx, cf)
}

func (f *faultStore) delegations() (store.DelegationStore, error) {
	ds, ok := f.Store.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no delegations", f.Store)
	}
	return ds, nil
}
