package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// TestSelectCheckpoint: a prune goes below the newest checkpoint its request selects (by seq or
// by signing time) that names this store and that its check accepts; none is ErrNoCheckpoint,
// one at or below the chain's start is ErrNothingToPrune.
func TestSelectCheckpoint(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cps := []*receipt.Checkpoint{
		{Seq: 10, SignedAt: t0, StoreID: "st_a", KeyID: "k1"},
		{Seq: 20, SignedAt: t0.Add(24 * time.Hour), StoreID: "st_a", KeyID: "k2"},
		{Seq: 30, SignedAt: t0.Add(48 * time.Hour), StoreID: "st_b", KeyID: "k1"},
		{Seq: 40, SignedAt: t0.Add(72 * time.Hour), StoreID: "st_a", KeyID: "k1"},
	}
	onlyK1 := func(c *receipt.Checkpoint) error {
		if c.KeyID != "k1" {
			return errors.New("another key")
		}
		return nil
	}
	for _, tc := range []struct {
		name    string
		req     store.PruneRequest
		start   int64
		want    int64
		wantErr error
		detail  string
	}{
		{"by seq, exact", store.PruneRequest{BeforeSeq: 20}, 1, 20, nil, ""},
		{"by seq, between", store.PruneRequest{BeforeSeq: 39}, 1, 20, nil, ""},
		{"by seq, head", store.PruneRequest{BeforeSeq: 100}, 1, 40, nil, ""},
		{"by time", store.PruneRequest{Before: t0.Add(25 * time.Hour)}, 1, 20, nil, ""},
		{"signed at the instant is not before it", store.PruneRequest{Before: t0.Add(24 * time.Hour)}, 1, 10, nil, ""},
		{"another store passed over", store.PruneRequest{BeforeSeq: 35}, 1, 20, nil, ""},
		{"the check passes over another key", store.PruneRequest{BeforeSeq: 39, Check: onlyK1}, 1, 10, nil, ""},
		{"below the first", store.PruneRequest{BeforeSeq: 9}, 1, 0, store.ErrNoCheckpoint, "at or below seq 9: sign one first"},
		{"before the first", store.PruneRequest{Before: t0}, 1, 0, store.ErrNoCheckpoint, "signed before 2026-03-01T00:00:00.000Z"},
		{"only another store's", store.PruneRequest{BeforeSeq: 30, Check: func(c *receipt.Checkpoint) error {
			if c.Seq != 30 {
				return errors.New("no")
			}
			return nil
		}}, 1, 0, store.ErrNoCheckpoint, "seq 30: it names store st_b"},
		{"already the start", store.PruneRequest{BeforeSeq: 25}, 20, 0, store.ErrNothingToPrune, "already starts at seq 20"},
		{"below every checkpoint", store.PruneRequest{BeforeSeq: 5}, 1, 0, store.ErrNoCheckpoint, "at or below seq 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := store.SelectCheckpoint(&tc.req, cps, tc.start, "st_a")
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.detail) {
					t.Errorf("SelectCheckpoint = %+v, %v; want %v mentioning %q", got, err, tc.wantErr, tc.detail)
				}
			case err != nil || got.Seq != tc.want:
				t.Errorf("SelectCheckpoint = %+v, %v; want seq %d", got, err, tc.want)
			}
		})
	}
}

// TestCheckHolds: only an active hold that overlaps the removed range refuses.
func TestCheckHolds(t *testing.T) {
	t.Parallel()
	released := &store.Hold{ID: "hold_r", From: 1, To: 100, ReleasedAt: time.Now()}
	later := &store.Hold{ID: "hold_l", From: 50, To: 60, Reason: "case 1"}
	for _, tc := range []struct {
		from, to int64
		want     string
	}{
		{1, 49, ""},
		{1, 50, "hold_l"},
		{60, 70, "hold_l"},
		{61, 99, ""},
	} {
		err := store.CheckHolds([]*store.Hold{released, later}, tc.from, tc.to)
		var he *store.HoldError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckHolds(%d, %d) = %v, want none", tc.from, tc.to, err)
		case tc.want != "" && (!errors.As(err, &he) || he.Hold.ID != tc.want || !strings.Contains(err.Error(), `"case 1"`)):
			t.Errorf("CheckHolds(%d, %d) = %v, want a HoldError of %s with its reason", tc.from, tc.to, err, tc.want)
		}
	}
}

// TestRetentionRequests: requests without what they need are refused before any store is touched.
func TestRetentionRequests(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"prune by seq and time", (&store.PruneRequest{Now: now, By: "ops", BeforeSeq: 3, Before: now}).Validate()},
		{"prune by neither", (&store.PruneRequest{Now: now, By: "ops"}).Validate()},
		{"prune negative age", (&store.PruneRequest{Now: now, By: "ops", BeforeSeq: 3, KeepSettled: -time.Hour}).Validate()},
		{"prune by nobody", (&store.PruneRequest{Now: now, BeforeSeq: 3}).Validate()},
		{"hold reversed", (&store.HoldRequest{Now: now, By: "ops", From: 5, To: 4, Reason: "x"}).Validate()},
		{"hold from 0", (&store.HoldRequest{Now: now, By: "ops", From: 0, To: 4, Reason: "x"}).Validate()},
		{"hold without reason", (&store.HoldRequest{Now: now, By: "ops", From: 1, To: 4}).Validate()},
		{"release without reason", (&store.ReleaseRequest{Now: now, By: "ops", ID: "hold_1"}).Validate()},
		{"release without id", (&store.ReleaseRequest{Now: now, By: "ops", Reason: "x"}).Validate()},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if err := (&store.PruneRequest{Now: now, By: "cli:ops", BeforeSeq: 3}).Validate(); err != nil {
		t.Errorf("a good prune request: %v", err)
	}
}

// TestPlanPrune: a prune removes from where the chain starts now (seq 1, or the last prune's
// start) to below the checkpoint it selects, and an active hold over that range refuses it; the
// chain start it leaves counts and hashes only what was carried.
func TestPlanPrune(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cps := []*receipt.Checkpoint{{Seq: 10, Hash: "sha256:10", SignedAt: t0, StoreID: "st_a"}, {Seq: 40, Hash: "sha256:40", SignedAt: t0, StoreID: "st_a"}}
	hold := &store.Hold{ID: "hold_h", From: 12, To: 15, Reason: "case 2"}
	prev := &store.ChainStart{Seq: 20}
	for _, tc := range []struct {
		name     string
		prev     *store.ChainStart
		before   int64
		holds    []*store.Hold
		from, cp int64
		wantErr  error
	}{
		{"never pruned", nil, 10, nil, 1, 10, nil},
		{"from the last start", prev, 40, []*store.Hold{hold}, 20, 40, nil},
		{"held", nil, 40, []*store.Hold{hold}, 0, 0, store.ErrHeld},
		{"a hold past the checkpoint", nil, 10, []*store.Hold{hold}, 1, 10, nil},
		{"nothing to prune", prev, 10, nil, 0, 0, store.ErrNothingToPrune},
		{"no checkpoint", nil, 5, nil, 0, 0, store.ErrNoCheckpoint},
	} {
		from, cp, err := store.PlanPrune(&store.PruneRequest{BeforeSeq: tc.before}, tc.prev, cps, "st_a", tc.holds)
		switch {
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) || cp != nil {
				t.Errorf("%s: PlanPrune = %d, %+v, %v; want %v", tc.name, from, cp, err, tc.wantErr)
			}
		case err != nil || from != tc.from || cp.Seq != tc.cp:
			t.Errorf("%s: PlanPrune = %d, %+v, %v; want from %d below seq %d", tc.name, from, cp, err, tc.from, tc.cp)
		}
	}

	req := &store.PruneRequest{Now: t0.Add(time.Hour), By: "cli:ops", BeforeSeq: 40}
	var h store.CarriedHasher
	h.Add(store.Carried{Kind: store.CarriedEffect, Key: "k1", Seq: 3, Doc: []byte(`{"effect":{}}`)})
	cs := store.PrunedStart(req, cps[1], 39, &h)
	// The hash a prune's record chains, worked by hand: SHA-256 of the previous hash (none yet:
	// 32 zero bytes) followed by the record as a JSON array [kind, key, seq, doc].
	sum := sha256.Sum256(append(make([]byte, sha256.Size), `["effect","k1",3,"{\"effect\":{}}"]`...))
	hash := "sha256:" + hex.EncodeToString(sum[:])
	if cs.Seq != 40 || cs.Hash != "sha256:40" || cs.Checkpoint.Seq != 40 || cs.Removed != 39 || cs.By != "cli:ops" ||
		!cs.PrunedAt.Equal(req.Now) || cs.Carried != 1 || cs.CarriedHash != hash {
		t.Errorf("PrunedStart = %+v; want seq 40, 39 removed, 1 carried hashed %s", cs, hash)
	}
	if cs := store.PrunedStart(req, cps[1], 39, &store.CarriedHasher{}); cs.Carried != 0 || cs.CarriedHash != "" {
		t.Errorf("PrunedStart with nothing carried = %d, %q; want 0 and no hash", cs.Carried, cs.CarriedHash)
	}
}

// TestHoldRequestHold: a hold gets a fresh id when the request gives none, and a hold whose
// whole range was pruned is refused.
func TestHoldRequestHold(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := (&store.HoldRequest{Now: now, From: 2, To: 5, Reason: "x", By: "ops"}).Hold(), (&store.HoldRequest{From: 2, To: 5}).Hold()
	if !strings.HasPrefix(a.ID, "hold_") || len(a.ID) != len("hold_")+32 || a.ID == b.ID || a.From != 2 || a.To != 5 || !a.CreatedAt.Equal(now) || !a.Active() {
		t.Errorf("Hold() = %+v and %+v; want fresh distinct ids and the request's range", a, b)
	}
	if h := (&store.HoldRequest{ID: "hold_given"}).Hold(); h.ID != "hold_given" {
		t.Errorf("Hold() id = %s, want the request's", h.ID)
	}
	start := &store.ChainStart{Seq: 10}
	for _, tc := range []struct {
		start  *store.ChainStart
		to     int64
		refuse bool
	}{{nil, 1, false}, {start, 9, true}, {start, 10, false}} {
		err := store.CheckHoldable(&store.Hold{From: 1, To: tc.to}, tc.start)
		if (err != nil) != tc.refuse || tc.refuse && !strings.Contains(err.Error(), "pruned already") {
			t.Errorf("CheckHoldable(to %d, start %+v) = %v, want refused %v", tc.to, tc.start, err, tc.refuse)
		}
	}
}
