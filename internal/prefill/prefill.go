// Package prefill makes the calls `latch bench --prefill` writes into a store to grow it to
// millions of receipts quickly: the requests the pipeline would make for a realistic mix of
// calls, written many to a transaction through the store's own write methods (store.Filler), so
// that the store holds exactly what real calls leave — effect and approval rows, events, a
// receipt chain that verifies, the state it implies.
//
// The mix, per 1,000 rounds (a round is one call, or two when a failed call is retried):
//
//	901  a call that commits under a new effect key (1 receipt)
//	 20  a call the policy denies, with no key (1 receipt, result denied)
//	 10  a duplicate of a call committed 100 rounds before, refused (1 receipt, result blocked)
//	 20  a call that needs approval: the request, a person's grant (its record), the call with
//	     the approval, which commits (2 receipts; the approval consumed)
//	 25  a call whose outcome is unknown (ambiguous), then a person's resolution: 20 committed,
//	     5 failed (2 receipts)
//	 20  a call whose executor did not run (failed), then its retry, which commits (2 receipts)
//	  3  a call that fails and is left failed (1 receipt)
//	  1  in 10 of these thousands: a call left ambiguous, waiting for a person (1 receipt)
//
// About 1,045 receipts per 1,000 rounds; the lists an operator reads (ambiguous, failed) have
// content in proportion to the store, at these rates.
package prefill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Action is the action of every filled call, as latch bench's own calls name it.
const Action = "bench.charge"

// Agent is the agent every filled call is made by; Approver answers their approval requests and
// Resolver resolves their ambiguous outcomes.
const (
	Agent    = "latch-bench"
	Approver = "latch-bench-lead"
	Resolver = "cli:latch-bench-lead"
)

// policyHash is the policy hash the filled receipts carry.
var policyHash = "sha256:" + hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("latch bench prefill")); return s[:] }())

// Kind is what a round of the mix makes.
type Kind uint8

// The kinds of round, by their share of the mix (see the package documentation).
const (
	Commit Kind = iota
	Denied
	Duplicate
	Approved
	AmbiguousResolved
	FailedRetried
	Failed
	AmbiguousLeft
)

// KindOf is the kind of round i of a run that started at round first.
func KindOf(i, first int64) Kind {
	switch r := i % 1000; {
	case r < 20:
		return Denied
	case r < 30:
		if i-100 < first {
			return Commit // nothing to duplicate yet
		}
		return Duplicate
	case r < 50:
		return Approved
	case r < 75:
		return AmbiguousResolved
	case r < 95:
		return FailedRetried
	case r < 98:
		return Failed
	case r == 98 && i%10000 == 98:
		return AmbiguousLeft
	}
	return Commit
}

// Tally is what a fill writes, counted as it is generated, so that a filled store can be
// checked against it.
type Tally struct {
	Rounds    int64
	Receipts  int64
	Effects   map[store.State]int64 // effect rows by their final state
	Approvals int64                 // approval rows (all consumed)
}

// Add counts round kind k.
func (t *Tally) Add(k Kind) {
	if t.Effects == nil {
		t.Effects = map[store.State]int64{}
	}
	t.Rounds++
	switch k {
	case Commit:
		t.Receipts++
		t.Effects[store.Committed]++
	case Denied, Duplicate:
		t.Receipts++
	case Approved:
		t.Receipts += 2
		t.Effects[store.Committed]++
		t.Approvals++
	case AmbiguousResolved:
		t.Receipts += 2
		t.Effects[store.Committed]++ // corrected below for the failed fifth
	case FailedRetried:
		t.Receipts += 2
		t.Effects[store.Committed]++
	case Failed:
		t.Receipts++
		t.Effects[store.Failed]++
	case AmbiguousLeft:
		t.Receipts++
		t.Effects[store.Ambiguous]++
	}
}

// Generator makes the calls of one run. Its keys and ids begin with the run's name, so that runs
// into one store never share one.
type Generator struct {
	run   string
	first int64
	Tally Tally
	args  []byte
}

// New returns a generator for run (a name no other run into the store has used: letters and
// digits) whose rounds start at first.
func New(run string, first int64) *Generator { return &Generator{run: run, first: first} }

// Next appends the calls of rounds i (from the generator's first round on) to calls, each at
// now, and counts them.
func (g *Generator) Next(calls []store.FillCall, i int64, now time.Time) []store.FillCall {
	k := KindOf(i, g.first)
	g.Tally.Add(k)
	c := g.call(i, now)
	switch k {
	case Commit:
		return append(calls, store.FillCall{Reserve: c.reserve(), Record: c.record(store.Committed, "")})
	case Denied:
		rc := c.draft()
		rc.EffectKey, rc.Decision, rc.DecisionReason = "", "deny", "rule 3: amount above the limit"
		rc.Result, rc.Error = receipt.Denied, store.ErrorPrefix+"denied "+Action+": rule 3: amount above the limit"
		events := c.proposal("")
		return append(calls, store.FillCall{Record: &store.RecordRequest{Now: now, Receipt: rc, Events: events}})
	case Duplicate:
		d := g.call(i-100, now)
		d.actionID = c.actionID // a new call of the committed one's arguments
		return append(calls, store.FillCall{Reserve: d.reserve()})
	case Approved:
		apr := "apr_" + c.id
		rc := c.draft()
		rc.Decision, rc.DecisionReason = "approve", "rule 2: needs a person"
		return append(calls, store.FillCall{
			Approval: &store.ApprovalRequest{Now: now, Approval: &store.Approval{
				ID: apr, Status: store.Pending, ActionHash: c.hash, Action: c.doc(), ActionName: Action, Agent: Agent,
				PolicyHash: policyHash, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			}, Events: c.proposal(""), Probe: &store.ReserveRequest{
				Now: now, ActionID: c.actionID, Action: Action, ActionHash: c.hash, EffectKey: c.key, Arguments: c.args,
				Lease: lease, Receipt: rc,
			}},
			Answer:  &store.AnswerRequest{Now: now, ID: apr, Grant: true, Approver: Approver, Note: "prefill"},
			Reserve: c.reserveWith(apr),
			Record:  c.recordWith(store.Committed, "", &receipt.ApprovalState{Status: string(store.Consumed), Approver: Approver}, apr),
		})
	case AmbiguousResolved:
		to := store.Committed
		if i%1000 >= 70 {
			to = store.Failed
			g.Tally.Effects[store.Committed]--
			g.Tally.Effects[store.Failed]++
		}
		return append(calls, store.FillCall{
			Reserve: c.reserve(), Record: c.record(store.Ambiguous, "connection reset by peer"),
			Resolve: &store.ResolveRequest{Now: now, Key: c.key, To: to, By: Resolver, Note: "checked with the provider"},
		})
	case FailedRetried:
		retry := g.call(i, now)
		retry.actionID = "act_" + retry.id + "r"
		retry.attempt = 2
		return append(calls,
			store.FillCall{Reserve: c.reserve(), Record: c.record(store.Failed, "card declined")},
			store.FillCall{Reserve: retry.reserve(), Record: retry.record(store.Committed, "")})
	case Failed:
		return append(calls, store.FillCall{Reserve: c.reserve(), Record: c.record(store.Failed, "card declined")})
	case AmbiguousLeft:
		return append(calls, store.FillCall{Reserve: c.reserve(), Record: c.record(store.Ambiguous, "timeout awaiting the provider")})
	}
	return calls
}

// lease is the lease of every filled reservation.
const lease = 5 * time.Minute

// call is one call of a round: its ids, arguments and hash.
type call struct {
	now      time.Time
	id       string // the run and round, 32 characters
	actionID string
	key      string
	args     json.RawMessage
	hash     string
	attempt  int
}

func (g *Generator) call(i int64, now time.Time) *call {
	n := strconv.FormatInt(i, 10)
	id := g.run + "_" + n
	if len(id) < 32 {
		id = g.run + "_" + zeros[:32-len(id)] + n
	}
	g.args = append(g.args[:0], `{"amount":24900,"capture":true,"currency":"EUR","customer":"cus_1","invoice_id":"`...)
	g.args = append(g.args, g.run...)
	g.args = append(g.args, '_')
	g.args = append(g.args, n...)
	g.args = append(g.args, `"}`...)
	args := json.RawMessage(string(g.args))
	sum := sha256.Sum256(args)
	return &call{now: now, id: id, actionID: "act_" + id, key: "charge:" + g.run + "_" + n, args: args,
		hash: "sha256:" + hex.EncodeToString(sum[:]), attempt: 1}
}

const zeros = "00000000000000000000000000000000"

// doc is the action document an approval request holds.
func (c *call) doc() json.RawMessage {
	return json.RawMessage(`{"action":"` + Action + `","agent":"` + Agent + `","arguments":` + string(c.args) + `}`)
}

// draft is the receipt the pipeline drafts for the call before it runs.
func (c *call) draft() *receipt.Receipt {
	return &receipt.Receipt{
		ReceiptID: "rcp_" + c.actionID[4:], ActionID: c.actionID, Action: Action, ActionHash: c.hash,
		Arguments: c.args, Principal: receipt.Principal{Agent: Agent}, Environment: "production",
		Decision: "allow", DecisionReason: "rule 1: amount within the limit", EffectKey: c.key, StartedAt: c.now,
		PolicyHash: policyHash, Mode: "enforce",
	}
}

// proposal is the events that open the call (action_proposed, policy_evaluated).
func (c *call) proposal(approvalID string) []store.Event {
	return []store.Event{
		store.NewEvent(store.EventActionProposed, c.now, c.actionID, c.key, approvalID, map[string]any{
			"action": Action, "action_hash": c.hash, "agent": Agent, "environment": "production", "resource": "", "user": ""}),
		store.NewEvent(store.EventPolicyEvaluated, c.now, c.actionID, c.key, approvalID, map[string]any{
			"decision": "allow", "policy_hash": policyHash, "reason": "rule 1: amount within the limit"}),
	}
}

func (c *call) reserve() *store.ReserveRequest { return c.reserveWith("") }

func (c *call) reserveWith(approvalID string) *store.ReserveRequest {
	rc := c.draft()
	rc.ApprovalID = approvalID
	return &store.ReserveRequest{
		Now: c.now, ActionID: c.actionID, Action: Action, ActionHash: c.hash, EffectKey: c.key, Arguments: c.args,
		Lease: lease, ApprovalID: approvalID, Receipt: rc, Events: c.proposal(""),
	}
}

func (c *call) record(outcome store.State, errText string) *store.RecordRequest {
	return c.recordWith(outcome, errText, nil, "")
}

// recordWith is the record of the call's outcome, as the pipeline makes it once the executor
// returned.
func (c *call) recordWith(outcome store.State, errText string, apr *receipt.ApprovalState, approvalID string) *store.RecordRequest {
	rc := c.draft()
	rc.ApprovalID, rc.Approval = approvalID, apr
	if apr != nil {
		rc.Approver = apr.Approver
	}
	rc.Attempt = c.attempt
	rc.IdempotencyToken = token(c.key, c.attempt)
	rc.Result, rc.FinishedAt = string(outcome), c.now
	req := &store.RecordRequest{Now: c.now, Receipt: rc, EffectKey: c.key, ActionID: c.actionID, Attempt: c.attempt,
		Outcome: outcome}
	switch outcome {
	case store.Committed:
		req.Result = json.RawMessage(`{"id":"ch_1"}`)
	case store.Failed:
		rc.Error, req.Error = store.ErrorPrefix+"not executed: "+errText, errText
	default:
		rc.Error, req.Error = store.ErrorPrefix+"outcome unknown: "+errText, errText
	}
	return req
}

// token is an idempotency token shaped as the pipeline's (a version 8 UUID of the key and
// attempt).
func token(key string, attempt int) string {
	s := sha256.Sum256([]byte("latch.idempotency/v1\x00" + key + "\x00" + strconv.Itoa(attempt)))
	s[6] = s[6]&0x0f | 0x80
	s[8] = s[8]&0x3f | 0x80
	h := hex.EncodeToString(s[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
