// Package latch makes consequential actions safe to execute: it sits between the decision to act
// and the call that acts, and refuses to knowingly act twice.
//
// A billing worker charges an invoice, the processor commits the charge, the reply is lost, the
// task raises, and the queue retries exactly as configured: the customer is charged twice by a
// system working as designed. latch wraps the function that charges, so that the retry meets a
// record saying the first attempt's outcome is unknown, and is refused until someone finds out.
//
//	g, err := latch.Open(ctx, nil) // ./latch.yaml; SQLite store in ./.latch/state.db
//	…
//	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
//		return processor.Charge(ctx, c.InvoiceID, c.Amount, latch.IdempotencyToken(ctx)) // per-attempt key
//	}, nil)
//
//	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
//	id, err := charge(ctx, Charge{InvoiceID: "inv_88", Amount: 24900})
//	switch {
//	case errors.Is(err, latch.ErrDuplicateEffect): // already charged: do not retry
//	case errors.Is(err, latch.ErrAmbiguousEffect): // an earlier attempt's outcome is unknown: a human decides
//	…
//
// The whole program is the package's quickstart example.
//
// # Policies
//
// A policy file (latch.policy/v1) lists the actions that may run and how much autonomy each gets:
// allow, approve (a human decides) or deny. Anything not listed is denied; a missing or invalid
// policy means no guard can be built; a call with no principal is refused and leaves nothing.
// Loading is strict — an unknown key, a float, a bad template each name their line and column —
// so a typo can never widen what runs. See package policy.
//
// # Effects
//
// Each action may name its effect with a template ("charge:{invoice_id}"). One effect key is
// executed at most once across goroutines, processes and hosts: the key is reserved in one
// atomic write before the function runs, and the outcome is written after. An executor that
// returns nil commits; one that returns NotExecuted(err) says nothing happened, and the key may
// be retried; any other error, a panic or a cancelled context leaves the effect ambiguous, and
// every later attempt is refused with ErrAmbiguousEffect until a human (Guard.Resolve, or
// `latch resolve`) or an Options.Reconcile hook says what happened — asked before the next call
// reserves the key, and by the sweeper (Guard.SweepEvery) without a call, with a deadline and a
// backoff, one process at a time. Inside the executor, IdempotencyToken gives a per-attempt token
// to pass to the remote as its idempotency key.
//
// An executor that must wait mid-call for an answer returns Suspend(request): the effect stays
// executing under the same attempt, and the caller gets a *SuspendedError with the one token
// that resumes it. Guard.Resume runs the executor again, ResumedFrom(ctx) holding the answer —
// once per suspension, for the exact token, the same principal and arguments, under a live
// lease; a lapsed lease is ambiguous. The whole execution keeps one receipt.
//
// # Approvals
//
// A call the policy sends to a human stores an approval request bound to the SHA-256 of the exact
// action (name, canonical arguments, resource, principal, environment) and returns
// *ApprovalRequiredError. Once granted (Guard.Approve, `latch approve`), the call is made again
// with WithApproval: the approval is spent in the same write that reserves the effect, it is
// single-use, it expires, and it matches no other action — an approval for €2,000 cannot pay
// €5,000. Options.Wait blocks until the request is answered instead.
//
// An approver may narrow the arguments the policy marks editable when granting ("yes, but
// €400"): the request then binds the edited action, the requested arguments are refused
// approval_mismatch with the approved ones on the error (ApprovalMismatchError.Arguments,
// Guard.Approved), and the receipt of the call records both and who edited.
//
// # Receipts
//
// Every decided call writes a JSON receipt hash-chained to the one before it; receipt.Verify (and
// `latch receipts --verify`) walks the chain and names an edit, a deletion or a reordering by its
// seq. An allowed call with an effect key costs exactly two write transactions: reserve and
// record; the events of the pipeline are written inside them.
//
// # Authority
//
// A policy may add an authority section: which principal may propose which action, with
// delegation that can only narrow. Without one there is no authority axis. A grant may be bound
// to tasks (a job, a ticket, a workflow): a call names its task with Options.Task or WithTask,
// the receipt records it, and it is never part of the action hash. A scope provider
// (Config.Scope, Options.Scope, or the policy's scopes section) narrows further, per call: a call
// whose resource is not among those its principal is assigned is refused out_of_scope before
// anything is reserved, and the receipt records only the scope's hash (docs/scopes.md). Its
// break-glass envelopes grant nothing until a verified person opens one (Guard.BreakGlass): a
// recorded, expiring, revocable grant whose calls name the envelope in their receipts.
//
// # Budgets
//
// A grant or an action may carry budgets: at most so many calls, or so much of an integer
// argument, within a rolling window. An admitted call is charged against every budget of the
// grant that allowed it, every grant above that one, and its action, in the transaction that
// reserves its effect key; one that would pass a limit is refused with a *BudgetError
// (budget_exhausted), and a charge is given back only when its effect becomes failed
// (docs/budgets.md).
package latch
