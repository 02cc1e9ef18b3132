package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/latchkit/latch/store"
)

// Rows exactly as PostgreSQL holds them: times are bigint unix nanoseconds (NULL for the zero
// time), JSON is bytea (NULL for none). Every write and every read goes through these types, so the
// comparison that settles a lost commit compares what is stored, byte for byte.

// stamp is a time column: unix nanoseconds, NULL for the zero time.
type stamp = pgtype.Int8

// nanos returns t as a time column; a time the column cannot hold exactly is an error.
func nanos(t time.Time) (stamp, error) {
	if t.IsZero() {
		return stamp{}, nil
	}
	n := t.UnixNano()
	if !time.Unix(0, n).Equal(t) {
		return stamp{}, fmt.Errorf("time %s is outside the range the store keeps (years 1678 to 2262)", t.UTC().Format(time.RFC3339Nano))
	}
	return stamp{Int64: n, Valid: true}, nil
}

func fromNanos(n stamp) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// rawJSON returns raw for a bytea column: nil (NULL) when empty.
func rawJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func fromBytes(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// effectRow is a row of effects.
type effectRow struct {
	key, state                   string
	attempt                      int64
	actionID, action, actionHash string
	lease                        stamp
	result                       []byte
	errText, resolvedBy          string
	created, updated             stamp
	arguments                    []byte
	note, conflict               string
}

func toEffectRow(e *store.Effect) (effectRow, error) {
	r := effectRow{key: e.Key, state: string(e.State), attempt: int64(e.Attempt), actionID: e.ActionID, action: e.Action,
		actionHash: e.ActionHash, result: rawJSON(e.Result), errText: e.Error, resolvedBy: e.ResolvedBy,
		arguments: rawJSON(e.Arguments), note: e.Note, conflict: e.Conflict}
	var err error
	for _, f := range []struct {
		dst *stamp
		t   time.Time
	}{{&r.lease, e.LeaseExpiresAt}, {&r.created, e.CreatedAt}, {&r.updated, e.UpdatedAt}} {
		if *f.dst, err = nanos(f.t); err != nil {
			return r, fmt.Errorf("effect %s: %w", e.Key, err)
		}
	}
	return r, nil
}

func (r *effectRow) scan(row pgx.Row) error {
	return row.Scan(&r.key, &r.state, &r.attempt, &r.actionID, &r.action, &r.actionHash, &r.lease, &r.result,
		&r.errText, &r.resolvedBy, &r.created, &r.updated, &r.arguments, &r.note, &r.conflict)
}

// args are the row's values in effectColumns order; legacy: only those of a schema before
// notesVersion.
func (r *effectRow) args(legacy bool) []any {
	a := []any{r.key, r.state, r.attempt, r.actionID, r.action, r.actionHash, r.lease, r.result, r.errText,
		r.resolvedBy, r.created, r.updated}
	if legacy {
		return a
	}
	return append(a, r.arguments, r.note, r.conflict)
}

func (r *effectRow) equal(o *effectRow) bool {
	return r.key == o.key && r.state == o.state && r.attempt == o.attempt && r.actionID == o.actionID &&
		r.action == o.action && r.actionHash == o.actionHash && r.lease == o.lease && bytes.Equal(r.result, o.result) &&
		r.errText == o.errText && r.resolvedBy == o.resolvedBy && r.created == o.created && r.updated == o.updated &&
		bytes.Equal(r.arguments, o.arguments) && r.note == o.note && r.conflict == o.conflict
}

// scanEffect reads an effect row, as selected by effectRead.
func scanEffect(row pgx.Row) (*store.Effect, error) {
	var r effectRow
	if err := r.scan(row); err != nil {
		return nil, err
	}
	return r.effect(), nil
}

func (r *effectRow) effect() *store.Effect {
	return &store.Effect{Key: r.key, State: store.State(r.state), Attempt: int(r.attempt), ActionID: r.actionID,
		Action: r.action, ActionHash: r.actionHash, LeaseExpiresAt: fromNanos(r.lease), Result: fromBytes(r.result),
		Error: r.errText, ResolvedBy: r.resolvedBy, CreatedAt: fromNanos(r.created), UpdatedAt: fromNanos(r.updated),
		Arguments: fromBytes(r.arguments), Note: r.note, Conflict: r.conflict}
}

// approvalRow is a row of approvals.
type approvalRow struct {
	id, status, actionHash  string
	action                  []byte
	actionName, agent, user string
	policyHash              string
	created, expires        stamp
	approver                string
	answered                stamp
	consumedBy              string
	consumed                stamp
	note                    string
	prevDenied, prevDenier  string
	precondHash             string
	precondAt               stamp
}

func toApprovalRow(a *store.Approval) (approvalRow, error) {
	r := approvalRow{id: a.ID, status: string(a.Status), actionHash: a.ActionHash, action: rawJSON(a.Action),
		actionName: a.ActionName, agent: a.Agent, user: a.User, policyHash: a.PolicyHash, approver: a.Approver,
		consumedBy: a.ConsumedBy, note: a.Note, prevDenied: a.PreviousDenied, prevDenier: a.PreviousDeniedBy,
		precondHash: a.PreconditionHash}
	var err error
	for _, f := range []struct {
		dst *stamp
		t   time.Time
	}{{&r.created, a.CreatedAt}, {&r.expires, a.ExpiresAt}, {&r.answered, a.AnsweredAt}, {&r.consumed, a.ConsumedAt},
		{&r.precondAt, a.PreconditionAt}} {
		if *f.dst, err = nanos(f.t); err != nil {
			return r, fmt.Errorf("approval %s: %w", a.ID, err)
		}
	}
	return r, nil
}

func (r *approvalRow) scan(row pgx.Row) error {
	return row.Scan(&r.id, &r.status, &r.actionHash, &r.action, &r.actionName, &r.agent, &r.user, &r.policyHash,
		&r.created, &r.expires, &r.approver, &r.answered, &r.consumedBy, &r.consumed, &r.note, &r.prevDenied, &r.prevDenier,
		&r.precondHash, &r.precondAt)
}

// args are the row's first n values in approvalColumns order (a schema before the latest has
// only the first columns: queries.approvalInsertColumns).
func (r *approvalRow) args(n int) []any {
	a := []any{r.id, r.status, r.actionHash, r.action, r.actionName, r.agent, r.user, r.policyHash, r.created,
		r.expires, r.approver, r.answered, r.consumedBy, r.consumed, r.note, r.prevDenied, r.prevDenier, r.precondHash, r.precondAt}
	return a[:n]
}

func (r *approvalRow) equal(o *approvalRow) bool {
	return r.id == o.id && r.status == o.status && r.actionHash == o.actionHash && bytes.Equal(r.action, o.action) &&
		r.actionName == o.actionName && r.agent == o.agent && r.user == o.user && r.policyHash == o.policyHash &&
		r.created == o.created && r.expires == o.expires && r.approver == o.approver && r.answered == o.answered &&
		r.consumedBy == o.consumedBy && r.consumed == o.consumed && r.note == o.note && r.prevDenied == o.prevDenied &&
		r.prevDenier == o.prevDenier && r.precondHash == o.precondHash && r.precondAt == o.precondAt
}

// scanApproval reads an approval row, as selected by approvalRead.
func scanApproval(row pgx.Row) (*store.Approval, error) {
	var r approvalRow
	if err := r.scan(row); err != nil {
		return nil, err
	}
	return r.approval(), nil
}

func (r *approvalRow) approval() *store.Approval {
	return &store.Approval{ID: r.id, Status: store.ApprovalStatus(r.status), ActionHash: r.actionHash,
		Action: fromBytes(r.action), ActionName: r.actionName, Agent: r.agent, User: r.user, PolicyHash: r.policyHash,
		CreatedAt: fromNanos(r.created), ExpiresAt: fromNanos(r.expires), Approver: r.approver,
		AnsweredAt: fromNanos(r.answered), ConsumedBy: r.consumedBy, ConsumedAt: fromNanos(r.consumed), Note: r.note,
		PreviousDenied: r.prevDenied, PreviousDeniedBy: r.prevDenier, PreconditionHash: r.precondHash,
		PreconditionAt: fromNanos(r.precondAt)}
}

func scanEvent(row pgx.Row) (*store.Event, error) {
	var e store.Event
	var at stamp
	var payload []byte
	if err := row.Scan(&e.ID, &e.Kind, &at, &e.ActionID, &e.EffectKey, &e.ApprovalID, &payload); err != nil {
		return nil, err
	}
	e.Time = fromNanos(at)
	e.Payload = fromBytes(payload)
	return &e, nil
}
