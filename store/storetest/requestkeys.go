package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/store"
)

// keyed is c's reservation at now carrying request key rk for the suite's principal.
func (c call) keyed(now time.Time, rk string) *store.ReserveRequest {
	req := c.reserve(now)
	req.RequestKey, req.Agent, req.User = rk, agent, user
	return req
}

// wantReplay fails unless res replays the reservation first (same action id, attempt, lease).
func wantReplay(t *testing.T, what string, res *store.ReserveResult, first *store.Effect) {
	t.Helper()
	switch {
	case res.Refusal != nil:
		t.Fatalf("%s: refused %s (%s), want the reservation replayed", what, res.Refusal.Reason, res.Refusal.Detail)
	case !res.Reserved || !res.Replayed || res.Effect == nil:
		t.Fatalf("%s: Reserved %t, Replayed %t, Effect %+v; want replayed", what, res.Reserved, res.Replayed, res.Effect)
	case res.Effect.ActionID != first.ActionID || res.Effect.Attempt != first.Attempt ||
		!res.Effect.LeaseExpiresAt.Equal(first.LeaseExpiresAt) || res.Effect.State != store.Executing:
		t.Fatalf("%s: replayed %+v, want the reservation %+v", what, res.Effect, first)
	}
}

// wantKeyRefused fails unless err is a *store.RequestKeyError with reason.
func wantKeyRefused(t *testing.T, what string, res *store.ReserveResult, err error, reason string) {
	t.Helper()
	var ke *store.RequestKeyError
	if !errors.As(err, &ke) || !errors.Is(err, store.ErrRequestKeyMismatch) || ke.Reason != reason {
		t.Fatalf("%s: Reserve = %+v, %v; want a *RequestKeyError %s", what, res, err, reason)
	}
}

// testRequestKeys covers ReserveRequest.RequestKey: a reservation asked again with the same key
// (its first reply lost) is handed back unchanged while its attempt holds the effect, across a
// reopen; the key refuses another principal or another request, writing nothing; once the
// attempt ended, the key's request is decided as any duplicate is; racing askers with one key
// get one reservation.
func testRequestKeys(t *testing.T, b Backend) {
	t.Run("Replay", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.reserve(c.keyed(t0, "req-1"))
		if !first.Reserved || first.Replayed || first.Effect == nil {
			t.Fatalf("first keyed Reserve = %+v, want reserved, not replayed", first)
		}
		held := *first.Effect
		before := f.snapshot()
		// The caller lost the reply and asks again: another action id (a new process), the
		// same key and request.
		for i, at := range []time.Time{t0.Add(time.Second), t0.Add(lease - time.Millisecond)} {
			res := f.reserve(c.retry().keyed(at, "req-1"))
			wantReplay(t, "replay "+string(rune('1'+i)), res, &held)
			if len(res.Events) != 0 || res.Receipt != nil {
				t.Errorf("a replay wrote %d events and receipt %v", len(res.Events), res.Receipt)
			}
		}
		if diff := cmp.Diff(before, f.snapshot()); diff != "" {
			t.Errorf("replays wrote (-before +after):\n%s", diff)
		}
		// A lease extended by the holder is what a replay hands back.
		ext, err := f.st.ExtendLease(t.Context(), &store.ExtendRequest{Now: t0.Add(time.Second), Key: c.Key,
			ActionID: c.ActionID, Attempt: held.Attempt, Until: t0.Add(10 * lease)})
		if err != nil {
			t.Fatal(err)
		}
		res := f.reserve(c.retry().keyed(t0.Add(2*lease), "req-1"))
		wantReplay(t, "replay after the lease was extended", res, ext)
		// Without the key the same request is the duplicate it always was.
		if res := f.reserve(c.retry().reserve(t0.Add(2 * lease))); res.Refusal == nil || res.Refusal.Reason != "in_progress" {
			t.Errorf("the same request without its key: %+v, want refused in_progress", res.Refusal)
		}
	})

	t.Run("Read", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		kr, ok := f.st.(store.RequestKeyReader)
		if !ok {
			t.Fatalf("%T is no store.RequestKeyReader", f.st)
		}
		if _, err := kr.RequestKey(t.Context(), "req-none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RequestKey of a key never used: %v, want ErrNotFound", err)
		}
		c := newCall("charge:inv_1")
		first := f.reserve(c.keyed(t0, "req-1"))
		if !first.Reserved {
			t.Fatalf("keyed Reserve = %+v, want reserved", first)
		}
		rk, err := kr.RequestKey(t.Context(), "req-1")
		if err != nil {
			t.Fatal(err)
		}
		if rk.Key != "req-1" || rk.Agent != agent || rk.User != user || rk.EffectKey != c.Key ||
			rk.ActionID != first.Effect.ActionID || rk.Attempt != first.Effect.Attempt || rk.ActionHash == "" {
			t.Errorf("RequestKey = %+v, want the key naming the reservation %+v", rk, first.Effect)
		}
	})
	t.Run("SurvivesReopen", func(t *testing.T) {
		t.Parallel()
		url := b.New(t)
		st, err := b.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		c := newCall("charge:inv_2")
		first, err := st.Reserve(t.Context(), c.keyed(t0, "req-reopen"))
		if err != nil || !first.Reserved {
			t.Fatalf("keyed Reserve = %+v, %v", first, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		f := &fixture{t: t, b: b, url: url, st: openStore(t, b, url)}
		wantReplay(t, "replay after reopen", f.reserve(c.retry().keyed(t0.Add(time.Second), "req-reopen")), first.Effect)
	})

	t.Run("Mismatch", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_3")
		f.reserve(c.keyed(t0, "req-3"))
		before := f.snapshot()
		at := t0.Add(time.Second)

		other := c.retry().keyed(at, "req-3")
		other.Agent = "agent:intruder"
		res, err := f.st.Reserve(t.Context(), other)
		wantKeyRefused(t, "another agent", res, err, "request_key_other_principal")

		otherUser := c.retry().keyed(at, "req-3")
		otherUser.User = "user:eve"
		res, err = f.st.Reserve(t.Context(), otherUser)
		wantKeyRefused(t, "another user", res, err, "request_key_other_principal")

		args := c.retry()
		args.Hash = hashOf("other arguments")
		res, err = f.st.Reserve(t.Context(), args.keyed(at, "req-3"))
		wantKeyRefused(t, "another action hash", res, err, "request_key_other_action")

		elsewhere := newCall("charge:inv_elsewhere")
		elsewhere.Hash = c.Hash
		res, err = f.st.Reserve(t.Context(), elsewhere.keyed(at, "req-3"))
		wantKeyRefused(t, "another effect key", res, err, "request_key_other_effect_key")
		if diff := cmp.Diff(before, f.snapshot()); diff != "" {
			t.Errorf("refused keys wrote (-before +after):\n%s", diff)
		}

		a := f.granted(c.Hash)
		withApproval := c.retry()
		withApproval.ApprovalID = a.ID
		before = f.snapshot() // the grant is written; the refusals that follow write nothing
		res, err = f.st.Reserve(t.Context(), withApproval.keyed(at, "req-3"))
		wantKeyRefused(t, "another approval", res, err, "request_key_other_approval")
		if diff := cmp.Diff(before, f.snapshot()); diff != "" {
			t.Errorf("refused keys wrote (-before +after):\n%s", diff)
		}
		if got := f.approval(a.ID); got.Status != store.Granted {
			t.Errorf("the approval after a refused key is %s, want granted (unspent)", got.Status)
		}
	})

	t.Run("AfterTheOutcome", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		// Committed: the key's request is a duplicate, refused committed with the result.
		c := newCall("charge:inv_4")
		first := f.reserve(c.keyed(t0, "req-4"))
		f.record(c.record(t0.Add(time.Second), first.Effect.Attempt, store.Committed))
		res := f.reserve(c.retry().keyed(t0.Add(2*time.Second), "req-4"))
		if res.Replayed || res.Refusal == nil || res.Refusal.Reason != "committed" || string(res.Effect.Result) != string(chargeResult) {
			t.Errorf("key of a committed attempt: %+v, want refused committed with the result", res)
		}

		// Failed: the key's request renews the effect, and the key names the new attempt.
		d := newCall("charge:inv_5")
		first = f.reserve(d.keyed(t0, "req-5"))
		f.record(d.record(t0.Add(time.Second), first.Effect.Attempt, store.Failed))
		renewed := d.retry()
		res = f.reserve(renewed.keyed(t0.Add(2*time.Second), "req-5"))
		if res.Replayed || !res.Reserved || res.Effect.Attempt != 2 || res.Effect.ActionID != renewed.ActionID {
			t.Fatalf("key of a failed attempt: %+v, want attempt 2 reserved by %s", res, renewed.ActionID)
		}
		wantReplay(t, "replay of the renewed attempt", f.reserve(d.retry().keyed(t0.Add(3*time.Second), "req-5")), res.Effect)

		// A lapsed lease: refused ambiguous, as any contender is.
		e := newCall("charge:inv_6")
		f.reserve(e.keyed(t0, "req-6"))
		res = f.reserve(e.retry().keyed(t0.Add(2*lease), "req-6"))
		if res.Replayed || res.Refusal == nil || res.Refusal.Reason != "ambiguous" {
			t.Errorf("key of a lapsed lease: %+v, want refused ambiguous", res)
		}
	})

	t.Run("RefusalKeepsNoKey", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_7")
		f.reserve(c.keyed(t0, "req-holder"))
		// A second caller's keyed request is refused in_progress, and its key not stored: used
		// later for another request it is not a mismatch.
		res := f.reserve(c.retry().keyed(t0.Add(time.Second), "req-second"))
		if res.Refusal == nil || res.Refusal.Reason != "in_progress" {
			t.Fatalf("a second caller's key: %+v, want refused in_progress", res.Refusal)
		}
		other := newCall("charge:inv_8")
		if res := f.reserve(other.keyed(t0.Add(2*time.Second), "req-second")); !res.Reserved || res.Replayed {
			t.Errorf("the refused request's key reused for another request: %+v, want reserved", res)
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_9")
		before := f.snapshot()
		for _, rk := range []string{"has space", "nul\x00", "é", strings.Repeat("k", store.MaxRequestKey+1)} {
			if res, err := f.st.Reserve(t.Context(), c.keyed(t0, rk)); !errors.Is(err, store.ErrInvalidInput) {
				t.Errorf("Reserve with request key %q = %+v, %v; want ErrInvalidInput", rk, res, err)
			}
		}
		noAgent := c.keyed(t0, "req-9")
		noAgent.Agent = ""
		if _, err := f.st.Reserve(t.Context(), noAgent); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("Reserve with a request key and no agent = %v; want ErrInvalidInput", err)
		}
		if diff := cmp.Diff(before, f.snapshot()); diff != "" {
			t.Errorf("refused keys wrote (-before +after):\n%s", diff)
		}
		if res := f.reserve(c.keyed(t0, strings.Repeat("k", store.MaxRequestKey))); !res.Reserved {
			t.Errorf("a key of %d bytes: %+v, want reserved", store.MaxRequestKey, res.Refusal)
		}
	})

	t.Run("Racing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_race")
		const n = 8
		results := make([]*store.ReserveResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = f.st.Reserve(t.Context(), c.retry().keyed(t0, "req-race"))
			})
		}
		wg.Wait()
		var fresh *store.Effect
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("racer %d: %v", i, errs[i])
			}
			if res.Reserved && !res.Replayed {
				if fresh != nil {
					t.Fatalf("two racers with one key reserved: %s and %s", fresh.ActionID, res.Effect.ActionID)
				}
				fresh = res.Effect
			}
		}
		if fresh == nil {
			t.Fatal("no racer reserved")
		}
		for i, res := range results {
			if res.Replayed {
				wantReplay(t, "racer "+string(rune('0'+i)), res, fresh)
			} else if !res.Reserved {
				t.Errorf("racer %d refused %+v: one key, one reservation handed to every asker", i, res.Refusal)
			}
		}
	})
}
