package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/latchkit/latch/internal/safetext"
)

// A request key makes a reservation replayable. A caller whose reply to a reservation was lost
// (a dropped connection, a process killed just after it asked) asks again with the same key
// and is handed the same reservation — the same action id and attempt, the same lease — instead
// of being refused in_progress by its own attempt until the lease lapses into ambiguous. The key
// is stored with the reservation, in its transaction: a replay works after a restart and from any
// process serving the store.
//
// A key belongs to the principal that first used it, for one action hash, effect key and
// approval: presented by another principal, or for anything else, it is refused with a
// *RequestKeyError and nothing is written. A replay is answered while the attempt it reserved
// still holds its key under a live lease; once that attempt's outcome is recorded (or its lease
// lapsed) the key's request is decided as any duplicate of the effect is decided now — refused
// committed with the stored result, refused ambiguous, or, after a failure, a new attempt that
// the key then names. A key is kept as long as the effect it names: a prune that removes the
// settled effect removes its keys.

// MaxRequestKey is the longest request key, in bytes.
const MaxRequestKey = 255

// ErrRequestKeyMismatch is matched by the error of a reservation whose request key was used
// before by another principal or for another request (*RequestKeyError).
var ErrRequestKeyMismatch = errors.New("request key used for another request")

// RequestKeyError refuses a reservation whose request key names another request. Reason is
// request_key_other_principal (another principal used the key), request_key_other_action
// (another action hash: other arguments, resource or environment),
// request_key_other_effect_key or request_key_other_approval. Nothing is written.
type RequestKeyError struct {
	Key    string
	Reason string
	Detail string
}

func (e *RequestKeyError) Error() string {
	return "request key " + safetext.Quote(e.Key) + ": " + e.Reason + ": " + e.Detail
}

// Is matches ErrRequestKeyMismatch.
func (e *RequestKeyError) Is(target error) bool { return target == ErrRequestKeyMismatch }

// RequestKey is a stored request key: who used it, for which request, and the reservation it
// names (the action id and attempt of the last reservation made with it).
type RequestKey struct {
	Key        string
	Agent      string
	User       string
	ActionHash string
	EffectKey  string
	ApprovalID string
	ActionID   string
	Attempt    int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// RequestKeyWrite is a request key a reservation writes: an insert (Prev nil) or a
// compare-and-set against Prev on (key, action id, attempt).
type RequestKeyWrite struct {
	Prev *RequestKey
	Next RequestKey
}

// CheckRequestKey refuses a request key that is empty, longer than MaxRequestKey bytes, or holds
// a byte other than ASCII letters, digits and - _ . : ~ + / = (what UUIDs, ULIDs and base64
// tokens are written with). The error matches ErrInvalidInput.
func CheckRequestKey(key string) error {
	if key == "" {
		return &InputError{Field: "request key", Value: key, Reason: "is empty"}
	}
	if len(key) > MaxRequestKey {
		return &InputError{Field: "request key", Value: key,
			Reason: "is " + strconv.Itoa(len(key)) + " bytes long, at most " + strconv.Itoa(MaxRequestKey) + " are allowed"}
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '~', c == '+', c == '/', c == '=':
		default:
			return &InputError{Field: "request key", Value: key,
				Reason: fmt.Sprintf("byte %d is %s: only ASCII letters, digits and - _ . : ~ + / = are allowed", i, strconv.QuoteRune(rune(c)))}
		}
	}
	return nil
}

// PlanReplay decides, before PlanReserve, what a reservation with a request key does given the
// key's stored row (nil when the key is new) and the effect record under the request's effect
// key (nil when none). It returns true when the request replays the reservation the key names:
// that attempt still holds the effect under a live lease. It returns false when the request is
// decided as any other (a new key, or a key whose attempt has ended), and a *RequestKeyError when
// the key names another principal's request or another request.
func PlanReplay(req *ReserveRequest, rk *RequestKey, eff *Effect) (bool, error) {
	if rk == nil || req.RequestKey == "" {
		return false, nil
	}
	refuse := func(reason, detail string) error {
		return &RequestKeyError{Key: req.RequestKey, Reason: reason, Detail: detail}
	}
	switch {
	case rk.Agent != req.Agent || rk.User != req.User:
		return false, refuse("request_key_other_principal", "the key was used by another principal: a key names one request of one caller")
	case rk.ActionHash != req.ActionHash && req.KeyNamesEffect && rk.EffectKey == req.EffectKey && rk.ApprovalID == req.ApprovalID:
		// The caller's key names the effect itself: other arguments under it are another call
		// of one effect, which the effect's record decides (key_conflict), as it does for any
		// effect key.
		return false, nil
	case rk.ActionHash != req.ActionHash:
		return false, refuse("request_key_other_action", fmt.Sprintf("the key was used for action hash %s, this request is %s (other arguments, resource or environment): a key names one request",
			rk.ActionHash, req.ActionHash))
	case rk.EffectKey != req.EffectKey:
		return false, refuse("request_key_other_effect_key", fmt.Sprintf("the key was used for effect %s, this request is for %s",
			safetext.Quote(rk.EffectKey), safetext.Quote(req.EffectKey)))
	case rk.ApprovalID != req.ApprovalID:
		return false, refuse("request_key_other_approval", fmt.Sprintf("the key was used presenting approval %s, this request presents %s",
			safetext.Quote(rk.ApprovalID), safetext.Quote(req.ApprovalID)))
	}
	return eff != nil && eff.State == Executing && eff.ActionID == rk.ActionID && eff.Attempt == rk.Attempt &&
		req.Now.Before(eff.LeaseExpiresAt), nil
}

// replayPlan is the plan of a replayed reservation: it writes nothing and answers with the
// reservation the key names, as it now stands.
func replayPlan(eff *Effect) *ReservePlan {
	p := &ReservePlan{}
	p.Result.Reserved, p.Result.Replayed, p.Result.Effect = true, true, eff
	return p
}

// PlanKeyedReserve is PlanReserve for a request that may carry a request key: rk is the key's
// stored row (nil when new or when the request has none). A replay writes nothing; a reservation
// writes the key with it (plan.RequestKey); a refusal leaves the key as it was; held is as
// PlanReserve takes it. The error is a
// *RequestKeyError, with nothing to write.
func PlanKeyedReserve(req *ReserveRequest, rk *RequestKey, eff *Effect, apr *Approval, st *Standing, held []int64) (*ReservePlan, error) {
	replay, err := PlanReplay(req, rk, eff)
	switch {
	case err != nil:
		return nil, err
	case replay:
		return replayPlan(eff), nil
	}
	p := planReserve(req, eff, apr, st, held)
	if req.RequestKey != "" && p.Result.Reserved && p.Result.Refusal == nil && p.Effect != nil {
		next := RequestKey{Key: req.RequestKey, Agent: req.Agent, User: req.User, ActionHash: req.ActionHash,
			EffectKey: req.EffectKey, ApprovalID: req.ApprovalID, ActionID: req.ActionID, Attempt: p.Effect.Next.Attempt,
			CreatedAt: req.Now, UpdatedAt: req.Now}
		if rk != nil {
			next.CreatedAt = rk.CreatedAt
		}
		p.RequestKey = &RequestKeyWrite{Prev: rk, Next: next}
	}
	return p, nil
}

// RequestKeyReader is a store that reads a request key outside a reservation: what a Begin that
// presents no approval asks, to find the approval its key's live reservation spent (a begin that
// waited for its approval, whose answer was lost). Both backends implement it.
type RequestKeyReader interface {
	// RequestKey returns the stored request key; an error matching ErrNotFound when it was never
	// used.
	RequestKey(ctx context.Context, key string) (*RequestKey, error)
}
