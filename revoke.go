package latch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch/store"
)

// ErrNothingMatched is returned by RevokeWhere when no delegation matches the selector.
var ErrNothingMatched = errors.New("latch: no delegation matches")

// RevokeSelector picks the delegations RevokeWhere revokes. Both fields, when set, must match
// (an intersection); at least one must be set.
type RevokeSelector struct {
	// CreatedBy matches delegations whose creator is exactly this principal: "agent" or
	// "agent/user", as the delegation records it (a break-glass grant: the person who opened it).
	CreatedBy string
	// Under matches every delegation whose chain passes through this id: a policy grant id, a
	// break-glass envelope id, or a delegation id (dlg_…). The named delegation itself is not
	// matched: Under selects what lies strictly beneath it (revoke the delegation by id to
	// revoke it too).
	Under string
}

// RevokeResult is what RevokeWhere did: the delegations it revoked, and the matches it skipped
// because they were already revoked, each in creation order.
type RevokeResult struct {
	Revoked []*store.Delegation
	Skipped []*store.Delegation
}

// RevokeWhere revokes every delegation the selector matches, one at a time, each with its own
// write and delegation_revoked event (the path of Revoke). A match already revoked is skipped,
// so a run stopped halfway leaves what it reached revoked and running it again finishes the
// rest. No match at all is ErrNothingMatched. On a write error the result holds what was
// revoked before it.
func (g *Guard) RevokeWhere(ctx context.Context, sel RevokeSelector, by string) (*RevokeResult, error) {
	sel.CreatedBy, sel.Under = strings.TrimSpace(sel.CreatedBy), strings.TrimSpace(sel.Under)
	if sel.CreatedBy == "" && sel.Under == "" {
		return nil, errors.New("latch: revoke: a selector needs created_by or under")
	}
	ds, err := g.delegationStore()
	if err != nil {
		return nil, err
	}
	all, err := ds.Delegations(ctx)
	if err != nil {
		return nil, fmt.Errorf("latch: revoke: read delegations: %w", err)
	}
	var beneath map[string]bool
	if sel.Under != "" {
		beneath = delegationsUnder(all, sel.Under)
	}
	res := &RevokeResult{}
	matched := 0
	for _, d := range all {
		if sel.CreatedBy != "" && d.CreatedBy != sel.CreatedBy {
			continue
		}
		if beneath != nil && !beneath[d.ID] {
			continue
		}
		matched++
		if !d.RevokedAt.IsZero() {
			res.Skipped = append(res.Skipped, d)
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, wrapOp("revoke", err)
		}
		r, err := g.Revoke(ctx, d.ID, by)
		switch {
		case errors.Is(err, store.ErrRevoked):
			res.Skipped = append(res.Skipped, d) // revoked by someone else since the read
		case err != nil:
			return res, wrapOp("revoke "+d.ID, err)
		default:
			res.Revoked = append(res.Revoked, r)
		}
	}
	if matched == 0 {
		return res, ErrNothingMatched
	}
	return res, nil
}

// delegationsUnder returns the ids of every delegation strictly beneath id, at any depth.
func delegationsUnder(all []*store.Delegation, id string) map[string]bool {
	under := map[string]bool{}
	in := func(p string) bool { return p == id || under[p] }
	for changed := true; changed; {
		changed = false
		for _, d := range all {
			if !under[d.ID] && d.ID != id && in(d.Parent) {
				under[d.ID] = true
				changed = true
			}
		}
	}
	return under
}
