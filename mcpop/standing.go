package mcpop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

// StandingArgs are the terms of a standing approval granted with a request
// (docs/approvals.md#standing-approvals), as approve takes them.
type StandingArgs struct {
	Uses  int                  `json:"uses" jsonschema:"how many further calls it admits at most (at least 1; at most the policy's max_uses)"`
	For   string               `json:"for" jsonschema:"how long it lasts from the grant, a duration like 1h (at most the policy's max_for)"`
	Max   map[string]int64     `json:"max,omitempty" jsonschema:"integer arguments a call may pass from 0 up to the given ceiling"`
	Vary  []string             `json:"vary,omitempty" jsonschema:"arguments a call may pass with any value; every other argument must be the request's"`
	Total *store.StandingTotal `json:"total,omitempty" jsonschema:"caps the sum of one integer argument over the calls it admits"`
}

// terms are the store's terms of a; an error names what cannot be read.
func (a *StandingArgs) terms() (*store.StandingTerms, error) {
	d, err := time.ParseDuration(a.For)
	if err != nil {
		return nil, fmt.Errorf("invalid_standing: for %q is not a duration like 1h", a.For)
	}
	return &store.StandingTerms{Uses: a.Uses, For: store.Duration(d), Max: a.Max, Vary: a.Vary, Total: a.Total}, nil
}

// ListStandingArgs are the arguments of list_standing.
type ListStandingArgs struct {
	State string `json:"state,omitempty" jsonschema:"active (default), exhausted, expired, revoked, or all"`
}

// StandingList is the result of list_standing: standing approvals as `latch approvals
// --standing --json` prints them and GET /v1/standing lists them.
type StandingList struct {
	Standing []jsonview.Standing `json:"standing"`
}

func (o *Operator) listStanding(ctx context.Context, _ *mcp.CallToolRequest, in ListStandingArgs) (*mcp.CallToolResult, StandingList, error) {
	state := in.State
	if state == "" {
		state = store.StandingActive
	}
	list, err := o.op.Standings(ctx, state)
	if err != nil {
		return nil, StandingList{}, toolError(err)
	}
	return nil, StandingList{Standing: list}, nil
}

// StandingIDArgs name one standing approval.
type StandingIDArgs struct {
	StandingID string `json:"standing_id" jsonschema:"the standing approval's id, sta_…"`
	Note       string `json:"note,omitempty" jsonschema:"with revoke_standing: kept with the revocation"`
}

func (o *Operator) showStanding(ctx context.Context, _ *mcp.CallToolRequest, in StandingIDArgs) (*mcp.CallToolResult, jsonview.Standing, error) {
	s, err := o.op.Standing(ctx, in.StandingID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, jsonview.Standing{}, fmt.Errorf("standing_not_found: no standing approval %q", in.StandingID)
	case err != nil:
		return nil, jsonview.Standing{}, toolError(err)
	}
	return nil, s, nil
}

func (o *Operator) revokeStanding(ctx context.Context, req *mcp.CallToolRequest, in StandingIDArgs) (*mcp.CallToolResult, jsonview.Standing, error) {
	w, err := o.who(req)
	if err != nil {
		return nil, jsonview.Standing{}, err
	}
	s, err := o.cfg.Guard.RevokeStanding(ctx, &store.RevokeStandingRequest{ID: in.StandingID, By: w.name, Note: in.Note})
	var se *store.StandingError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, jsonview.Standing{}, fmt.Errorf("standing_not_found: no standing approval %q", in.StandingID)
	case errors.As(err, &se):
		return nil, jsonview.Standing{}, fmt.Errorf("%s: %s", se.Reason, strings.TrimPrefix(err.Error(), "latch: "))
	case err != nil:
		return nil, jsonview.Standing{}, toolError(err)
	}
	return nil, o.op.StandingView(s), nil
}

// standingResult is approve's answer when its grant created a standing approval: the request
// as structured content, as always, and a line naming the standing approval beside its JSON.
func standingResult(a jsonview.Approval, id string) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)},
		&mcp.TextContent{Text: "standing approval " + id + " granted: calls present it as their approval id; list_standing shows it"}}}, nil
}
