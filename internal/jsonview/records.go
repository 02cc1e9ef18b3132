package jsonview

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Receipt is one stored receipt: its seq, its hash and its document exactly as stored. A row
// whose document does not read as a receipt (someone edited the table) is still one receipt of
// the list: Unreadable says so, and Receipt is the stored document when it is at least a JSON
// object, else null. Verifying the chain names the break.
type Receipt struct {
	Seq        int64           `json:"seq"`
	Hash       string          `json:"hash"`
	Receipt    json.RawMessage `json:"receipt"`
	Unreadable *string         `json:"unreadable"`
}

// UnreadableReceipt is the Unreadable of a row whose document does not read as a receipt.
const UnreadableReceipt = "the stored document does not read as a receipt: verify the chain to see where it breaks"

// NewReceipt is the stored receipt r as an operator reads it, and its document read (nil when
// it does not read as a receipt).
func NewReceipt(r receipt.Sealed) (Receipt, *receipt.Receipt) {
	out := Receipt{Seq: r.Seq, Hash: r.Hash, Receipt: json.RawMessage("null")}
	doc := bytes.TrimSpace(r.Doc)
	if len(doc) > 0 && doc[0] == '{' && json.Valid(doc) {
		out.Receipt = json.RawMessage(doc)
	}
	f, err := receipt.Parse(r.Doc)
	if err != nil {
		out.Unreadable = Str(UnreadableReceipt)
		return out, nil
	}
	return out, f
}

// Event is one event of the log: as latch serve's event stream sends it, and as an inspection
// lists it. At is when it was written.
type Event struct {
	ID         int64           `json:"id"`
	Kind       string          `json:"kind"`
	At         *string         `json:"at"`
	ActionID   *string         `json:"action_id"`
	EffectKey  *string         `json:"effect_key"`
	ApprovalID *string         `json:"approval_id"`
	Payload    json.RawMessage `json:"payload"` // the event's payload object; null when none
}

// NewEvent is e as an operator reads it under pol (nil: nothing redacted). An answer's edit
// member carries the request's arguments without naming its action: every argument some
// action of pol redacts is redacted in it (policy.Policy.RedactedAnywhere).
func NewEvent(pol *policy.Policy, e *store.Event) Event {
	p := e.Payload
	if len(bytes.TrimSpace(p)) == 0 || !json.Valid(p) {
		p = json.RawMessage("null")
	} else if rs := pol.RedactedAnywhere(); len(rs) > 0 && bytes.Contains(p, []byte(`"edit"`)) {
		p = redactEdit(rs, p)
	}
	return Event{ID: e.ID, Kind: e.Kind, At: Stamp(e.Time), ActionID: Str(e.ActionID), EffectKey: Str(e.EffectKey),
		ApprovalID: Str(e.ApprovalID), Payload: p}
}

// Stats is receipts counted by action and result over a window: since (null: every receipt)
// until now.
type Stats struct {
	Since *string `json:"since"`
	Until *string `json:"until"`
	receipt.Stats
}

// NewStats is tally counted from since (the zero time: every receipt) until until.
func NewStats(tally receipt.Stats, since, until time.Time) Stats {
	return Stats{Since: Stamp(since), Until: Stamp(until), Stats: tally}
}

// ChainReport is the verification of the receipt chain: the chain against its head, the stored
// state against the chain, and — when a checkpoint public key was given — every signed
// checkpoint against the chain.
type ChainReport struct {
	OK       bool    `json:"ok"`
	Verified int64   `json:"verified"`
	Breaks   []Break `json:"breaks"`
	// State counts the records checked against the chain; null when the store cannot read its
	// state beside its chain.
	State *receipt.StateChecked `json:"state"`
	// Start is where a pruned chain starts, and why; null when it starts at seq 1.
	Start *receipt.Start `json:"start"`
	// Checkpoints says how the signed checkpoints were checked; null when no checkpoint public
	// key was given, and they were not.
	Checkpoints *Checkpoints `json:"checkpoints"`
}

// Break is one place where the chain, the state it implies, or a signed checkpoint does not
// hold. Subject, Chain and Table are set for a state_diverged break: what it is about, what the
// chain implies and what the table holds.
type Break struct {
	Kind    string  `json:"kind"`
	Seq     int64   `json:"seq"`
	Detail  string  `json:"detail"`
	Subject *string `json:"subject"`
	Chain   *string `json:"chain"`
	Table   *string `json:"table"`
}

// Checkpoints is how the signed checkpoints held: Held verified against the chain; Below were
// signed below a pruned chain's start (what they signed was pruned: neither held nor broken).
type Checkpoints struct {
	Held  int `json:"held"`
	Below int `json:"below"`
}

// NewChainReport is rep, with the checkpoint breaks cps added (cps nil: checkpoints not checked).
func NewChainReport(rep receipt.Report, cpBreaks []receipt.Break, cps *Checkpoints) ChainReport {
	out := ChainReport{OK: rep.OK, Verified: rep.Verified, Breaks: []Break{}, State: rep.State, Start: rep.Start, Checkpoints: cps}
	for _, b := range append(append([]receipt.Break(nil), rep.Breaks...), cpBreaks...) {
		out.Breaks = append(out.Breaks, Break{Kind: b.Kind, Seq: b.Seq, Detail: b.Detail, Subject: Str(b.Subject),
			Chain: Str(b.Chain), Table: Str(b.Table)})
	}
	out.OK = rep.OK && len(cpBreaks) == 0
	return out
}

// Inspection is everything the store holds about one id (Kind: action, approval or effect): its
// record — Approval for an approval id, Effect for an effect key that was reserved, else null —
// the events in the order they were written and the receipts in seq order.
type Inspection struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Approval *Approval `json:"approval"`
	Effect   *Effect   `json:"effect"`
	Events   []Event   `json:"events"`
	Receipts []Receipt `json:"receipts"`
}

// redactEdit is the event payload p with the arguments of its edit member redacted as rs says:
// requested_arguments, and the from and to of each changed argument. A payload that does not
// read as expected is returned with its edit member dropped rather than shown in full.
func redactEdit(rs map[string]policy.Redaction, p json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil || m["edit"] == nil {
		return p
	}
	var edit map[string]json.RawMessage
	if json.Unmarshal(m["edit"], &edit) != nil {
		return p
	}
	drop := func() json.RawMessage {
		m["edit"] = json.RawMessage("null")
		b, _ := json.Marshal(m)
		return b
	}
	mask := func(name string, v json.RawMessage) (json.RawMessage, bool) {
		r, ok := rs[name]
		if !ok {
			return v, true
		}
		x, err := canon.Parse(v)
		if err != nil {
			return nil, false
		}
		b, err := json.Marshal(r.Mask(x))
		return b, err == nil
	}
	if raw := edit["requested_arguments"]; raw != nil && string(raw) != "null" {
		var args map[string]json.RawMessage
		if json.Unmarshal(raw, &args) != nil {
			return drop()
		}
		for k, v := range args {
			mv, ok := mask(k, v)
			if !ok {
				return drop()
			}
			args[k] = mv
		}
		edit["requested_arguments"], _ = json.Marshal(args)
	}
	if raw := edit["arguments"]; raw != nil && string(raw) != "null" {
		var changes map[string]map[string]json.RawMessage
		if json.Unmarshal(raw, &changes) != nil {
			return drop()
		}
		for k, c := range changes {
			for side, v := range c {
				mv, ok := mask(k, v)
				if !ok {
					return drop()
				}
				c[side] = mv
			}
		}
		edit["arguments"], _ = json.Marshal(changes)
	}
	m["edit"], _ = json.Marshal(edit)
	b, err := json.Marshal(m)
	if err != nil {
		return drop()
	}
	return b
}
