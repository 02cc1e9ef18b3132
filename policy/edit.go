package policy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Reasons an approver's edit is refused (EditError.Reason). Each is also the reason word of the
// refused answer on every surface (docs/approvals.md#approve-with-edits).
const (
	// ReasonEditNotEditable: the edit changes an argument the policy does not mark editable
	// (or one the call did not pass, or an action the policy does not list).
	ReasonEditNotEditable = "edit_not_editable"
	// ReasonEditWidens: the edit moves an editable argument the way its editable entry does
	// not allow — an amount raised, or lowered below the approvers' floor.
	ReasonEditWidens = "edit_widens"
	// ReasonEditInvalid: the edit cannot be applied as it stands — no argument, a value of the
	// wrong type, a value the argument's declaration refuses, no change at all, or an edited
	// call the policy would deny.
	ReasonEditInvalid = "edit_invalid"
)

// EditError refuses an approver's edit of a request's arguments: Reason is one of the
// ReasonEdit* words, Argument the argument at fault ("" when the edit as a whole is).
type EditError struct {
	Action   string
	Argument string
	Reason   string
	Msg      string
}

func (e *EditError) Error() string {
	return fmt.Sprintf("edit of %s refused: %s: %s", quote(e.Action), e.Reason, e.Why())
}

// Why is what is wrong with the edit, for people: `argument "amount" may only decrease: …`.
func (e *EditError) Why() string {
	if e.Argument == "" {
		return "the edit " + e.Msg
	}
	return "argument " + quote(e.Argument) + " " + e.Msg
}

// Change is one argument an edit changes, from the requested value to the approved one.
type Change struct {
	Argument string
	From, To any
}

// ApplyEdit returns the arguments of a call of action with args (canon's value model) after an
// approver sets the arguments of set, and what changed, in argument order. An edit may only
// narrow the call: every argument it sets must be one the call passed and the action declares
// editable, and move only as its editable entry allows (an integer marked decrease: at most the
// requested value, not below the entry's min); the result must still fit the declaration and
// not be denied by the policy. Anything else is an *EditError, and args is left as it was.
func (p *Policy) ApplyEdit(action string, args, set map[string]any) (map[string]any, []Change, error) {
	refuse := func(arg, reason, format string, a ...any) error {
		return &EditError{Action: action, Argument: arg, Reason: reason, Msg: fmt.Sprintf(format, a...)}
	}
	if len(set) == 0 {
		return nil, nil, refuse("", ReasonEditInvalid, "sets no argument")
	}
	act := p.Actions[action]
	if act == nil {
		return nil, nil, refuse("", ReasonEditNotEditable, "is of an action the policy does not list")
	}
	out := maps.Clone(args)
	var changes []Change
	for _, name := range slices.Sorted(maps.Keys(set)) {
		to := set[name]
		d := act.Argument(name)
		if d == nil || d.Editable == nil {
			return nil, nil, refuse(name, ReasonEditNotEditable, "may not be changed by an approver (the policy does not mark it editable)")
		}
		from, passed := args[name]
		if !passed {
			return nil, nil, refuse(name, ReasonEditNotEditable, "was not passed by the call, and an edit changes only what the call asked for")
		}
		n, ok := to.(int64)
		if !ok {
			return nil, nil, refuse(name, ReasonEditInvalid, "must be set to an integer")
		}
		old, ok := from.(int64)
		if !ok {
			return nil, nil, refuse(name, ReasonEditInvalid, "holds a value that is not an integer in the request")
		}
		ed := d.Editable
		switch {
		case n == old:
			continue
		case ed.Decrease && n > old:
			return nil, nil, refuse(name, ReasonEditWidens, "may only decrease: %s is above the requested %s",
				strconv.FormatInt(n, 10), strconv.FormatInt(old, 10))
		case ed.Min != nil && n < *ed.Min:
			return nil, nil, refuse(name, ReasonEditWidens, "may not go below %s: %s is",
				strconv.FormatInt(*ed.Min, 10), strconv.FormatInt(n, 10))
		}
		if c := d.Check(n); !c.OK() {
			return nil, nil, refuse(name, ReasonEditInvalid, "%s", c.Msg)
		}
		out[name] = n
		changes = append(changes, Change{Argument: name, From: old, To: n})
	}
	if len(changes) == 0 {
		return nil, nil, refuse("", ReasonEditInvalid, "changes nothing: grant without edits")
	}
	if ev := p.Evaluate(action, out); ev.Decision == Deny {
		return nil, nil, refuse("", ReasonEditInvalid, "makes a call the policy denies (%s)", ev.Reason)
	}
	return out, changes, nil
}
