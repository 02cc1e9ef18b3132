package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

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
	// collapsed into failed. G5 and G10 fail.
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
)

// faultTargets lists, for each fault, the guarantees it makes fail.
var faultTargets = map[string][]string{
	faultApprovalReusable:     {"G1", "G2"},
	faultReserveLies:          {"G3", "G4"},
	faultAmbiguousAsFailed:    {"G5", "G10"},
	faultAllowUnknown:         {"G6"},
	faultAnonymousPrincipal:   {"G7"},
	faultChainBlind:           {"G11"},
	faultLeaseRetry:           {"L1"},
	faultExpiryOffByOne:       {"G8"},
	faultDelegationUnchecked:  {"G9"},
	faultRefuseAll:            {"G3", "G4", "G5", "L1"},
	faultAnyoneEntitled:       {"G17"},
	faultSelfApprovalBytewise: {"G18"},
	faultCountPerSession:      {"G19"},
	faultPrunePastCheckpoint:  {"G29"},
	faultHoldIgnored:          {"G30"},
	faultPruneReseals:         {"G32"},
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

func parseFaults(names []string) (faultSet, error) {
	fs := faultSet{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
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
		fs[faultLeaseRetry] || fs[faultRefuseAll] || fs[faultSelfApprovalBytewise] || fs[faultCountPerSession]
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
}

// Reserve implements the reservation faults.
func (f *faultStore) Reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
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

// Record implements faultAmbiguousAsFailed.
func (f *faultStore) Record(ctx context.Context, req *store.RecordRequest) (*store.RecordResult, error) {
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
