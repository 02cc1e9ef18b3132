// Package latchgenkit protects the tools of a Genkit (github.com/firebase/genkit/go) agent with
// latch, so that a tool call the model repeats — after a lost reply, a retried generation, a
// restarted flow — does its effect at most once, and a call the policy holds for a person waits
// in Genkit's own tool interrupt until that person answers.
//
// Wrap turns a tool function into one whose every call goes through a latch.Guard as a policy
// action. The tool's input is the action's arguments (its JSON field names are the names policy
// conditions and the effect key template use), so the effect key comes from the arguments the
// model sent. DefineTool wraps and registers in one step.
//
// What the model reads. Genkit ends the whole generation when a tool returns an error, so a
// refusal is not an error here: the tool answers a Result whose Refusal says, in latch's one
// refusal vocabulary (latch.RefusalOf, docs/errors.md), what happened and what to do:
//
//	ran                Result.Output is the tool's output
//	committed          a duplicate: the effect already happened; Result.Output is the stored
//	                   result of that call, and the tool function does not run again
//	outcome_unknown    the tool function failed without saying it did not act (a lost reply,
//	                   a timeout): the effect is ambiguous until a person or a reconcile hook
//	                   resolves it, and every retry is refused ambiguous meanwhile
//	anything else      refused (denied, approval_refused, in_progress, …): the tool did not run
//
// Approvals. When the policy requires a person's approval, the tool interrupts the generation
// with Genkit's tool interrupt (ai.ToolContext.Interrupt): the response finishes "interrupted",
// and InterruptOf reads the approval request's id from the interrupted tool request. Once a
// person grants it (latch approve, the console, Guard.Approve), Restart builds the restart
// part that carries the id back, and a generation resumed with ai.WithToolRestarts runs the tool
// once, spending the approval; the same restart again answers the stored result. An approval is
// bound to the exact arguments: a restart with other arguments is refused approval_mismatch.
// Restarted before the person answers, the generation fails with an error naming the request
// and approval_pending (Genkit does not let a restarted call interrupt again), and the
// interrupted response stays resumable.
//
// A program that pauses for a person in its own way sets Config.Interrupter
// (interrupt.Interrupter, interrupt.Poller for one that blocks): an approval-required call then
// waits on it inside the tool instead of interrupting the generation, and runs once the
// Interrupter answers resume.
//
// The few lines an agent adds are in docs/integrations/genkit.md of the latch repository.
package latchgenkit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/toolcall"
)

// Config configures Wrap and DefineTool. A nil *Config means all defaults.
type Config struct {
	// Principal is who the agent acts as (Agent required when set). Zero: the principal of the
	// generation's context (latch.WithPrincipal) or the guard's identity provider; with neither,
	// every call is refused no_principal.
	Principal latch.Principal
	// Options are the protected call's options: an effect key template overriding the policy's,
	// the lease, a reconcile hook. Options.Wait blocks the tool until a person answers instead
	// of interrupting the generation.
	Options *latch.Options
	// Interrupter, when set, is the wait of a call the policy sends to a person, instead of
	// Genkit's tool interrupt: the tool hands it the approval_required refusal and blocks until
	// it answers; on interrupt.Resume it runs the call again, once, unchanged (the guard finds
	// the grant for its exact arguments and spends it), and the model reads its output; on
	// interrupt.Denied or interrupt.Expired the model reads the refusal (approval_denied,
	// approval_expired). An error of the wait ends the generation with it. Nil interrupts the
	// generation with Genkit's tool interrupt.
	Interrupter interrupt.Interrupter[context.Context]
}

// Result is what a protected tool answers the model: the tool's output, or why it did not run.
type Result[Out any] struct {
	// Output is the tool function's output: of this call, or, when Refusal.Kind is committed,
	// the stored result of the call that did the effect.
	Output *Out `json:"output,omitempty"`
	// Refusal is set when latch did not run the tool function on this call, or ran it and
	// could not learn its outcome.
	Refusal *Refusal `json:"refusal,omitempty"`
}

// Refusal is a latch refusal as a model reads it. Kind and Reason are latch's words
// (latch.RefusalKind, latch.Reason); Message says them in a sentence with what to do.
type Refusal struct {
	Action     string `json:"action"`
	Kind       string `json:"kind"`
	Reason     string `json:"reason"`
	EffectKey  string `json:"effect_key,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Result is the stored result of a committed effect when it does not decode into the tool's
	// output type (a person resolved the effect with a result of another shape).
	Result  json.RawMessage `json:"result,omitempty"`
	Message string          `json:"message"`
	// Detail is latch's error message.
	Detail string `json:"detail,omitempty"`
}

// Interrupt is what a protected tool's interrupt carries: the approval request a person
// answers. It is stored in the interrupted tool request's metadata under the key "latch".
type Interrupt struct {
	Action     string    `json:"action"`
	Reason     string    `json:"reason"` // approval_required
	ApprovalID string    `json:"approval_id"`
	EffectKey  string    `json:"effect_key,omitempty"`
	ActionHash string    `json:"action_hash,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
}

// restartError is why a restarted call did not run: the approval request it needs is not
// granted yet — the restart presents it before a person answered (approval_pending), or presents
// none and latch asks for one (approval_required). A restarted call cannot interrupt again in
// Genkit, so the generation ends with this error's text (Genkit passes a tool's error on as text
// only); the interrupted response stays resumable once a person grants the request.
type restartError struct {
	Action     string
	ApprovalID string
	Reason     latch.Reason
	Err        error // latch's refusal
}

func (e *restartError) Error() string {
	if e.Reason == latch.ReasonApprovalPending {
		return fmt.Sprintf("latchgenkit: %s: approval %s is not answered yet (%s): restart the call once a person grants it",
			e.Action, e.ApprovalID, e.Reason)
	}
	return fmt.Sprintf("latchgenkit: %s: approval %s must be granted first (%s), and a restarted call cannot interrupt: "+
		"restart it with latchgenkit.Restart once a person grants it", e.Action, e.ApprovalID, e.Reason)
}

// Unwrap returns latch's refusal.
func (e *restartError) Unwrap() error { return e.Err }

// metadataKey names latch's entry in an interrupt's metadata and in a restart's resumed
// metadata.
const metadataKey = "latch"

// resumedApprovalKey is the entry of the resumed metadata (ai.ToolContext.Resumed) that carries
// the granted approval's id back to the tool.
const resumedApprovalKey = "latch_approval_id"

// RefusalFor returns the Refusal a model reads for err, an error of a protected call of action
// (nil for a nil error). Kind and Reason are latch.RefusalOf's.
func RefusalFor(action string, err error) *Refusal {
	lr := latch.RefusalOf(err)
	if lr == nil {
		return nil
	}
	r := &Refusal{Action: action, Kind: string(lr.Kind), Reason: string(lr.Reason),
		EffectKey: lr.EffectKey, ApprovalID: lr.ApprovalID, Detail: lr.Detail}
	if lr.Kind == latch.KindCommitted {
		r.Result = lr.Result
	}
	r.Message = fmt.Sprintf("latch refused %s: %s (%s): %s", action, lr.Reason, lr.Kind, toolcall.Advice(lr))
	if r.ApprovalID != "" {
		r.Message += "; approval " + r.ApprovalID
	}
	return r
}

// Wrap returns a Genkit tool function that runs fn as the latch action named action, with the
// tool's input as the action's arguments. fn receives an input decoded afresh from the canonical
// bytes latch decided on, and a ToolContext whose context is the protected call's.
//
// An error fn returns is the call's outcome as latch reads it: latch.NotExecuted(err) says the
// effect did not happen (the key may be retried); any other error leaves the effect ambiguous.
// An interrupt fn raises (ai.ToolContext.Interrupt) is recorded as not executed and passed on to
// Genkit as it is.
//
// Wrap records the action and the input type for latch's Guard.Check, like latch.Protect.
func Wrap[In, Out any](g *latch.Guard, action string, fn ai.ToolFunc[In, Out], cfg *Config) ai.ToolFunc[In, Result[Out]] {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	run := latch.Protect(g, action, func(ctx context.Context, in In) (Out, error) {
		tc := ctx.Value(toolContextKey{}).(*ai.ToolContext)
		out, err := fn(&ai.ToolContext{Context: ctx, Resumed: tc.Resumed, OriginalInput: tc.OriginalInput}, in)
		if interrupted, _ := ai.IsToolInterruptError(err); interrupted {
			// The tool stopped to ask its caller: it did not act, and the interrupt goes on to
			// Genkit through the not-executed error that wraps it.
			return out, latch.NotExecuted(err)
		}
		return out, err
	}, c.Options)
	t := &tool[In, Out]{g: g, action: action, cfg: c}
	return func(tc *ai.ToolContext, in In) (Result[Out], error) {
		ctx := tc.Context
		if c.Principal.Agent != "" {
			ctx = latch.WithPrincipal(ctx, c.Principal)
		}
		if id, ok := tc.Resumed[resumedApprovalKey].(string); ok && id != "" {
			ctx = latch.WithApproval(ctx, id)
		}
		out, err := run(context.WithValue(ctx, toolContextKey{}, tc), in)
		if lr := latch.RefusalOf(err); lr != nil && lr.Reason == latch.ReasonApprovalConsumed && latch.ApprovalFrom(ctx) != "" {
			// The same restart again (its generation's reply was lost): the approval was spent
			// on an earlier run of this call. Asked again without it, latch answers by the
			// effect's state — a committed effect's stored result, an ambiguous one — rather
			// than by the spent approval; an effect that did not happen needs a new approval,
			// which the restart cannot interrupt for (restartError names it).
			out, err = run(context.WithValue(latch.WithApproval(ctx, ""), toolContextKey{}, tc), in)
		}
		if lr := latch.RefusalOf(err); c.Interrupter != nil && lr != nil && lr.Kind == latch.KindApprovalRequired && interrupt.Interruptible(lr) {
			ans, werr := c.Interrupter.Interrupt(ctx, lr)
			switch {
			case werr != nil:
				return Result[Out]{}, fmt.Errorf("latchgenkit: %s: wait for approval %s: %w", action, lr.ApprovalID, werr)
			case ans.Status == interrupt.Resume:
				// Run again, unchanged: the guard finds the grant for the exact arguments.
				out, err = run(context.WithValue(latch.WithApproval(ctx, ""), toolContextKey{}, tc), in)
			case ans.Status == interrupt.Denied || ans.Status == interrupt.Expired:
				// The call presents the answered request, and the guard refuses it by the
				// request's own status (approval_denied, approval_expired), with a receipt.
				out, err = run(context.WithValue(latch.WithApproval(ctx, cmp.Or(ans.ApprovalID, lr.ApprovalID)), toolContextKey{}, tc), in)
			}
		}
		if err == nil {
			return Result[Out]{Output: &out}, nil
		}
		if interrupted, _ := ai.IsToolInterruptError(err); interrupted {
			return Result[Out]{}, err
		}
		return t.answer(ctx, tc, in, err)
	}
}

// DefineTool wraps fn (Wrap) and registers it with gk as the Genkit tool named name, described
// to the model by description.
func DefineTool[In, Out any](gk *genkit.Genkit, g *latch.Guard, action, name, description string, fn ai.ToolFunc[In, Out], cfg *Config) *ai.ToolDef[In, Result[Out]] {
	return genkit.DefineTool(gk, name, description, Wrap(g, action, fn, cfg))
}

type toolContextKey struct{}

// tool is what a wrapped tool's refusals need.
type tool[In, Out any] struct {
	g      *latch.Guard
	action string
	cfg    Config
}

// answer turns a protected call's error into the model's Result, or into Genkit's interrupt
// when a person must answer first.
func (t *tool[In, Out]) answer(ctx context.Context, tc *ai.ToolContext, in In, err error) (Result[Out], error) {
	lr := latch.RefusalOf(err)
	switch {
	case lr.Kind == latch.KindApprovalRequired && !tc.IsResumed():
		return Result[Out]{}, t.interrupt(ctx, tc, in, lr)
	case lr.Kind == latch.KindApprovalRequired || lr.Reason == latch.ReasonApprovalPending:
		// A restart before the person answered: the application's timing, not the model's.
		// Genkit refuses an interrupt in a restarted call (its own error would not name the
		// request), so the generation fails saying which request waits.
		return Result[Out]{}, &restartError{Action: t.action, ApprovalID: lr.ApprovalID, Reason: lr.Reason, Err: err}
	}
	r := RefusalFor(t.action, err)
	res := Result[Out]{Refusal: r}
	if lr.Kind == latch.KindCommitted {
		if out, ok := latch.ResultOf[Out](err); ok {
			res.Output, r.Result = &out, nil
		}
	}
	return res, nil
}

// interrupt raises Genkit's tool interrupt carrying the approval request.
func (t *tool[In, Out]) interrupt(ctx context.Context, tc *ai.ToolContext, in In, lr *latch.Refusal) error {
	it := Interrupt{Action: t.action, Reason: string(latch.ReasonApprovalRequired), ApprovalID: lr.ApprovalID,
		EffectKey: lr.EffectKey, ActionHash: lr.ActionHash, ExpiresAt: lr.ExpiresAt}
	m, err := toMap(it)
	if err != nil {
		return fmt.Errorf("interrupt %s: %w", t.action, err)
	}
	return tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{metadataKey: m}})
}

// InterruptOf returns the approval request a protected tool's interrupt carries: p is one of
// the parts of ai.ModelResponse.Interrupts. It reports false for a part that is not such an
// interrupt (another tool's, or not an interrupt at all).
func InterruptOf(p *ai.Part) (Interrupt, bool) {
	if p == nil || !p.IsInterrupt() {
		return Interrupt{}, false
	}
	meta, ok := p.Metadata["interrupt"].(map[string]any)
	if !ok {
		return Interrupt{}, false
	}
	raw, err := json.Marshal(meta[metadataKey])
	if err != nil {
		return Interrupt{}, false
	}
	var it Interrupt
	if err := json.Unmarshal(raw, &it); err != nil || it.ApprovalID == "" {
		return Interrupt{}, false
	}
	return it, true
}

// Restart returns the part that resumes the interrupted call p of t (with ai.WithToolRestarts)
// presenting the approval request p carries: once a person granted it, the tool runs and
// spends it. newInput, when not nil, replaces the model's arguments (an approval is bound to the
// arguments it was asked for: others are refused approval_mismatch). It fails for a part that is
// not a protected tool's interrupt.
func Restart(t ai.Tool, p *ai.Part, newInput any) (*ai.Part, error) {
	it, ok := InterruptOf(p)
	if !ok {
		return nil, fmt.Errorf("restart %s: the part is not an interrupt of a latch-protected tool", partName(p))
	}
	part := t.Restart(p, &ai.RestartOptions{ReplaceInput: newInput, ResumedMetadata: map[string]any{resumedApprovalKey: it.ApprovalID}})
	if part == nil {
		return nil, fmt.Errorf("restart %s: the part is not a tool request", partName(p))
	}
	return part, nil
}

func partName(p *ai.Part) string {
	if p == nil || p.ToolRequest == nil {
		return "(no tool request)"
	}
	return fmt.Sprintf("%q", p.ToolRequest.Name)
}

// toMap is v as the JSON object Genkit keeps in metadata.
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}
