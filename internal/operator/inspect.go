package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

var (
	actionIDPattern   = regexp.MustCompile(`^act_[0-9a-f]{32}$`)
	approvalIDPattern = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)
)

// What an id names.
const (
	KindAction   = "action"
	KindApproval = "approval"
	KindEffect   = "effect"
)

// KindOf says what id names: an action id (act_…), an approval id (apr_…), or else an effect key.
func KindOf(id string) string {
	switch {
	case actionIDPattern.MatchString(id):
		return KindAction
	case approvalIDPattern.MatchString(id):
		return KindApproval
	}
	return KindEffect
}

// ErrNothingRecorded is the error of Inspect when the store holds nothing about an id.
var ErrNothingRecorded = errors.New("nothing recorded")

// Inspection is everything the store holds about one id: the record (an approval request, an
// effect record; none for an action id, nor for an effect key never reserved), the events in
// the order they were written and the receipts in seq order. For an approval it includes the
// events and receipts of the actions that asked for it, spent it or presented it.
type Inspection struct {
	ID       string
	Kind     string // KindAction, KindApproval or KindEffect
	Approval *store.Approval
	Effect   *store.Effect
	Events   []*store.Event
	Receipts []Receipt
}

// View is the inspection as an operator reads it.
func (o *Operator) View(in *Inspection) jsonview.Inspection {
	out := jsonview.Inspection{ID: in.ID, Kind: in.Kind, Events: make([]jsonview.Event, len(in.Events)), Receipts: make([]jsonview.Receipt, len(in.Receipts))}
	if in.Approval != nil {
		v := o.ApprovalView(in.Approval)
		if v.Reminders != nil { // the request's events are read already
			v.Reminders = jsonview.RemindersOf(o.cfg.Policy, in.Approval, in.Events)
		}
		out.Approval = &v
	}
	if in.Effect != nil {
		v := o.EffectView(in.Effect)
		out.Effect = &v
	}
	for i, e := range in.Events {
		out.Events[i] = jsonview.NewEvent(o.cfg.Policy, e)
	}
	for i, r := range in.Receipts {
		out.Receipts[i] = r.View
	}
	return out
}

// Inspect gathers everything about id. An id the store knows nothing about is an error wrapping
// ErrNothingRecorded (an approval id that names no request: store.ErrNotFound).
func (o *Operator) Inspect(ctx context.Context, id string) (*Inspection, error) {
	in := &Inspection{ID: id, Kind: KindOf(id)}
	ev := evidence{events: map[int64]*store.Event{}, receipts: map[int64]Receipt{}}
	st := o.cfg.Store
	switch in.Kind {
	case KindAction:
		if err := o.gather(ctx, &ev, store.EventFilter{ActionID: id}, store.ReceiptFilter{ActionID: id}); err != nil {
			return nil, err
		}
		if len(ev.events) == 0 && len(ev.receipts) == 0 {
			return nil, fmt.Errorf("inspect action %s: %w", id, ErrNothingRecorded)
		}
	case KindApproval:
		a, err := st.Approval(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("inspect approval %s: %w", id, err)
		}
		in.Approval = a
		if err := o.gather(ctx, &ev, store.EventFilter{ApprovalID: id}, store.ReceiptFilter{ApprovalID: id}); err != nil {
			return nil, err
		}
		// The actions that requested, spent or presented it: their events are part of its story.
		actions := map[string]bool{}
		if a.ConsumedBy != "" {
			actions[a.ConsumedBy] = true
		}
		for _, e := range ev.events {
			if e.ActionID != "" {
				actions[e.ActionID] = true
			}
		}
		for _, r := range ev.receipts {
			if r.Doc != nil && r.Doc.ActionID != "" {
				actions[r.Doc.ActionID] = true
			}
		}
		for _, act := range slices.Sorted(maps.Keys(actions)) {
			if err := o.gather(ctx, &ev, store.EventFilter{ActionID: act}, store.ReceiptFilter{ActionID: act}); err != nil {
				return nil, err
			}
		}
	default:
		e, err := st.Effect(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("inspect effect: %w", err)
		}
		in.Effect = e
		if err := o.gather(ctx, &ev, store.EventFilter{EffectKey: id}, store.ReceiptFilter{EffectKey: id}); err != nil {
			return nil, err
		}
		if e == nil && len(ev.events) == 0 && len(ev.receipts) == 0 {
			return nil, fmt.Errorf("inspect %q: %w", id, ErrNothingRecorded)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ev.events)) {
		in.Events = append(in.Events, ev.events[k])
	}
	for _, k := range slices.Sorted(maps.Keys(ev.receipts)) {
		in.Receipts = append(in.Receipts, ev.receipts[k])
	}
	return in, nil
}

// evidence is what an inspection gathers: events (by id) and receipts (by seq), each once.
type evidence struct {
	events   map[int64]*store.Event
	receipts map[int64]Receipt
}

func (o *Operator) gather(ctx context.Context, ev *evidence, ef store.EventFilter, rf store.ReceiptFilter) error {
	events, err := o.cfg.Store.Events(ctx, ef)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	for _, e := range events {
		ev.events[e.ID] = e
	}
	for r, err := range o.Receipts(ctx, rf) {
		if err != nil {
			return err
		}
		ev.receipts[r.View.Seq] = r
	}
	return nil
}
