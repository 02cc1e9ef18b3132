package store

import (
	"context"
	"errors"
	"time"
)

// Delegation is a stored delegation (docs/authority.md): a narrower grant created beneath a parent (a
// policy grant id, or another delegation's id). Delegations are insert-only; revoking one
// inserts a revocation, which cuts it and everything beneath it.
type Delegation struct {
	ID        string // dlg_ + 32 hex
	Parent    string
	Grant     []byte // the grant document as its author wrote it (YAML), re-read at every evaluation
	CreatedBy string // agent, or agent/user
	CreatedAt time.Time
	RevokedAt time.Time // zero when not revoked
	RevokedBy string
	// Via says how the delegation came to be: ViaBreakGlass for a grant opened in a break-glass
	// envelope (Parent is the envelope's id, CreatedBy the person who opened it), ViaHop for a
	// hop (a delegation addressed to one receiving agent, CreatedBy the sender), "" for a
	// delegation (and every delegation stored before via existed).
	Via string
	// Reason is why a break-glass grant was opened, as its opener wrote it; "" for a
	// delegation.
	Reason string
}

// ViaBreakGlass is the Via of a break-glass grant (docs/authority.md).
const ViaBreakGlass = "break-glass"

// ViaHop is the Via of a hop (docs/agents.md).
const ViaHop = "hop"

// RevokeRequest revokes a delegation.
type RevokeRequest struct {
	Now    time.Time
	ID     string
	By     string
	Events []Event
}

// ErrRevoked is returned when revoking a delegation that is already revoked.
var ErrRevoked = errors.New("delegation already revoked")

// DelegationStore is implemented by backends that keep delegations. A guard whose policy has an
// authority section needs it: without it, every call is denied authority_unreadable.
type DelegationStore interface {
	// CreateDelegation inserts a delegation and its events in one transaction.
	CreateDelegation(ctx context.Context, d *Delegation, events []Event) error
	// RevokeDelegation records the revocation of one delegation in one write: ErrNotFound when
	// there is no such delegation, ErrRevoked when it is already revoked.
	RevokeDelegation(ctx context.Context, req *RevokeRequest) (*Delegation, error)
	// Delegations returns every delegation, revoked ones included, in creation order.
	Delegations(ctx context.Context) ([]*Delegation, error)
	// LogEvents writes events that change no state (a refused delegation) in one transaction.
	LogEvents(ctx context.Context, events []Event) error
	// Once CreateDelegation, RevokeDelegation (req.Events) or LogEvents has written its events,
	// each holds the id the store gave it, and the time it was written with when it had none:
	// what the caller hands its sinks is what the store holds.
}
