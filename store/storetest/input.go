package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// testInvalidInput checks that a NUL byte in a key, id or name is refused as invalid input
// (store.ErrInvalidInput), the same way by every backend, before anything is read or written:
// PostgreSQL text cannot hold a NUL byte, and SQLite would store one.
func testInvalidInput(t *testing.T, b Backend) {
	f := newFixture(t, b)
	ctx := t.Context()
	const nul = "a\x00b"
	live := newCall("charge:live")
	f.reserved(live, t0) // an executing key, so that Record, Extend and Resolve have a row to refuse

	withKey := newCall("charge:" + nul)
	actionNUL := newCall("charge:inv_9")
	reserveActionNUL := actionNUL.reserve(t0)
	reserveActionNUL.Action, reserveActionNUL.Receipt.Action = nul, nul
	approvalNUL := newCall("charge:inv_10")
	approvalNUL.ApprovalID = "apr_" + nul
	agentNUL := newCall("charge:inv_11").reserve(t0)
	agentNUL.Receipt.Principal.Agent = nul
	recordNUL := live.record(t0.Add(time.Second), 1, store.Committed)
	recordNUL.Receipt.Action = nul
	eventNUL := newCall("charge:inv_12").reserve(t0)
	eventNUL.Events = []store.Event{store.NewEvent(store.EventActionProposed, t0, "act_"+nul, "", "", nil)}
	apr := newApproval(hashOf("x"), t0)
	apr.Agent = nul

	cases := []struct {
		name string
		do   func(context.Context) error
	}{
		{"Reserve effect key", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, withKey.reserve(t0)); return err }},
		{"Reserve action name", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, reserveActionNUL); return err }},
		{"Reserve approval id", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, approvalNUL.reserve(t0)); return err }},
		{"Reserve agent", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, agentNUL); return err }},
		{"Reserve event id", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, eventNUL); return err }},
		{"Record receipt action", func(ctx context.Context) error { _, err := f.st.Record(ctx, recordNUL); return err }},
		{"Record refusal", func(ctx context.Context) error {
			_, err := f.st.Record(ctx, receiptOnly(withKey, t0, receipt.Denied))
			return err
		}},
		{"ExtendLease", func(ctx context.Context) error {
			_, err := f.st.ExtendLease(ctx, &store.ExtendRequest{Now: t0, Key: live.Key, ActionID: "act_" + nul, Attempt: 1, Until: t0.Add(time.Hour)})
			return err
		}},
		{"Resolve", func(ctx context.Context) error {
			_, err := f.st.Resolve(ctx, &store.ResolveRequest{Now: t0, Key: withKey.Key, To: store.Failed, By: "cli:ana"})
			return err
		}},
		{"Resolve by", func(ctx context.Context) error {
			_, err := f.st.Resolve(ctx, &store.ResolveRequest{Now: t0, Key: live.Key, To: store.Failed, By: "cli:" + nul})
			return err
		}},
		{"CreateApproval", func(ctx context.Context) error {
			_, err := f.st.CreateApproval(ctx, &store.ApprovalRequest{Now: t0, Approval: apr})
			return err
		}},
		{"AnswerApproval", func(ctx context.Context) error {
			_, err := f.st.AnswerApproval(ctx, &store.AnswerRequest{Now: t0, ID: "apr_" + nul, Grant: true, Approver: approver})
			return err
		}},
		{"Effect", func(ctx context.Context) error { _, err := f.st.Effect(ctx, withKey.Key); return err }},
		{"Approval", func(ctx context.Context) error { _, err := f.st.Approval(ctx, "apr_"+nul); return err }},
		{"Events", func(ctx context.Context) error {
			_, err := f.st.Events(ctx, store.EventFilter{EffectKey: withKey.Key})
			return err
		}},
		{"Receipts", func(ctx context.Context) error {
			for _, err := range f.st.Receipts(ctx, store.ReceiptFilter{EffectKey: withKey.Key}) {
				return err
			}
			return nil
		}},
	}
	if ds, ok := f.st.(store.DelegationStore); ok {
		cases = append(cases,
			struct {
				name string
				do   func(context.Context) error
			}{"CreateDelegation", func(ctx context.Context) error {
				return ds.CreateDelegation(ctx, &store.Delegation{ID: "dlg_" + nul, Parent: "g1", Grant: []byte("x"), CreatedBy: agent, CreatedAt: t0}, nil)
			}},
			struct {
				name string
				do   func(context.Context) error
			}{"RevokeDelegation", func(ctx context.Context) error {
				_, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: t0, ID: "dlg_" + nul, By: agent})
				return err
			}},
		)
	}
	long := newCall("charge:" + strings.Repeat("0123456789abcdef", store.MaxText/16))
	cases = append(cases,
		struct {
			name string
			do   func(context.Context) error
		}{"Reserve long effect key", func(ctx context.Context) error { _, err := f.st.Reserve(ctx, long.reserve(t0)); return err }},
		struct {
			name string
			do   func(context.Context) error
		}{"Effect long key", func(ctx context.Context) error { _, err := f.st.Effect(ctx, long.Key); return err }},
	)
	before := f.snapshot()
	for _, tc := range cases {
		err := tc.do(ctx)
		var ie *store.InputError
		if !errors.Is(err, store.ErrInvalidInput) || !errors.As(err, &ie) {
			t.Errorf("%s with a NUL byte = %v, want store.ErrInvalidInput", tc.name, err)
		} else if len(err.Error()) > 400 {
			t.Errorf("%s: error of %d bytes repeats the value: %.200s…", tc.name, len(err.Error()), err)
		}
	}
	same(t, "store after the refused requests", f.snapshot(), before)
	if e := f.effect(live.Key); e.State != store.Executing {
		t.Errorf("live key after refusals: %s, want executing", e.State)
	}
}
