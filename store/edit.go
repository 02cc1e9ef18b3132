package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// Edit reasons of an AnswerError besides the policy's (policy.ReasonEditNotEditable,
// ReasonEditWidens, ReasonEditInvalid).
const (
	// ReasonEditStale: the request was edited by someone else between the read the edit was
	// made against and its write; nothing is written, and the approver edits what it binds now.
	ReasonEditStale = "edit_stale"
)

// Edit is an approver's change of a request's arguments, made with their grant
// (docs/approvals.md#approve-with-edits). The request then binds Hash: the approval is spent
// only on a call presenting the edited arguments, and a call presenting the requested ones is
// refused approval_mismatch. Guard.Answer builds it from AnswerRequest.Set under the policy's
// editable arguments; a store checks only that it is the request's action with other arguments.
type Edit struct {
	// From is the action hash the edit narrows: the one the request bound when the approver
	// read it. The answer is refused edit_stale when it binds another at the write.
	From string
	// Action is the edited canonical action document (the request's, with the edited
	// arguments) and Hash its hash.
	Action json.RawMessage
	Hash   string
	// Changes are the arguments the edit changes, each from the value the request bound to the
	// value the approver set (canonical JSON), in argument order.
	Changes []EditChange
}

// EditChange is one argument an Edit changes.
type EditChange struct {
	Argument string
	From, To json.RawMessage
}

// EditRecord is an edit as the event log keeps it (the edit member of an approval_answered or
// approval_granted event): who made it, when, and what it changed.
type EditRecord struct {
	By        string    // the approver, as answers record them
	Method    string    // how the approver was authenticated
	At        time.Time // when
	From      string    // the action hash the edit narrowed
	Hash      string    // the action hash the request bound after it
	Requested json.RawMessage
	Changes   []EditChange
}

// editPayload is the edit member of an answer's event.
type editPayload struct {
	From      string                     `json:"from_action_hash"`
	Hash      string                     `json:"action_hash"`
	Requested json.RawMessage            `json:"requested_arguments"`
	Changes   map[string]editChangeValue `json:"arguments"`
}

type editChangeValue struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// checkEdit refuses an edit that is not a's action with other arguments: another name,
// resource, principal or environment, a hash that is not its document's, or no change.
func checkEdit(e *Edit, a *Approval) error {
	if canon.Sum(e.Action) != e.Hash {
		return &InputError{Field: "edit action hash", Value: e.Hash, Reason: "is not the hash of the edited action document"}
	}
	was, err := actionMembers(a.Action)
	if err != nil {
		return fmt.Errorf("approval %s: requested action: %w", a.ID, err)
	}
	now, err := actionMembers(e.Action)
	if err != nil {
		return &InputError{Field: "edit action", Value: string(e.Action), Reason: err.Error()}
	}
	for k, v := range was {
		if k != "arguments" && !bytes.Equal(v, now[k]) {
			return &InputError{Field: "edit action", Value: string(e.Action), Reason: "changes " + k + ", and an edit changes arguments only"}
		}
	}
	if len(now) != len(was) || bytes.Equal(was["arguments"], now["arguments"]) || len(e.Changes) == 0 {
		return &InputError{Field: "edit action", Value: string(e.Action), Reason: "changes no argument"}
	}
	return nil
}

// actionMembers splits a canonical action document into its members, each as canonical JSON.
func actionMembers(doc json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		c, err := canon.Canonicalize(v)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", k, err)
		}
		m[k] = c
	}
	return m, nil
}

// planEdit applies req's edit to next, the request as the answer leaves it, and returns the
// edit member of the answer's event; a refusal reason when it cannot apply.
func planEdit(req *AnswerRequest, a *Approval, next *Approval) (map[string]any, string, error) {
	e := req.Edit
	switch {
	case !req.Grant:
		return nil, policy.ReasonEditInvalid, nil // a deny changes nothing to edit
	case a.ActionHash != e.From:
		return nil, ReasonEditStale, nil
	}
	if err := checkEdit(e, a); err != nil {
		return nil, "", err
	}
	requested, err := actionMembers(a.Action)
	if err != nil {
		return nil, "", err
	}
	changes := make(map[string]any, len(e.Changes))
	for _, c := range e.Changes {
		changes[c.Argument] = map[string]any{"from": c.From, "to": c.To}
	}
	next.ActionHash, next.Action = e.Hash, e.Action
	return map[string]any{"from_action_hash": e.From, "action_hash": e.Hash,
		"requested_arguments": requested["arguments"], "arguments": changes}, "", nil
}

// EditsOf reads the edits of one request from its events (Events with its ApprovalID), oldest
// first: none when no approver edited it. A payload that does not read is an error.
func EditsOf(evs []*Event) ([]EditRecord, error) {
	var out []EditRecord
	for _, ev := range evs {
		if ev.Kind != EventApprovalAnswered && ev.Kind != EventApprovalGranted || len(ev.Payload) == 0 {
			continue
		}
		var p struct {
			Approver string       `json:"approver"`
			Method   string       `json:"method"`
			Edit     *editPayload `json:"edit"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.ID, err)
		}
		if p.Edit == nil {
			continue
		}
		if p.Method == "" {
			p.Method = MethodCLI
		}
		r := EditRecord{By: p.Approver, Method: p.Method, At: ev.Time, From: p.Edit.From, Hash: p.Edit.Hash,
			Requested: p.Edit.Requested}
		for _, name := range slices.Sorted(maps.Keys(p.Edit.Changes)) {
			c := p.Edit.Changes[name]
			r.Changes = append(r.Changes, EditChange{Argument: name, From: c.From, To: c.To})
		}
		out = append(out, r)
	}
	return out, nil
}
